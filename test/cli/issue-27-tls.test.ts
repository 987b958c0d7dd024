/**
 * Issue 27, item 3: TLS passthrough through the real CLI (`burrow tls`) against a real HTTPS edge. A TLS
 * connection on the edge's HTTPS port whose ClientHello names the tunnel goes, unterminated, to a local
 * HTTPS server with its own certificate (from another CA than the edge's): `openssl s_client` and curl
 * see that certificate and talk to that server; the same port still terminates the edge's own names
 * beside it; each connection is recorded (method TLS). And the whole picture: a burrow.yml with
 * three http tunnels, a tcp and a tls one, all started by `burrow start --all` over one connection.
 */
import '../wildcard-dns.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { writeFileSync } from 'node:fs';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createAccount, freePortRange, spawnCli, startEdge, startLocal, tempDir, waitFor, type TestAccount, type TestEdge } from '../helpers.js';
import { makeCa, makeServerCert, wildcardDnsEnv, type Pem } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

let edge: TestEdge;
let account: TestAccount;
let edgeCa: Pem;
let localCa: Pem;
let local: Server;
let env: Record<string, string>;

before(async () => {
  const dir = tempDir('burrow-tls-pass-');
  edgeCa = makeCa(dir, 'edge-ca');
  localCa = makeCa(dir, 'local-ca');
  const edgeCert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], edgeCa);
  const localCert = makeServerCert(dir, 'local', [`secure-27.${TEST_DOMAIN}`], localCa);
  edge = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: edgeCert.cert, keyFile: edgeCert.key }, tcp: { ports: await freePortRange(4) } });
  account = await createAccount(edge, 'PRO');
  local = createServer({ cert: readFileSync(localCert.cert), key: readFileSync(localCert.key) }, (req, res) => res.end(`local server saw ${req.url}`));
  local.listen(0, '127.0.0.1');
  await once(local, 'listening');
  env = { XDG_CONFIG_HOME: tempDir('burrow-tls-cfg-'), BURROW_EDGE: '', BURROW_TOKEN: '', NO_COLOR: '', ...wildcardDnsEnv() };
});
after(async () => {
  local.closeAllConnections();
  local.close();
  await edge.close();
});

/** Runs a program without blocking this process (the edge runs here). */
async function tool(command: string, args: string[], input = ''): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(input);
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [status] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { status, stdout, stderr };
}

test("burrow tls: openssl s_client and curl see the local server's own certificate; the edge's names stay terminated beside it", async () => {
  const localPort = (local.address() as { port: number }).port;
  const run = await spawnCli(
    ['tls', String(localPort), '--subdomain', 'secure-27', '--edge', `https://${TEST_DOMAIN}:${edge.port}`, '--ca', edgeCa.cert, '--token', account.token],
    env,
    /Forwarding (tls:\/\/\S+) -> (\S+)\n/,
  );
  try {
    assert.equal(run.match[1], `tls://secure-27.${TEST_DOMAIN}:${edge.port}`);
    const name = `secure-27.${TEST_DOMAIN}`;
    const sClient = await tool('openssl', ['s_client', '-connect', `127.0.0.1:${edge.port}`, '-servername', name, '-CAfile', localCa.cert, '-verify_return_error'], 'Q\n');
    assert.match(sClient.stdout, new RegExp(`subject=CN ?= ?${name.replace(/\./g, '\\.')}`), sClient.stdout + sClient.stderr);
    assert.match(sClient.stdout, /issuer=CN ?= ?Burrow test CA local-ca/);
    assert.match(sClient.stdout, /Verify return code: 0 \(ok\)/);

    // curl trusting only the local server's CA reaches it; trusting only the edge's CA it does not.
    const resolve = `${name}:${edge.port}:127.0.0.1`;
    const curl = await tool('curl', ['-sS', '--cacert', localCa.cert, '--resolve', resolve, `https://${name}:${edge.port}/hello`]);
    assert.equal(curl.status, 0, curl.stderr);
    assert.equal(curl.stdout, 'local server saw /hello');
    const wrongTrust = await tool('curl', ['-sS', '--cacert', edgeCa.cert, '--resolve', resolve, `https://${name}:${edge.port}/hello`]);
    assert.notEqual(wrongTrust.status, 0, 'the edge did not terminate it with its own certificate');

    // The edge's own names on the same port are still terminated by it.
    const trustEdge = new Agent({ connect: { ca: readFileSync(edgeCa.cert, 'utf8') } });
    const api = await request(`https://${TEST_DOMAIN}:${edge.port}/api/v1/instance`, { dispatcher: trustEdge });
    assert.equal(api.statusCode, 200);
    await api.body.dump();

    // Each connection is recorded and printed.
    await waitFor(() => (run.output().match(/^TLS 127\.0\.0\.1:[0-9]+ (closed|cut)/gm)?.length ?? 0) >= 3, 5_000, 'three connection lines');
    const records = async (): Promise<{ method: string }[]> => {
      const answer = await request(`https://${TEST_DOMAIN}:${edge.port}/api/v1/requests?subdomain=secure-27`, { dispatcher: trustEdge, headers: { authorization: `Bearer ${account.token}` } });
      return ((await answer.body.json()) as { requests: { method: string }[] }).requests;
    };
    await waitFor(async () => (await records()).length >= 3, 5_000, 'the records');
    const recorded = await records();
    assert.ok(recorded.every((record) => record.method === 'TLS'), JSON.stringify(recorded));
    await trustEdge.close();
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 0);
    // Gone: the name is terminated by the edge again (no tunnel: its certificate, then a 404).
    const after = await tool('curl', ['-sS', '--cacert', edgeCa.cert, '--resolve', resolve, '-o', '/dev/null', '-w', '%{http_code}', `https://${name}:${edge.port}/hello`]);
    assert.equal(after.stdout, '404', after.stderr);
  } finally {
    run.child.kill('SIGKILL');
  }
});

test('burrow start --all: three http tunnels, a tcp and a tls one in one process over one connection', async () => {
  const dir = tempDir('burrow-start-kinds-');
  const web = await startLocal((req, res) => res.end(`web saw ${req.url}`));
  const echo = createNetServer((socket) => socket.on('data', (chunk) => socket.write(chunk)).on('end', () => socket.end()));
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
  const localPort = (local.address() as { port: number }).port;
  writeFileSync(
    join(dir, 'burrow.yml'),
    [
      `edge: https://${TEST_DOMAIN}:${edge.port}`,
      `ca: ${edgeCa.cert}`,
      'token_env: KINDS_TOKEN',
      'inspect: off',
      'tunnels:',
      ...['one', 'two', 'three'].flatMap((name) => [`  ${name}:`, `    http: ${web.port}`, `    subdomain: ${name}-kinds-27`]),
      '  shell:',
      `    tcp: 127.0.0.1:${(echo.address() as AddressInfo).port}`,
      '  vault:',
      `    tls: ${localPort}`,
      '    subdomain: secure-27',
      '',
    ].join('\n'),
  );
  const run = await spawnCli(['start', '--all'], { ...env, KINDS_TOKEN: account.token }, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){5}/, 30_000, dir);
  try {
    const output = run.output();
    const tcpPort = Number(/^Forwarding tcp:\/\/burrow\.test:([0-9]+) -> 127\.0\.0\.1:[0-9]+$/m.exec(output)![1]);
    assert.match(output, new RegExp(`^Forwarding tls://secure-27\\.burrow\\.test:${edge.port} -> localhost:${localPort}$`, 'm'));
    // All five on one connection of the edge.
    const sessions = ['one-kinds-27', 'two-kinds-27', 'three-kinds-27', `tcp:${tcpPort}`, 'secure-27'].map((name) => edge.edge.registry.tunnel(name)!);
    assert.equal(new Set(sessions.map((session) => session.connection)).size, 1);
    assert.deepEqual(sessions.map((session) => session.kind), ['http', 'http', 'http', 'tcp', 'tls']);
    // Each one works.
    const trustEdge = new Agent({ connect: { ca: readFileSync(edgeCa.cert, 'utf8') } });
    for (const name of ['one', 'two', 'three']) {
      const answer = await request(`https://${name}-kinds-27.${TEST_DOMAIN}:${edge.port}/x`, { dispatcher: trustEdge });
      assert.equal(await answer.body.text(), 'web saw /x');
    }
    await trustEdge.close();
    const echoed = await new Promise<string>((resolve, reject) => {
      const socket = connect({ port: tcpPort, host: '127.0.0.1' }, () => socket.end('ping'));
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    assert.equal(echoed, 'ping');
    const trustLocal = new Agent({ connect: { ca: readFileSync(localCa.cert, 'utf8') } });
    const passed = await request(`https://secure-27.${TEST_DOMAIN}:${edge.port}/y`, { dispatcher: trustLocal });
    assert.equal(await passed.body.text(), 'local server saw /y');
    await trustLocal.close();
    await waitFor(() => /^shell +TCP 127\.0\.0\.1:[0-9]+ closed /m.test(run.output()), 5_000, 'the tcp connection line');
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 0, run.output());
  } finally {
    run.child.kill('SIGKILL');
    echo.close();
    await web.close();
  }
});
