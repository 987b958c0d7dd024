/**
 * Issue 14, the client's side for every command that sends the token to the edge, not only `burrow
 * http` and `burrow login`: no token in clear text to an edge off this machine without --insecure
 * (refused before any connection), --ca (then BURROW_CA, then the CA "burrow login --ca" saved) to
 * trust a private CA, and a bad certificate named in one line, against a real HTTPS edge.
 */
import '../wildcard-dns.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { echo, freePort, runCli, spawnCli, startClient, startEdge, startLocal, tempDirs } from '../helpers.js';
import { makeCa, makeServerCert, wildcardDnsEnv } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const freshDir = tempDirs('burrow-trust-commands-');
const TOKEN = 'svc_pat_00000000_000000000000000000000000000000000000';
const REFUSAL = /^burrow: refusing to send the token in clear text to [^ ]+: the edge URL is http:\/\/, not https:\/\/; use https:\/\/, or --insecure to send it anyway\n$/;

/** Every command that sends the token to the edge's API, with the arguments it needs to get there. */
async function commandsToTheEdge(): Promise<[string, string[]][]> {
  // Nothing listens here, so replay falls back to the edge's API.
  const noInspector = `http://127.0.0.1:${await freePort()}`;
  return [
    ['tokens list', ['tokens', 'list']],
    ['tokens create', ['tokens', 'create', '--label', 'ci']],
    ['tokens revoke', ['tokens', 'revoke', 'tok_ffffffff']],
    ['tunnels list', ['tunnels', 'list']],
    ['tunnels show', ['tunnels', 'show', 'demo']],
    ['tunnels close', ['tunnels', 'close', 'demo']],
    ['requests', ['requests', 'demo']],
    ['requests show', ['requests', 'show', 'req_00000000000000000000000000']],
    ['reserve', ['reserve', 'demo']],
    ['reservations', ['reservations']],
    ['reservations release', ['reservations', 'release', 'demo']],
    ['queue', ['queue', 'demo']],
    ['queue pause', ['queue', 'pause', 'demo']],
    ['replay (to the edge)', ['replay', 'req_00000000000000000000000000', '--inspector', noInspector]],
  ];
}

test('every command refuses to send the token in clear text to a non-loopback edge without --insecure, before connecting', async () => {
  const env = { XDG_CONFIG_HOME: join(freshDir(), 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CA: '', ...wildcardDnsEnv() };
  // burrow.test resolves to 127.0.0.1 in the subprocesses (wildcard DNS), yet its name is not loopback:
  // a connection here would be a token sent in clear text across a network.
  const received: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk.toString('latin1'));
      socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 56\r\n\r\n{"error":{"code":"UNAUTHORIZED","message":"Bad token."}}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const listening = `http://${TEST_DOMAIN}:${(server.address() as { port: number }).port}`;
  try {
    for (const [name, args] of await commandsToTheEdge()) {
      // edge.invalid has no DNS at all: a connection attempt would end in "cannot reach the edge (ENOTFOUND)".
      const invalid = await runCli([...args, '--token', TOKEN, '--edge', 'http://edge.invalid:8080'], env);
      assert.equal(invalid.code, 1, name);
      assert.match(invalid.stderr, REFUSAL, name);
      assert.match(invalid.stderr, /edge\.invalid:8080/, name);

      // The same edge from BURROW_EDGE, with --json: the refusal in the spec's error shape.
      const fromEnv = await runCli([...args, '--json'], { ...env, BURROW_EDGE: listening, BURROW_TOKEN: TOKEN });
      assert.equal(fromEnv.code, 1, name);
      const error = (JSON.parse(fromEnv.stderr) as { error: { code: string; message: string } }).error;
      assert.match(error.message, /^refusing to send the token in clear text to burrow\.test:\d+/, name);
      assert.equal(sockets.size, 0, `${name}: no connection reached the edge`);
    }

    // With --insecure the token goes (here to a listener that refuses it), as the user asked.
    for (const args of [['tokens', 'list'], ['queue', 'demo']]) {
      const insecure = await runCli([...args, '--insecure', '--token', TOKEN, '--edge', listening], env);
      assert.equal(insecure.code, 1);
      assert.equal(insecure.stderr, 'burrow: UNAUTHORIZED: Bad token.\n');
    }
    assert.equal(sockets.size, 2);
    assert.match(received.join(''), new RegExp(`authorization: Bearer ${TOKEN}`, 'i'));
  } finally {
    for (const socket of sockets) socket.destroy();
    server.close();
  }
});

test('tokens list and requests with --ca against a real HTTPS edge; without it the certificate problem is named in one line', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  // Plain HTTP where TLS is expected: a Node server answers the ClientHello with a 400, a plain edge not at all.
  const plain = await startLocal(echo);
  const plainEdge = await startEdge({ domain: TEST_DOMAIN });
  const local = await startLocal(echo);
  const env = { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CA: '', ...wildcardDnsEnv() };
  const edgeUrl = `https://${TEST_DOMAIN}:${target.port}`;
  const trust = new Agent({ connect: { ca: readFileSync(ca.cert, 'utf8') } });
  const { token } = await target.edge.store.createAccount('ca-commands@example.test', 'FREE', 'test');
  const tunnel = await startClient(target, token.token, local.port, { edge: edgeUrl, ca: readFileSync(ca.cert), subdomain: 'tlsrequests' });
  try {
    const sent = await request(`${tunnel.publicUrl}/webhook?n=1`, { method: 'POST', body: '{}', dispatcher: trust });
    assert.equal(sent.statusCode, 200);
    await sent.body.dump();

    const tokens = await runCli(['tokens', 'list', '--json', '--edge', edgeUrl, '--token', token.token, '--ca', ca.cert], env);
    assert.equal(tokens.code, 0, tokens.stderr);
    assert.deepEqual(
      (JSON.parse(tokens.stdout) as { tokens: { id: string }[] }).tokens.map((t) => t.id),
      [token.id],
    );
    // The capture is written by the edge's batch; the listing shows it once committed.
    let requests = await runCli(['requests', 'tlsrequests', '--edge', edgeUrl, '--token', token.token, '--ca', ca.cert], env);
    for (let tries = 0; tries < 20 && !/POST/.test(requests.stdout); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      requests = await runCli(['requests', 'tlsrequests', '--edge', edgeUrl, '--token', token.token, '--ca', ca.cert], env);
    }
    assert.equal(requests.code, 0, requests.stderr);
    assert.match(requests.stdout, /POST\s+200\s+.*\/webhook\?n=1/);

    const cases: [string, string[], RegExp][] = [
      ['tokens list without --ca', ['tokens', 'list', '--edge', edgeUrl], /TLS certificate problem: unable to verify the first certificate \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\); trust the edge's CA with --ca FILE/],
      ['requests without --ca', ['requests', 'tlsrequests', '--edge', edgeUrl], /TLS certificate problem: .*\(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)/],
      ['https:// to a plain-HTTP edge', ['tokens', 'list', '--edge', `https://${TEST_DOMAIN}:${plain.port}`, '--ca', ca.cert], /TLS handshake failed \(.*\): the edge does not speak TLS on this port; use its http:\/\/ URL or give it --tls-cert$/m],
      // The edge's public listener answers a ClientHello with an HTTP 400 (it is not HTTP): named at once.
      ['https:// to a plain edge', ['requests', 'tlsrequests', '--edge', `https://${TEST_DOMAIN}:${plainEdge.port}`, '--ca', ca.cert],
        /TLS handshake failed \(.*\): the edge does not speak TLS on this port; use its http:\/\/ URL or give it --tls-cert$/m],
    ];
    for (const [name, args, expected] of cases) {
      const failed = await runCli([...args, '--token', token.token], env);
      assert.equal(failed.code, 1, name);
      assert.match(failed.stderr, /^burrow: cannot connect to the edge at https:\/\/burrow\.test:\d+: (TLS |the connection and its TLS handshake)/, name);
      assert.match(failed.stderr, expected, name);
      assert.equal(failed.stderr.split('\n').length, 2, `${name}: one line`);
    }
  } finally {
    await tunnel.client.close();
    await trust.close();
    await local.close();
    await plain.close();
    await plainEdge.close();
    await target.close();
  }
});

test('the CA "burrow login --ca" saved is used by later commands (burrow http too); BURROW_CA and --ca come first', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  const config = join(dir, 'config');
  const env = { XDG_CONFIG_HOME: config, BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CA: '', ...wildcardDnsEnv() };
  const edgeUrl = `https://${TEST_DOMAIN}:${target.port}`;
  try {
    const { token } = await target.edge.store.createAccount('saved-ca@example.test', 'FREE', 'test');
    // A relative --ca, from the directory it is relative to: the config keeps the absolute path.
    const login = await runCli(['login', token.token, '--edge', edgeUrl, '--ca', 'ca.pem', '--json'], env, 20_000, dir);
    assert.equal(login.code, 0, login.stderr);
    assert.equal((JSON.parse(login.stdout) as { ca: string }).ca, ca.cert);
    const saved = JSON.parse(readFileSync(join(config, 'burrow', 'config.json'), 'utf8')) as Record<string, string>;
    assert.deepEqual(saved, { edge: edgeUrl, token: token.token, ca: ca.cert });

    // No --ca, no BURROW_CA: the saved CA verifies the edge (run from elsewhere, as any later command).
    const later = await runCli(['tokens', 'list', '--json'], env);
    assert.equal(later.code, 0, later.stderr);
    assert.equal((JSON.parse(later.stdout) as { tokens: unknown[] }).tokens.length, 1);
    const reservations = await runCli(['reservations'], env);
    assert.equal(reservations.code, 0, reservations.stderr);
    const tunnel = await spawnCli(['http', '3000', '--no-inspect'], env, /Forwarding (https:\/\/\S+) ->/);
    assert.match(tunnel.match[1]!, new RegExp(`^https://[a-z0-9-]+\\.${TEST_DOMAIN.replace('.', '\\.')}:${target.port}$`));
    tunnel.child.kill('SIGINT');
    await tunnel.exited;

    // BURROW_CA comes before the config file, --ca before both: each is the file that is read.
    const missing = join(dir, 'missing.pem');
    const fromEnv = await runCli(['tunnels', 'list'], { ...env, BURROW_CA: missing });
    assert.equal(fromEnv.code, 1);
    assert.equal(fromEnv.stderr, `burrow: cannot read BURROW_CA ${missing}: no such file\n`);
    const fromFlag = await runCli(['tunnels', 'list', '--ca', ca.cert], { ...env, BURROW_CA: missing });
    assert.equal(fromFlag.code, 0, fromFlag.stderr);
    const badFlag = await runCli(['tunnels', 'list', '--ca', cert.key], env);
    assert.equal(badFlag.code, 1);
    assert.equal(badFlag.stderr, `burrow: --ca ${cert.key} is not a PEM certificate\n`);

    // Logging in again to the same edge keeps the saved CA; to another edge without --ca forgets it.
    const same = await runCli(['login', token.token], env);
    assert.equal(same.code, 0, same.stderr);
    assert.equal((JSON.parse(readFileSync(join(config, 'burrow', 'config.json'), 'utf8')) as { ca?: string }).ca, ca.cert);
    const otherEdge = `https://api.${TEST_DOMAIN}:${target.port}`;
    const other = await runCli(['login', token.token, '--edge', otherEdge], { ...env, NODE_EXTRA_CA_CERTS: ca.cert });
    assert.equal(other.code, 0, other.stderr);
    assert.deepEqual(JSON.parse(readFileSync(join(config, 'burrow', 'config.json'), 'utf8')), { edge: otherEdge, token: token.token });
    const forgotten = await runCli(['tokens', 'list'], env);
    assert.equal(forgotten.code, 1);
    assert.match(forgotten.stderr, /UNABLE_TO_VERIFY_LEAF_SIGNATURE/);

    // A saved CA file that is gone is named; logging in again (here trusting the CA another way) drops it.
    const moved = join(dir, 'moved-ca.pem');
    copyFileSync(ca.cert, moved);
    assert.equal((await runCli(['login', token.token, '--ca', moved], env)).code, 0);
    rmSync(moved);
    const gone = await runCli(['tunnels', 'list'], env);
    assert.equal(gone.code, 1);
    assert.equal(gone.stderr, `burrow: cannot read the CA ${moved} saved in ${join(config, 'burrow', 'config.json')}: no such file (run "burrow login --ca FILE" again)\n`);
    const relogin = await runCli(['login', token.token], { ...env, NODE_EXTRA_CA_CERTS: ca.cert });
    assert.equal(relogin.code, 0, relogin.stderr);
    assert.match(relogin.stderr, /warning: the CA .*moved-ca\.pem saved in .* is gone; logging in without it/);
    assert.deepEqual(JSON.parse(readFileSync(join(config, 'burrow', 'config.json'), 'utf8')), { edge: otherEdge, token: token.token });
  } finally {
    await target.close();
  }
});

test('burrow edge --dev saving its dev token drops a CA that was saved for another edge', async () => {
  const dir = freshDir();
  const config = join(dir, 'config');
  const file = join(config, 'burrow', 'config.json');
  mkdirSync(join(config, 'burrow'), { recursive: true });
  writeFileSync(file, JSON.stringify({ edge: `https://${TEST_DOMAIN}`, token: TOKEN, ca: join(dir, 'gone.pem') }));
  const edge = await spawnCli(['edge', '--dev', '--port', '0', '--data', join(dir, 'data')], { XDG_CONFIG_HOME: config }, /saved to /);
  try {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
    assert.deepEqual(Object.keys(saved).sort(), ['edge', 'token']);
    assert.match(saved.edge!, /^http:\/\/localhost:\d+$/);
  } finally {
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
  }
});
