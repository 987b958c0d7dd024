/**
 * Issue 27: a TCP port reserved per account like a subdomain, through the real CLI against a real edge
 * started with `--tcp-ports`: `burrow reserve --tcp` takes a free port of the range, `--tcp PORT` a given
 * one; another account can neither reserve it nor open `burrow tcp --remote-port` on it, the owner can;
 * `burrow reservations` lists it as kind tcp; after `release` another account may have it. The API's
 * refusals (a port outside the range, offline modes and policies for a TCP port, a wrong kind) keep the
 * spec's error shape.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, test } from 'node:test';
import { call, createAccount, freePortRange, runCli, spawnCli, startClient, startEdge, tempDir, type TestEdge } from '../helpers.js';

const FORWARDING = /Forwarding tcp:\/\/localhost:([0-9]+) -> (\S+)\n/;

let edge: TestEdge;
let range: { first: number; last: number };
let alice: { token: string; env: Record<string, string> };
let bob: { token: string; env: Record<string, string> };
let echo: Server;

before(async () => {
  const ports = await freePortRange(8);
  const [first, last] = ports.split('-').map(Number) as [number, number];
  range = { first, last };
  edge = await startEdge({ tcp: { ports } });
  const user = async (name: string): Promise<{ token: string; env: Record<string, string> }> => {
    const { token } = await createAccount(edge, 'PRO');
    return { token, env: { XDG_CONFIG_HOME: tempDir(`burrow-${name}-`), BURROW_EDGE: edge.url, BURROW_TOKEN: token, NO_COLOR: '' } };
  };
  alice = await user('alice');
  bob = await user('bob');
  echo = createServer((socket) => socket.pipe(socket));
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
});
after(async () => {
  echo.close();
  await edge.close();
});

function roundTrip(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => socket.write(text));
    socket.setEncoding('utf8');
    socket.once('data', (answer: string) => {
      socket.destroy();
      resolve(answer);
    });
    socket.on('error', reject);
  });
}

test('burrow reserve --tcp: a port per account, refused to another account, served for its owner, released', async () => {
  const free = await runCli(['reserve', '--tcp'], alice.env);
  assert.equal(free.code, 0, free.stderr);
  const match = /^reserved tcp:([0-9]+); use it with: burrow tcp LOCAL_PORT --remote-port ([0-9]+)\n$/.exec(free.stdout);
  assert.ok(match !== null, free.stdout);
  const port = Number(match[1]);
  assert.equal(Number(match[2]), port);
  assert.ok(port >= range.first && port <= range.last, `${port} is one of the edge's TCP ports`);

  const other = port === range.last ? range.first : port + 1;
  const given = await runCli(['reserve', '--tcp', String(other), '--json'], alice.env);
  assert.equal(given.code, 0, given.stderr);
  assert.deepEqual({ ...JSON.parse(given.stdout), created_at: 'x' }, { subdomain: `tcp:${other}`, kind: 'tcp', created_at: 'x', offline: 'off', policy: null });

  const listed = await runCli(['reservations'], alice.env);
  assert.match(listed.stdout, new RegExp(`^tcp:${port} +\\S+ \\S+ +off +-$`, 'm'));
  assert.match(listed.stdout, new RegExp(`^tcp:${other} +\\S+ \\S+ +off +-$`, 'm'));

  const taken = await runCli(['reserve', '--tcp', String(port)], bob.env);
  assert.equal(taken.code, 1);
  assert.match(taken.stderr, new RegExp(`SUBDOMAIN_TAKEN: The port "tcp:${port}" is in use by another account`));

  const echoPort = (echo.address() as AddressInfo).port;
  const refused = await runCli(['tcp', String(echoPort), '--remote-port', String(port)], bob.env);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, new RegExp(`SUBDOMAIN_TAKEN: The port "tcp:${port}" is reserved by another account`));

  const owner = await spawnCli(['tcp', String(echoPort), '--remote-port', String(port)], alice.env, FORWARDING);
  try {
    assert.equal(Number(owner.match[1]), port);
    assert.equal(await roundTrip(port, 'ping'), 'ping');
    assert.equal((await call(edge, 'GET', `/api/v1/tunnels/tcp:${port}`, { token: alice.token })).json.reserved, true);
  } finally {
    owner.child.kill('SIGKILL');
  }

  const released = await runCli(['reservations', 'release', `tcp:${other}`], alice.env);
  assert.equal(released.stdout, `released tcp:${other}\n`);
  const now = await runCli(['reserve', '--tcp', String(other)], bob.env);
  assert.equal(now.code, 0, now.stderr);
  assert.match(now.stdout, new RegExp(`^reserved tcp:${other};`));

  const tls = await runCli(['reserve', 'vault-27', '--tls'], alice.env);
  assert.equal(tls.stdout, 'reserved vault-27; use it with: burrow tls PORT --subdomain vault-27\n');
  const both = await runCli(['reserve', '--tcp', '--tls'], alice.env);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /give --tcp or --tls, not both/);
  const offline = await runCli(['reserve', '--tcp', '--offline', 'queue'], alice.env);
  assert.equal(offline.code, 2);
  assert.match(offline.stderr, /--tcp reservations take no --offline or policy flags/);
});

test("the API's TCP reservations: a free port never one reserved, and bad requests in the spec's error shape", async () => {
  const reserve = (body: unknown) => call(edge, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body });
  const held = new Set((await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: bob.token })).json.reserved_subdomains.map((r: { subdomain: string }) => r.subdomain));
  const fresh = await reserve({ kind: 'tcp' });
  assert.equal(fresh.status, 201);
  assert.equal(fresh.json.kind, 'tcp');
  assert.ok(!held.has(fresh.json.subdomain), "not one of bob's ports");

  const refusals: Array<[unknown, RegExp]> = [
    [{ subdomain: `tcp:${range.last + 1}` }, /is not one of this edge's TCP ports/],
    [{ kind: 'tcp', subdomain: 'db' }, /named tcp:PORT/],
    [{ kind: 'tcp', offline: 'queue' }, /"offline" is for HTTP tunnels' names/],
    [{ kind: 'http', subdomain: `tcp:${range.first}` }, /names a TCP port/],
    [{ kind: 'udp', subdomain: 'x' }, /"kind" must be/],
  ];
  for (const [body, message] of refusals) {
    const answer = await reserve(body);
    assert.equal(answer.status, 400, JSON.stringify(body));
    assert.equal(answer.json.error.code, 'INVALID_REQUEST');
    assert.match(answer.json.error.message, message);
  }
  const name = encodeURIComponent(fresh.json.subdomain);
  const policy = await call(edge, 'PUT', `/api/v1/reserved-subdomains/${name}/policy`, { token: alice.token, body: { allow_cidr: ['10.0.0.0/8'] } });
  assert.equal(policy.status, 400);
  assert.match(policy.json.error.message, /holds no policy: give --allow-cidr and --deny-cidr to burrow tcp/);
  const patch = await call(edge, 'PATCH', `/api/v1/reserved-subdomains/${name}`, { token: alice.token, body: { offline: 'reject' } });
  assert.equal(patch.status, 400);
  assert.equal((await call(edge, 'DELETE', `/api/v1/reserved-subdomains/${name}`, { token: alice.token })).status, 204);

  // A TLS passthrough name (burrow reserve NAME --tls) is for burrow tls only: an HTTP tunnel on it is refused.
  const tls = await reserve({ subdomain: 'passthrough-27', kind: 'tls' });
  assert.equal(tls.status, 201);
  assert.equal(tls.json.kind, 'tls');
  await assert.rejects(startClient(edge, alice.token, (echo.address() as AddressInfo).port, { subdomain: 'passthrough-27' }), /reserved for TLS passthrough tunnels/);
});

test('an edge without --tcp-ports reserves no TCP port, saying so', async () => {
  const plain = await startEdge();
  try {
    const owner = await createAccount(plain, 'FREE');
    const refused = await runCli(['reserve', '--tcp'], { XDG_CONFIG_HOME: tempDir('burrow-plain-'), BURROW_EDGE: plain.url, BURROW_TOKEN: owner.token });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /INVALID_REQUEST: This edge serves no TCP tunnels: it was started without --tcp-ports/);
  } finally {
    await plain.close();
  }
});
