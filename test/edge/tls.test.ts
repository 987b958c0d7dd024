/**
 * HTTPS in the edge (issue 14, DESIGN.md section 5b) with real TLS: a throwaway CA and a wildcard
 * certificate for *.burrow.test plus burrow.test (names resolved to 127.0.0.1 by test/wildcard-dns.ts,
 * as wildcard DNS would), `burrow edge --tls-cert --tls-key` and `burrow http --ca` as subprocesses,
 * public HTTPS requests and a WebSocket through the tunnel, SIGHUP to a certificate from another CA
 * while the tunnel and the WebSocket stay up, and the --http-port redirect with ACME challenges.
 */
import '../wildcard-dns.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { join } from 'node:path';
import { connect as tlsConnect, type PeerCertificate } from 'node:tls';
import { Agent, request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { RouteTable } from '../../src/client/routes.js';
import { runCli, spawnCli, startEdge, tempDirs, waitFor } from '../helpers.js';
import { makeCa, makeServerCert, wildcardDnsEnv } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const freshDir = tempDirs('burrow-tls-');

/** The certificate a new TLS connection to the edge is shown (verified against `ca`). */
async function peerCertificate(port: number, servername: string, ca: string): Promise<PeerCertificate> {
  const socket = tlsConnect({ host: '127.0.0.1', port, servername, ca });
  try {
    await once(socket, 'secureConnect');
    return socket.getPeerCertificate();
  } finally {
    socket.destroy();
  }
}

/** A local server: HTTP echoing what the edge forwarded, and a WebSocket echo on any path. */
async function startLocalWithWebSocket(): Promise<{ port: number; close(): Promise<void> }> {
  const server = createHttpServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ url: req.url, proto: req.headers['x-forwarded-proto'], host: req.headers['x-forwarded-host'] }));
  });
  const sockets = new WebSocketServer({ server });
  sockets.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      for (const client of sockets.clients) client.terminate();
      sockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function nextMessage(socket: WebSocket): Promise<string> {
  const [data] = (await once(socket, 'message')) as [Buffer];
  return data.toString('utf8');
}

test('an HTTPS edge: the client over wss:// with --ca, public HTTPS and a WebSocket, SIGHUP to a new CA keeps the tunnel, HTTP redirects', async () => {
  const dir = freshDir();
  const data = join(dir, 'data');
  const webroot = join(dir, 'webroot');
  const caA = makeCa(dir, 'ca-a');
  const caB = makeCa(dir, 'ca-b');
  const first = makeServerCert(dir, 'first', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], caA, { serial: 0x1001 });
  const second = makeServerCert(dir, 'second', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], caB, { serial: 0x2002 });
  const live = { cert: join(dir, 'live.pem'), key: join(dir, 'live.key') };
  copyFileSync(first.cert, live.cert);
  copyFileSync(first.key, live.key);
  const pemA = readFileSync(caA.cert, 'utf8');
  const pemB = readFileSync(caB.cert, 'utf8');
  const env = { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '' };

  const local = await startLocalWithWebSocket();
  const edge = await spawnCli(
    ['edge', '--port', '0', '--domain', TEST_DOMAIN, '--data', data, '--tls-cert', live.cert, '--tls-key', live.key, '--http-port', '0', '--acme-webroot', webroot],
    env,
    /redirecting http on 127\.0\.0\.1:(\d+) to HTTPS/,
  );
  const port = Number(/listening on https:\/\/burrow\.test:(\d+)/.exec(edge.output())![1]);
  const httpPort = Number(edge.match[1]);
  assert.doesNotMatch(edge.output(), /warning/, 'the wildcard certificate covers the domain and its subdomains');
  const created = await runCli(['admin', 'create-account', '--email', 'tls@example.test', '--data', data, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const token = JSON.parse(created.stdout).token.token as string;

  const client = await spawnCli(
    ['http', String(local.port), '--edge', `https://${TEST_DOMAIN}:${port}`, '--ca', caA.cert, '--token', token, '--no-inspect', '--subdomain', 'tlsdemo'],
    { ...env, ...wildcardDnsEnv() },
    /Forwarding (https:\/\/\S+) ->/,
  );
  const publicUrl = client.match[1]!;
  assert.equal(publicUrl, `https://tlsdemo.${TEST_DOMAIN}:${port}`);

  try {
    // Public HTTPS, the wildcard certificate verified by name.
    const trustA = new Agent({ connect: { ca: pemA } });
    const response = await request(`${publicUrl}/hello?x=1`, { dispatcher: trustA });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(await response.body.json(), { url: '/hello?x=1', proto: 'https', host: `tlsdemo.${TEST_DOMAIN}:${port}` });
    const api = await request(`https://${TEST_DOMAIN}:${port}/api/v1/instance`, { dispatcher: trustA });
    assert.equal(api.statusCode, 200);
    await api.body.dump();
    await trustA.close();

    // A public WebSocket through the tunnel over wss://.
    const socket = new WebSocket(`wss://tlsdemo.${TEST_DOMAIN}:${port}/chat`, { ca: pemA });
    await once(socket, 'open');
    socket.send('before the reload');
    assert.equal(await nextMessage(socket), 'before the reload');

    // SIGHUP with the files replaced by a certificate from another CA.
    assert.equal((await peerCertificate(port, `x.${TEST_DOMAIN}`, pemA)).serialNumber, '1001');
    copyFileSync(second.cert, live.cert);
    copyFileSync(second.key, live.key);
    edge.child.kill('SIGHUP');
    await waitFor(() => /certificate reloaded \(serial 2002/.test(edge.output()), 5_000, 'the reload line');
    assert.equal((await peerCertificate(port, `x.${TEST_DOMAIN}`, pemB)).serialNumber, '2002', 'new connections see the new certificate');
    assert.equal((await peerCertificate(port, TEST_DOMAIN, pemB)).serialNumber, '2002');
    await assert.rejects(peerCertificate(port, TEST_DOMAIN, pemA), /unable to verify|self.signed|issuer/i, 'the old CA no longer verifies new connections');

    // Established connections were not dropped: the public WebSocket answers, and the tunnel (whose
    // client trusts only CA A, so it could not have reconnected) still carries requests.
    socket.send('after the reload');
    assert.equal(await nextMessage(socket), 'after the reload');
    const trustB = new Agent({ connect: { ca: pemB } });
    const afterReload = await request(`${publicUrl}/after`, { dispatcher: trustB });
    assert.equal(afterReload.statusCode, 200);
    assert.equal(((await afterReload.body.json()) as { url: string }).url, '/after');
    assert.doesNotMatch(client.output(), /connection lost|reconnect/i, 'the tunnel stayed up');
    socket.close();
    await trustB.close();

    // A bad file on SIGHUP is reported and the running certificate kept.
    writeFileSync(live.key, 'not a key\n');
    edge.child.kill('SIGHUP');
    await waitFor(() => /certificate reload failed, keeping the current one: cannot use the key/.test(edge.output()), 5_000, 'the failed reload line');
    assert.equal((await peerCertificate(port, TEST_DOMAIN, pemB)).serialNumber, '2002');

    // Plain HTTP redirects to HTTPS with the same path and query; ACME challenges come from the webroot.
    const redirected = await request(`http://127.0.0.1:${httpPort}/webhooks/github?delivery=42&x=%20`, {
      method: 'POST',
      headers: { host: `tlsdemo.${TEST_DOMAIN}:${httpPort}` },
      body: '{}',
    });
    assert.equal(redirected.statusCode, 308);
    assert.equal(redirected.headers.location, `https://tlsdemo.${TEST_DOMAIN}:${port}/webhooks/github?delivery=42&x=%20`);
    await redirected.body.dump();
    // Only the edge's own names are redirected: no open redirect to whatever Host a client sends.
    const foreign = await request(`http://127.0.0.1:${httpPort}/x`, { headers: { host: 'evil.example' } });
    assert.equal(foreign.statusCode, 404);
    assert.deepEqual(Object.keys((await foreign.body.json()) as object), ['error']);
    mkdirSync(join(webroot, '.well-known', 'acme-challenge'), { recursive: true });
    writeFileSync(join(webroot, '.well-known', 'acme-challenge', 'Tok_en-123'), 'Tok_en-123.thumbprint');
    const challenge = await request(`http://127.0.0.1:${httpPort}/.well-known/acme-challenge/Tok_en-123`, { headers: { host: TEST_DOMAIN } });
    assert.equal(challenge.statusCode, 200);
    assert.equal(await challenge.body.text(), 'Tok_en-123.thumbprint');
    for (const missing of ['/.well-known/acme-challenge/unknown', '/.well-known/acme-challenge/..%2F..%2Fdata', '/.well-known/acme-challenge/a.b']) {
      const answer = await request(`http://127.0.0.1:${httpPort}${missing}`, { headers: { host: TEST_DOMAIN } });
      assert.equal(answer.statusCode, 404, missing);
      await answer.body.dump();
    }
  } finally {
    client.child.kill('SIGINT');
    await client.exited;
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
    await local.close();
  }
});

test('the edge speaks TLS 1.2 and 1.3 only, with forward-secret AEAD suites, on both ports', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const pem = readFileSync(ca.cert, 'utf8');
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  try {
    // The public port (node:tls) and the agent port (uWebSockets.js) follow the same rules.
    for (const port of [target.port, target.edge.agentPort]) {
      for (const version of ['TLSv1', 'TLSv1.1'] as const) {
        const socket = tlsConnect({ host: '127.0.0.1', port, servername: TEST_DOMAIN, ca: pem, minVersion: version, maxVersion: version, ciphers: 'DEFAULT@SECLEVEL=0' });
        const [error] = (await once(socket, 'error')) as [Error];
        assert.match(error.message, /protocol version|no protocols available|unsupported protocol/i, `${version} on port ${port}`);
      }
      const tls12 = tlsConnect({ host: '127.0.0.1', port, servername: TEST_DOMAIN, ca: pem, maxVersion: 'TLSv1.2' });
      await once(tls12, 'secureConnect');
      assert.equal(tls12.getProtocol(), 'TLSv1.2');
      assert.match(tls12.getCipher().name, /^ECDHE-.*(GCM|CHACHA20-POLY1305)/);
      tls12.destroy();
      const tls13 = tlsConnect({ host: '127.0.0.1', port, servername: TEST_DOMAIN, ca: pem });
      await once(tls13, 'secureConnect');
      assert.equal(tls13.getProtocol(), 'TLSv1.3');
      tls13.destroy();
    }
  } finally {
    await target.close();
  }
});

test('another name is served with its own certificate by SNI (--tls-sni)', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const main = makeServerCert(dir, 'main', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca, { serial: 0x3003 });
  const other = makeServerCert(dir, 'other', ['hooks.example.test'], ca, { serial: 0x4004 });
  const pem = readFileSync(ca.cert, 'utf8');
  const target = await startEdge({
    domain: TEST_DOMAIN,
    tls: { certFile: main.cert, keyFile: main.key, serverNames: [{ name: 'hooks.example.test', certFile: other.cert, keyFile: other.key }] },
  });
  try {
    assert.equal((await peerCertificate(target.port, 'hooks.example.test', pem)).serialNumber, '4004');
    assert.equal((await peerCertificate(target.port, `a.${TEST_DOMAIN}`, pem)).serialNumber, '3003');
    // The SNI name's connections reach the same edge (its routes are installed for that name too).
    const agent = new Agent({ connect: { ca: pem, servername: 'hooks.example.test' } });
    const response = await request(`https://127.0.0.1:${target.port}/api/v1/instance`, { dispatcher: agent, headers: { host: TEST_DOMAIN } });
    assert.equal(response.statusCode, 200);
    await response.body.dump();
    await agent.close();
    // And the default certificate's names keep theirs.
    const main = new Agent({ connect: { ca: pem } });
    const apex = await request(`https://${TEST_DOMAIN}:${target.port}/api/v1/instance`, { dispatcher: main });
    assert.equal(apex.statusCode, 200);
    await apex.body.dump();
    await main.close();
  } finally {
    await target.close();
  }
});

test('a bad certificate is refused by the client: non-zero exit, one line naming the problem', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const selfSigned = makeServerCert(dir, 'self', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], null);
  const wrongName = makeServerCert(dir, 'wrong', ['*.elsewhere.test', 'elsewhere.test'], ca);
  const expired = makeServerCert(dir, 'expired', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca, { expired: true });
  const env = { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', ...wildcardDnsEnv() };

  // The edge itself refuses to start on an expired certificate; a client meeting one (here from a plain
  // TLS server, since the edge will not serve it) names it.
  const refusedStart = await runCli(['edge', '--port', '0', '--data', join(dir, 'data'), '--domain', TEST_DOMAIN, '--tls-cert', expired.cert, '--tls-key', expired.key], env);
  assert.equal(refusedStart.code, 1);
  assert.match(refusedStart.stderr, /^burrow: cannot start the edge: the certificate \S+ expired on /);
  const { createServer: createTlsServer } = await import('node:tls');
  const expiredServer = createTlsServer({ cert: readFileSync(expired.cert), key: readFileSync(expired.key) }, (socket) => socket.destroy());
  expiredServer.listen(0, '127.0.0.1');
  await once(expiredServer, 'listening');

  const selfEdge = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: selfSigned.cert, keyFile: selfSigned.key } });
  const wrongEdge = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: wrongName.cert, keyFile: wrongName.key } });
  try {
    const cases: [string, string[], RegExp][] = [
      ['self-signed, no --ca', [`https://${TEST_DOMAIN}:${selfEdge.port}`], /TLS certificate problem: self[- ]signed certificate \(DEPTH_ZERO_SELF_SIGNED_CERT\); trust it with --ca FILE/],
      ['wrong name', [`https://${TEST_DOMAIN}:${wrongEdge.port}`, '--ca', ca.cert], /TLS certificate problem: Hostname\/IP does not match certificate's altnames: .*\(ERR_TLS_CERT_ALTNAME_INVALID\)/],
      ['expired', [`https://${TEST_DOMAIN}:${(expiredServer.address() as { port: number }).port}`, '--ca', ca.cert], /TLS certificate problem: certificate has expired \(CERT_HAS_EXPIRED\)/],
      ['a private CA not trusted', [`https://${TEST_DOMAIN}:${wrongEdge.port}`], /TLS certificate problem: unable to (verify the first certificate|get local issuer certificate)/],
    ];
    for (const [name, edgeArgs, expected] of cases) {
      const result = await runCli(['http', '3000', '--no-inspect', '--token', 'svc_pat_00000000_000000000000000000000000000000000000', '--edge', ...edgeArgs], env);
      assert.equal(result.code, 1, name);
      assert.match(result.stderr, expected, name);
      assert.equal(result.stderr.split('\n').length, 2, `${name}: one line`);
      assert.match(result.stderr, /^burrow: cannot connect to the edge at https:\/\//, name);
    }
  } finally {
    expiredServer.close();
    await selfEdge.close();
    await wrongEdge.close();
  }
});

test('NODE_EXTRA_CA_CERTS trusts a private CA like --ca does', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  try {
    const { account, token } = await target.edge.store.createAccount('extra-ca@example.test', 'FREE', 'test');
    assert.ok(account.id !== '');
    const client = await spawnCli(
      ['http', '3000', '--no-inspect', '--token', token.token, '--edge', `https://${TEST_DOMAIN}:${target.port}`],
      { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', NODE_EXTRA_CA_CERTS: ca.cert, ...wildcardDnsEnv() },
      /Forwarding https:\/\/\S+\.burrow\.test:\d+ ->/,
    );
    client.child.kill('SIGINT');
    await client.exited;
  } finally {
    await target.close();
  }
});

test('the TunnelClient library over wss:// with a CA: READY gives the https URL', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  const { token } = await target.edge.store.createAccount('library@example.test', 'FREE', 'test');
  const client = new TunnelClient({ edge: `https://${TEST_DOMAIN}:${target.port}`, token: token.token, routes: new RouteTable(3000, []), ca: readFileSync(ca.cert) });
  try {
    const ready = await client.start();
    assert.equal(ready.publicUrl, `https://${ready.subdomain}.${TEST_DOMAIN}:${target.port}`);
    assert.equal(target.edge.url, `https://${TEST_DOMAIN}:${target.port}`);
  } finally {
    await client.close();
    await target.close();
  }
});

test('a TLS port another edge holds is refused, although the TLS port is bound with SO_REUSEPORT for reloads', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const tls = { certFile: cert.cert, keyFile: cert.key };
  const first = await startEdge({ domain: TEST_DOMAIN, tls });
  try {
    await assert.rejects(startEdge({ domain: TEST_DOMAIN, tls, port: first.port, dataDir: freshDir() }), /cannot listen: cannot bind 127\.0\.0\.1:\d+ \(in use\)/);
    // Nor can a plain edge share it.
    await assert.rejects(startEdge({ port: first.port, dataDir: freshDir() }), /cannot listen/);
  } finally {
    await first.close();
  }
});

test('burrow login --ca checks the token against an HTTPS edge with a private CA; without --ca the certificate is named', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  const env = { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', ...wildcardDnsEnv() };
  try {
    const { token } = await target.edge.store.createAccount('login@example.test', 'FREE', 'test');
    const edgeUrl = `https://${TEST_DOMAIN}:${target.port}`;
    const untrusted = await runCli(['login', token.token, '--edge', edgeUrl], env);
    assert.equal(untrusted.code, 1);
    assert.match(untrusted.stderr, /UNABLE_TO_VERIFY_LEAF_SIGNATURE/);
    const trusted = await runCli(['login', token.token, '--edge', edgeUrl, '--ca', ca.cert], env);
    assert.equal(trusted.code, 0, trusted.stderr);
    assert.match(trusted.stdout, new RegExp(`^logged in to ${edgeUrl.replace(/\./g, '\\.')} as login@example\\.test`));
  } finally {
    await target.close();
  }
});
