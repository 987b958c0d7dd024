/**
 * Issue 27, item 2: TCP tunnels through the real CLI (`burrow tcp`) against a real edge started with
 * `tcp: { ports }` (`--tcp-ports`): Debian's `ssh` logs in to a private sshd and `redis-cli` talks to a
 * real redis-server through the tunnel's public port; every connection is recorded (address, bytes each
 * way, how it ended) where the API lists the tunnel's requests; `--deny-cidr` cuts a connection at once;
 * `--proxy-protocol` puts a PROXY v2 header naming the public client first. An edge without --tcp-ports
 * refuses a TCP tunnel, saying so.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call, createAccount, freePort, freePortRange, runCli, spawnCli, startEdge, tempDir, waitFor, type TestAccount, type TestEdge } from '../helpers.js';
import { redisSkip, TestRedis } from '../redis-server.js';

const SSHD = '/usr/sbin/sshd';
const SSH = '/usr/bin/ssh';
const sshSkip = existsSync(SSHD) && existsSync(SSH) ? false : 'skipped: no OpenSSH (scripts/ensure-ssh.mjs installs it)';
const FORWARDING = /Forwarding tcp:\/\/localhost:([0-9]+) -> (\S+)\n/;

let edge: TestEdge;
let account: TestAccount;
let env: Record<string, string>;
let echo: Server;
let firstPort: number;

before(async () => {
  const ports = await freePortRange(8);
  firstPort = Number(ports.split('-')[0]);
  edge = await startEdge({ tcp: { ports } });
  account = await createAccount(edge, 'PRO');
  env = { XDG_CONFIG_HOME: tempDir('burrow-tcp-'), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, NO_COLOR: '' };
  // Echoes every byte, and says "bye" when the other side ends.
  echo = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('data', (chunk) => socket.write(chunk));
    socket.on('end', () => socket.end('bye'));
  });
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
});
after(async () => {
  echo.close();
  await edge.close();
});

/** Runs a program without blocking this process (the edge runs here): its exit code and output. */
async function tool(command: string, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [status] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { status, stdout, stderr };
}

/** Connects to the public port, sends `text`, ends; resolves with everything that came back. */
function exchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => socket.end(text));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

/**
 * Sends "payload" through `port` to a local server that records into `seen()`, and checks the PROXY v2
 * header before it names this public client's port; resolves with that port.
 */
async function sendThroughProxyHeader(port: number, seen: () => Buffer): Promise<number> {
  const socket = connect({ port, host: '127.0.0.1' });
  await once(socket, 'connect');
  const clientPort = socket.localPort!;
  socket.end('payload');
  await once(socket, 'close');
  await waitFor(() => seen().includes('payload'), 5_000, 'the bytes');
  assert.deepEqual([...seen().subarray(0, 12)], [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a], 'the PROXY v2 signature first');
  assert.equal(seen().readUInt16BE(24), clientPort, "the public client's port");
  assert.equal(seen().subarray(28).toString(), 'payload');
  return clientPort;
}

/** The error of the one connection recorded on `tcp:PORT`, once it is recorded. */
async function onlyRecordError(port: number): Promise<string | null> {
  const records = async () => (await call(edge, 'GET', `/api/v1/requests?subdomain=tcp:${port}`, { token: account.token })).json?.requests ?? [];
  await waitFor(async () => (await records()).length === 1, 5_000, 'the record');
  const [record] = await records();
  return (await call(edge, 'GET', `/api/v1/requests/${record.id}`, { token: account.token })).json.error;
}

test('burrow tcp: bytes both ways through a public port, each connection recorded and printed', async () => {
  const echoPort = (echo.address() as AddressInfo).port;
  const run = await spawnCli(['tcp', `127.0.0.1:${echoPort}`], env, FORWARDING);
  try {
    const publicPort = Number(run.match[1]);
    assert.equal(run.match[2], `127.0.0.1:${echoPort}`);
    const big = 'x'.repeat(600_000);
    assert.equal(await exchange(publicPort, big), `${big}bye`, 'more than a stream window each way');
    await waitFor(() => /^TCP 127\.0\.0\.1:[0-9]+ closed 600\.0 kB in, 600\.0 kB out, [0-9.]+ s$/m.test(run.output()), 5_000, 'the connection line');
    // The record: who, how much each way, how it ended.
    await waitFor(async () => (await call(edge, 'GET', `/api/v1/requests?subdomain=tcp:${publicPort}`, { token: account.token })).json?.requests?.length === 1, 5_000, 'the record');
    const [record] = (await call(edge, 'GET', `/api/v1/requests?subdomain=tcp:${publicPort}`, { token: account.token })).json.requests;
    const detail = (await call(edge, 'GET', `/api/v1/requests/${record.id}`, { token: account.token })).json;
    assert.equal(detail.method, 'TCP');
    assert.match(detail.path, /^127\.0\.0\.1:[0-9]+$/);
    assert.equal(detail.request.body_size, 600_000);
    assert.equal(detail.response.body_size, 600_003);
    assert.equal(detail.error ?? null, null);
    assert.equal(typeof detail.duration_ms, 'number');
    // A connection is not an HTTP request: replaying it is refused, even while its tunnel is up.
    const replay = await call(edge, 'POST', `/api/v1/requests/${record.id}/replay`, { token: account.token });
    assert.equal(replay.status, 400);
    assert.equal(replay.json.error.code, 'INVALID_REQUEST');
    assert.match(replay.json.error.message, /TCP connection, not an HTTP request/);
    // Listed as a tunnel of the account.
    const tunnels = (await call(edge, 'GET', '/api/v1/tunnels', { token: account.token })).json.tunnels as { subdomain: string }[];
    assert.ok(tunnels.some((tunnel) => tunnel.subdomain === `tcp:${publicPort}`), JSON.stringify(tunnels));
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 0);
    // No tunnel, no listener: the port refuses.
    await waitFor(
      () => new Promise<boolean>((resolve) => connect(publicPort, '127.0.0.1').once('error', () => resolve(true)).once('connect', function (this: Socket) { this.destroy(); resolve(false); })),
      5_000,
      'the port closed',
    );
  } finally {
    run.child.kill('SIGKILL');
  }
});

test('a local server that writes more than the windows and closes at once: every byte reaches a slow public reader', async () => {
  // Its close (after both FINs) may come while its last bytes still wait for the edge's credit: that is
  // the normal end of the connection, not a cut (a full run lost the last 10 KB of 600 KB this way; this
  // test does not force that order on every run, the 600 KB echo above met it once).
  const size = 3 * 1024 * 1024;
  const burst = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('data', () => undefined);
    // The client may close its side after the last byte while the server's end is in flight.
    socket.on('error', () => undefined);
    socket.end(Buffer.alloc(size, 'b'));
  });
  burst.listen(0, '127.0.0.1');
  await once(burst, 'listening');
  const run = await spawnCli(['tcp', `127.0.0.1:${(burst.address() as AddressInfo).port}`], env, FORWARDING);
  try {
    const socket = connect({ port: Number(run.match[1]), host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    socket.end();
    socket.pause();
    // Nothing read for a while: the edge's window fills, the client holds the rest, the local server has closed.
    await new Promise((resolve) => setTimeout(resolve, 500));
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.byteLength));
    socket.resume();
    await once(socket, 'close');
    assert.equal(received, size);
    await waitFor(() => /^TCP 127\.0\.0\.1:[0-9]+ closed 0 B in, 3\.1 MB out/m.test(run.output()), 5_000, `the connection line, clean:\n${run.output()}`);
  } finally {
    run.child.kill('SIGKILL');
    burst.close();
  }
});

test('--deny-cidr cuts a connection from a denied address at once, recorded as ADDRESS_FORBIDDEN; --proxy-protocol names the client', async () => {
  const echoPort = (echo.address() as AddressInfo).port;
  const denied = await spawnCli(['tcp', String(echoPort), '--deny-cidr', '127.0.0.0/8'], env, FORWARDING);
  let seen: Buffer = Buffer.alloc(0);
  const recorder = createServer((socket) => socket.on('data', (chunk: Buffer) => (seen = Buffer.concat([seen, chunk]))).on('end', () => socket.end()));
  recorder.listen(0, '127.0.0.1');
  await once(recorder, 'listening');
  const proxied = await spawnCli(['tcp', String((recorder.address() as AddressInfo).port), '--proxy-protocol'], env, FORWARDING);
  try {
    const deniedPort = Number(denied.match[1]);
    assert.equal(await exchange(deniedPort, 'hello'), '');
    assert.equal(await onlyRecordError(deniedPort), 'ADDRESS_FORBIDDEN');

    const proxiedPort = Number(proxied.match[1]);
    await sendThroughProxyHeader(proxiedPort, () => seen);
    assert.equal(seen[13], 0x11, 'TCP over IPv4');
    assert.deepEqual([...seen.subarray(16, 20)], [127, 0, 0, 1]);
    assert.equal(seen.readUInt16BE(26), proxiedPort, 'the public port');
  } finally {
    denied.child.kill('SIGKILL');
    proxied.child.kill('SIGKILL');
    recorder.close();
  }
});

test('redis-cli through a TCP tunnel to a real redis-server', { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  const run = await spawnCli(['tcp', String(redis.port)], env, FORWARDING);
  try {
    const port = run.match[1]!;
    const set = await tool('redis-cli', ['-h', '127.0.0.1', '-p', port, 'SET', 'burrow:tcp', 'through the tunnel']);
    assert.equal(set.stdout.trim(), 'OK', set.stderr);
    const get = await tool('redis-cli', ['-h', '127.0.0.1', '-p', port, 'GET', 'burrow:tcp']);
    assert.equal(get.stdout.trim(), 'through the tunnel', get.stderr);
    // The key is really in that redis-server.
    const direct = await tool('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), 'GET', 'burrow:tcp']);
    assert.equal(direct.stdout.trim(), 'through the tunnel');
    await waitFor(() => (run.output().match(/^TCP 127\.0\.0\.1:[0-9]+ closed /gm)?.length ?? 0) === 2, 5_000, 'two connection lines');
  } finally {
    run.child.kill('SIGKILL');
  }
});

test("Debian's ssh logs in to a private sshd through a TCP tunnel", { skip: sshSkip }, async () => {
  const dir = tempDir('burrow-tcp-ssh-');
  chmodSync(dir, 0o700);
  for (const key of ['host_key', 'client_key']) {
    const made = spawnSync('/usr/bin/ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, key)], { encoding: 'utf8' });
    assert.equal(made.status, 0, made.stderr);
  }
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'client_key.pub')));
  chmodSync(join(dir, 'authorized_keys'), 0o600);
  const user = userInfo().username;
  const sshdPort = await freePort();
  const config = [
    `ListenAddress 127.0.0.1:${sshdPort}`,
    `HostKey ${join(dir, 'host_key')}`,
    `PidFile ${join(dir, 'sshd.pid')}`,
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
    `AllowUsers ${user}`,
    'PermitRootLogin prohibit-password',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'StrictModes no',
    'PrintMotd no',
    'UseDNS no',
    'LogLevel ERROR',
    '',
  ].join('\n');
  writeFileSync(join(dir, 'sshd_config'), config);
  const sshd = spawn(SSHD, ['-D', '-e', '-f', join(dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
  const run = await spawnCli(['tcp', String(sshdPort)], env, FORWARDING);
  try {
    await waitFor(
      () => new Promise<boolean>((resolve) => connect(sshdPort, '127.0.0.1').once('error', () => resolve(false)).once('connect', function (this: Socket) { this.destroy(); resolve(true); })),
      10_000,
      'sshd listening',
    );
    const port = run.match[1]!;
    const login = await tool(
      SSH,
      ['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', `UserKnownHostsFile=${join(dir, 'known_hosts')}`, '-i', join(dir, 'client_key'), '-p', port, `${user}@127.0.0.1`, 'echo', 'hello from the other side of the tunnel'],
    );
    assert.equal(login.status, 0, login.stderr);
    assert.equal(login.stdout.trim(), 'hello from the other side of the tunnel');
    // ssh may close with a reset (its last bytes unread): the line says "closed" or "cut (CLIENT_CLOSED)".
    await waitFor(() => /^TCP 127\.0\.0\.1:[0-9]+ (closed|cut \(CLIENT_CLOSED\)) [0-9.]+ kB in, [0-9.]+ kB out/m.test(run.output()), 5_000, `the connection line in:\n${run.output()}`);
  } finally {
    run.child.kill('SIGKILL');
    sshd.kill('SIGKILL');
  }
});

test("burrow.yml's tcp tunnels take remote_port, proxy_protocol and deny_cidr, run by burrow start", async () => {
  const dir = tempDir('burrow-start-tcp-');
  let seen: Buffer = Buffer.alloc(0);
  const recorder = createServer((socket) => socket.on('data', (chunk: Buffer) => (seen = Buffer.concat([seen, chunk]))).on('end', () => socket.end()));
  recorder.listen(0, '127.0.0.1');
  await once(recorder, 'listening');
  const remotePort = firstPort + 7;
  writeFileSync(
    join(dir, 'burrow.yml'),
    [
      `edge: ${edge.url}`,
      'token_env: FILE_TOKEN',
      'inspect: off',
      'tunnels:',
      '  proxied:',
      `    tcp: 127.0.0.1:${(recorder.address() as AddressInfo).port}`,
      `    remote_port: ${remotePort}`,
      '    proxy_protocol: true',
      '    allow_cidr: 127.0.0.0/8',
      '  denied:',
      `    tcp: 127.0.0.1:${(echo.address() as AddressInfo).port}`,
      '    deny_cidr: [127.0.0.0/8]',
      '',
    ].join('\n'),
  );
  const run = await spawnCli(['start', '--all'], { ...env, FILE_TOKEN: account.token }, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){2}/, 30_000, dir);
  try {
    assert.match(run.output(), new RegExp(`^Forwarding tcp://localhost:${remotePort} -> 127\\.0\\.0\\.1:[0-9]+$`, 'm'), 'the port asked for');
    await sendThroughProxyHeader(remotePort, () => seen);

    const deniedPort = Number(new RegExp(`^Forwarding tcp://localhost:([0-9]+) -> 127\\.0\\.0\\.1:${(echo.address() as AddressInfo).port}$`, 'm').exec(run.output())![1]);
    assert.equal(await exchange(deniedPort, 'hello'), '', 'cut at once');
    assert.equal(await onlyRecordError(deniedPort), 'ADDRESS_FORBIDDEN');
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 0, run.output());
  } finally {
    run.child.kill('SIGKILL');
    recorder.close();
  }
});

test('an edge without --tcp-ports refuses a TCP tunnel, saying so', async () => {
  const plain = await startEdge();
  try {
    const owner = await createAccount(plain, 'FREE');
    const refused = await runCli(['tcp', '22'], { ...env, BURROW_EDGE: plain.url, BURROW_TOKEN: owner.token });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /INVALID_REQUEST: This edge serves no TCP tunnels: it was started without --tcp-ports/);
  } finally {
    await plain.close();
  }
});
