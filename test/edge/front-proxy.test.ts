/**
 * Debian's nginx as the TLS-terminating front proxy (issue 14), running the shipped deploy/nginx-burrow.conf
 * as docs/deploy.md ("Behind a front proxy") tells an operator to: the same substitutions, a certificate
 * for <domain> and *.<domain> (here a throwaway CA made with openssl), the edge with --trust-proxy
 * 127.0.0.1/32 behind it, the real client over wss:// through nginx.
 *
 * Addresses: nginx listens on 127.0.0.1 and reaches the edge from 127.0.0.1 (the trusted proxy); public
 * clients connect to nginx from 127.0.0.2, so "the real client address" is told apart from nginx's; an
 * untrusted peer connects straight to the edge from 127.0.0.3. Names under burrow.test resolve to
 * 127.0.0.1 as wildcard DNS would (test/wildcard-dns.ts, preloaded into the client's process too).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import '../wildcard-dns.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { wildcardDnsEnv } from '../tls-fixtures.js';
import { ensureNginx, freePorts, frontProxySkip, installAsDeployGuide, makeCertificates, startNginx, type RunningNginx } from '../nginx-front.js';
import { ROOT, call, createAccount, readBody, spawnCli, startEdge, startLocal, tempDirs, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const skip = frontProxySkip();

const DOMAIN = TEST_DOMAIN;
const SUBDOMAIN = 'hooks';
const PUBLIC_CLIENT = '127.0.0.2';
const UNTRUSTED_PEER = '127.0.0.3';
const makeDir = tempDirs('burrow-front-proxy-');

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

describe('nginx in front of the edge (deploy/nginx-burrow.conf)', { skip }, () => {
  let dir: string;
  let ca: Buffer;
  let caFile: string;
  let target: TestEdge;
  let owner: TestAccount;
  let local: LocalServer;
  let nginx: RunningNginx | undefined;
  let tunnel: Awaited<ReturnType<typeof spawnCli>>;
  let httpsPort: number;
  let httpPort: number;
  let publicClient: Agent;
  const seen: Seen[] = [];
  const upgrades: IncomingMessage['headers'][] = [];
  let releaseSecondEvent: () => void = () => {};

  before(async () => {
    dir = makeDir();
    const certificates = makeCertificates(dir, DOMAIN);
    caFile = certificates.caFile;
    ca = certificates.caPem;

    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        seen.push({ url: req.url!, headers: req.headers, body: body.toString('utf8') });
        if (req.url === '/events') {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          res.write('data: one\n\n');
          releaseSecondEvent = () => res.end('data: two\n\n');
          return;
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ length: body.length }));
      });
    });
    const sockets = new WebSocketServer({ server: local.server });
    sockets.on('connection', (socket, req) => {
      upgrades.push(req.headers);
      socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
    });

    [httpsPort, httpPort] = (await freePorts(2)) as [number, number];
    target = await startEdge({
      domain: DOMAIN,
      trustProxy: '127.0.0.1/32',
      publicScheme: 'https',
      publicPort: httpsPort,
      accessLog: join(dir, 'edge-access.log'),
    });
    owner = await createAccount(target, 'PRO');

    // An ACME challenge answer in the webroot, then nginx with the shipped file (test/nginx-front.ts).
    const webroot = join(dir, 'webroot');
    mkdirSync(join(webroot, '.well-known', 'acme-challenge'), { recursive: true });
    writeFileSync(join(webroot, '.well-known', 'acme-challenge', 'token-1'), 'challenge answer');
    // docs/deploy.md's step 2 as written: its sed, with this test's domain, edge and certificates.
    const installed = installAsDeployGuide(dir, { DOMAIN, EDGE: `127.0.0.1:${target.port}`, AGENT: `127.0.0.1:${target.edge.agentPort}`, CERTS: certificates.certDir });
    assert.doesNotMatch(installed, /tunnels\.example\.com|127\.0\.0\.1:808[01]/, 'every placeholder was replaced');
    assert.match(installed, new RegExp(`ssl_certificate +${certificates.certDir}/fullchain\\.pem;`));
    nginx = await startNginx(dir, {
      shipped: 'nginx-burrow.conf',
      domain: DOMAIN,
      certDir: certificates.certDir,
      webroot,
      httpsPort,
      httpPort,
      edges: [],
      installed,
    });

    publicClient = new Agent({ localAddress: PUBLIC_CLIENT, connect: { ca } });
    // The real client, over wss:// through nginx, trusting the throwaway CA (docs/deploy.md, TLS: --ca).
    tunnel = await spawnCli(
      ['http', String(local.port), '--edge', `https://${DOMAIN}:${httpsPort}`, '--ca', caFile, '--token', owner.token, '--subdomain', SUBDOMAIN, '--no-inspect', '--log', 'text'],
      { ...wildcardDnsEnv(), XDG_CONFIG_HOME: join(dir, 'config') },
      /Forwarding (\S+)/,
    );
  });

  after(async () => {
    await publicClient?.close();
    if (tunnel !== undefined) {
      tunnel.child.kill('SIGINT');
      await tunnel.exited;
    }
    await nginx?.stop();
    await local?.close();
    await target?.close();
  });

  const publicUrl = (path: string): string => `https://${SUBDOMAIN}.${DOMAIN}:${httpsPort}${path}`;

  async function captureOf(path: string): Promise<{ client_address: string; request: { headers: [string, string][] } }> {
    let id = '';
    await waitFor(async () => {
      const list = await call(target, 'GET', `/api/v1/requests?subdomain=${SUBDOMAIN}&limit=50`, { token: owner.token, host: DOMAIN });
      id = (list.json.requests as { id: string; path: string }[]).find((entry) => entry.path === path)?.id ?? '';
      return id !== '';
    }, 5_000, `the capture of ${path}`);
    return (await call(target, 'GET', `/api/v1/requests/${id}`, { token: owner.token, host: DOMAIN })).json;
  }

  test('the tunnel came up through nginx and prints the public HTTPS URL', () => {
    assert.equal(tunnel.match[1], `https://${SUBDOMAIN}.${DOMAIN}:${httpsPort}`);
    assert.equal(target.edge.registry.session(SUBDOMAIN)?.subdomain, SUBDOMAIN);
  });

  test('a public HTTPS request: the local server and the capture see https and the real client address', async () => {
    const response = await request(publicUrl('/hook?x=1'), {
      method: 'POST',
      body: '{"event":"push"}',
      headers: { 'content-type': 'application/json' },
      dispatcher: publicClient,
    });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(await response.body.json(), { length: 16 });
    const got = seen.find((entry) => entry.url === '/hook?x=1')!;
    assert.equal(got.body, '{"event":"push"}');
    assert.equal(got.headers['x-forwarded-proto'], 'https');
    // nginx appended the address it saw, the edge the address it got the request from (nginx).
    assert.equal(got.headers['x-forwarded-for'], `${PUBLIC_CLIENT}, 127.0.0.1`);
    assert.equal(got.headers['x-forwarded-host'], `${SUBDOMAIN}.${DOMAIN}:${httpsPort}`);
    const capture = await captureOf('/hook?x=1');
    assert.equal(capture.client_address, PUBLIC_CLIENT);
    assert.ok(capture.request.headers.some(([name, value]) => name.toLowerCase() === 'x-forwarded-proto' && value === 'https'));
    // The access log names the same client, not nginx.
    let line: { client: string } | undefined;
    await waitFor(() => {
      const text = readFileSync(join(dir, 'edge-access.log'), 'utf8');
      line = text.split('\n').filter((entry) => entry !== '').map((entry) => JSON.parse(entry)).find((entry) => entry.path === '/hook?x=1');
      return line !== undefined;
    }, 5_000, 'the access log line');
    assert.equal(line!.client, PUBLIC_CLIENT);
  });

  test('a request the edge refuses (no such tunnel) is access-logged with the real client address', async () => {
    const response = await request(`https://nobody.${DOMAIN}:${httpsPort}/refused`, { dispatcher: publicClient });
    assert.equal(response.statusCode, 404);
    await response.body.dump();
    let line: { client: string; error: string } | undefined;
    await waitFor(() => {
      const text = readFileSync(join(dir, 'edge-access.log'), 'utf8');
      line = text.split('\n').filter((entry) => entry !== '').map((entry) => JSON.parse(entry)).find((entry) => entry.path === '/refused');
      return line !== undefined;
    }, 5_000, 'the access log line');
    assert.equal(line!.error, 'TUNNEL_NOT_FOUND');
    assert.equal(line!.client, PUBLIC_CLIENT);
  });

  test('a client\'s forged X-Forwarded-* through nginx do not make it someone else', async () => {
    const response = await request(publicUrl('/forged'), {
      headers: { 'x-forwarded-for': '203.0.113.66', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'evil.example' },
      dispatcher: publicClient,
    });
    assert.equal(response.statusCode, 200);
    await response.body.dump();
    const got = seen.find((entry) => entry.url === '/forged')!;
    assert.equal(got.headers['x-forwarded-proto'], 'https');
    assert.equal(got.headers['x-forwarded-host'], `${SUBDOMAIN}.${DOMAIN}:${httpsPort}`);
    assert.equal(got.headers['x-forwarded-for'], `203.0.113.66, ${PUBLIC_CLIENT}, 127.0.0.1`);
    assert.equal((await captureOf('/forged')).client_address, PUBLIC_CLIENT);
  });

  test('an untrusted peer straight at the edge: its forged X-Forwarded-* are ignored', async () => {
    const direct = new Agent({ localAddress: UNTRUSTED_PEER });
    try {
      const response = await request(`http://127.0.0.1:${target.port}/direct`, {
        headers: { host: `${SUBDOMAIN}.${DOMAIN}`, 'x-forwarded-for': '203.0.113.77', 'x-forwarded-proto': 'gopher', 'x-forwarded-host': 'evil.example' },
        dispatcher: direct,
      });
      assert.equal(response.statusCode, 200);
      await response.body.dump();
    } finally {
      await direct.close();
    }
    const got = seen.find((entry) => entry.url === '/direct')!;
    // The edge's own scheme (its public one, https here), never the peer's word.
    assert.equal(got.headers['x-forwarded-proto'], 'https');
    assert.equal(got.headers['x-forwarded-host'], `${SUBDOMAIN}.${DOMAIN}`);
    assert.equal(got.headers['x-forwarded-for'], `203.0.113.77, ${UNTRUSTED_PEER}`);
    assert.equal((await captureOf('/direct')).client_address, UNTRUSTED_PEER);
  });

  test('a streaming response (server-sent events) is not held back by nginx', async () => {
    // Bounded: a buffering proxy would hold the event until the stream ends, which is never here.
    const firstEvent = async (): Promise<{ response: Awaited<ReturnType<typeof request>>; chunks: AsyncIterator<unknown>; text: string }> => {
      const response = await request(publicUrl('/events'), { dispatcher: publicClient });
      const chunks = response.body[Symbol.asyncIterator]();
      let text = '';
      while (!text.includes('data: one\n\n')) {
        const next = await chunks.next();
        assert.ok(next.done !== true, 'the stream ended before its first event');
        text += Buffer.from(next.value as Buffer).toString();
      }
      return { response, chunks, text };
    };
    let timer: NodeJS.Timeout | undefined;
    const held = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        releaseSecondEvent();
        reject(new Error('the first event was held back until the stream ended (is nginx buffering?)'));
      }, 10_000);
    });
    const { response, chunks, text: first } = await Promise.race([firstEvent(), held]).finally(() => clearTimeout(timer));
    let text = first;
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-type'], 'text/event-stream');
    // The first event arrived while the local server still holds the response open.
    assert.ok(!text.includes('two'));
    releaseSecondEvent();
    for (let next = await chunks.next(); next.done !== true; next = await chunks.next()) text += Buffer.from(next.value as Buffer).toString();
    assert.equal(text, 'data: one\n\ndata: two\n\n');
  });

  test('a body of several megabytes passes whole (client_max_body_size follows --max-body)', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024, 7);
    const response = await request(publicUrl('/upload'), { method: 'PUT', body, dispatcher: publicClient });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(await response.body.json(), { length: body.length });
  });

  test('a public WebSocket passes through nginx and the tunnel, with https and the real client address', async () => {
    const socket = new WebSocket(`wss://${SUBDOMAIN}.${DOMAIN}:${httpsPort}/live`, { ca, localAddress: PUBLIC_CLIENT });
    try {
      await once(socket, 'open');
      socket.send('ping through nginx');
      const [message] = (await once(socket, 'message')) as [Buffer];
      assert.equal(message.toString(), 'ping through nginx');
      const headers = upgrades.at(-1)!;
      assert.equal(headers['x-forwarded-proto'], 'https');
      assert.equal(headers['x-forwarded-for'], `${PUBLIC_CLIENT}, 127.0.0.1`);
    } finally {
      socket.close();
    }
  });

  test('plain HTTP redirects to HTTPS with 308 (a webhook POST stays a POST), except certbot\'s webroot', async () => {
    const plain = new Agent({ localAddress: PUBLIC_CLIENT });
    try {
      const redirect = await request(`http://${SUBDOMAIN}.${DOMAIN}:${httpPort}/hook?x=2`, { dispatcher: plain });
      await redirect.body.dump();
      assert.equal(redirect.statusCode, 308);
      assert.equal(redirect.headers.location, `https://${SUBDOMAIN}.${DOMAIN}/hook?x=2`);
      const post = await request(`http://${SUBDOMAIN}.${DOMAIN}:${httpPort}/webhook`, { method: 'POST', body: '{"event":"ping"}', headers: { 'content-type': 'application/json' }, dispatcher: plain });
      await post.body.dump();
      assert.equal(post.statusCode, 308, 'a 301 would let the sender re-send the POST as a GET');
      assert.equal(post.headers.location, `https://${SUBDOMAIN}.${DOMAIN}/webhook`);
      const challenge = await request(`http://${DOMAIN}:${httpPort}/.well-known/acme-challenge/token-1`, { dispatcher: plain });
      assert.equal(challenge.statusCode, 200);
      assert.equal(await challenge.body.text(), 'challenge answer');
    } finally {
      await plain.close();
    }
  });
});

test('ensure-nginx installs with apt-get only on Linux with apt-get; elsewhere the front-proxy test is skipped, saying why', () => {
  const yes = (): boolean => true;
  const no = (): boolean => false;
  assert.equal(ensureNginx.nginxPlan({ platform: 'darwin', exists: false, explicit: false, aptGet: yes }), 'skip');
  assert.equal(ensureNginx.nginxPlan({ platform: 'linux', exists: false, explicit: false, aptGet: no }), 'skip');
  assert.equal(ensureNginx.nginxPlan({ platform: 'linux', exists: false, explicit: true, aptGet: yes }), 'skip');
  assert.equal(ensureNginx.nginxPlan({ platform: 'linux', exists: false, explicit: false, aptGet: yes }), 'apt');
  assert.equal(ensureNginx.nginxPlan({ platform: 'darwin', exists: true, explicit: false, aptGet: no }), 'ready');
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'ensure-nginx.mjs')], { env: { ...process.env, BURROW_NGINX: '/nonexistent/nginx' }, encoding: 'utf8' });
  assert.equal(run.status, 0, 'a missing nginx does not stop the other tests');
  assert.match(run.stderr, /the front-proxy test will be skipped: no nginx at \/nonexistent\/nginx; .*BURROW_NGINX=/);
});
