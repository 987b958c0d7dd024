/**
 * Issue 23, finding 1: anonymous 1 MiB POSTs filled the edge's disk; the edge died (an unhandled lmdb
 * "Commit failed", then SIGBUS from captures written through a memory map) and would not start again
 * (ENOSPC). Reproduced on a small ext4 file system of the test's own (test/loop-fs.ts), with the real
 * `burrow edge` as a child process (a crash is an exit the test sees, not one of the test runner), the
 * real tunnel client and a real local server that answers every POST with the length it read.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { BIN, readBody, runCli, spawnNode, startLocal, tempDirs, waitFor, type LocalServer, type SpawnedProcess } from '../helpers.js';
import { loopFs, type LoopFs } from '../loop-fs.js';
import { parsePrometheusText, sampleValue, type Exposition } from './prometheus-text.js';

const MIB = 1024 * 1024;
const BODY = Buffer.alloc(MIB, 0x61);
const freshDir = tempDirs('burrow-full-disk-');

interface RunningEdge {
  process: SpawnedProcess;
  port: number;
  adminPort: number;
  /** Everything the edge wrote to stderr (its log) so far. */
  log(): string;
}

/**
 * `burrow edge` on `data`, with --admin and the extra options; resolves once it says where its admin port
 * is. Through spawnNode, not spawnCli (which turns the floor off): without `--min-free-disk` in `extra`
 * the edge has the product's default floor.
 */
async function startEdge(data: string, env: Record<string, string>, extra: string[]): Promise<RunningEdge> {
  const spawned = await spawnNode([BIN, 'edge', '--port', '0', '--data', data, '--admin', '127.0.0.1:0', '--json', ...extra], env, /"event":"admin".*\n/);
  const events = spawned
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { event: string; port?: number; url?: string });
  const listening = events.find((event) => event.event === 'listening')!;
  const admin = events.find((event) => event.event === 'admin')!;
  return {
    process: spawned,
    port: listening.port!,
    adminPort: Number(new URL(admin.url!).port),
    log: () => spawned.output().split('\n').filter((line) => !line.startsWith('{')).join('\n'),
  };
}

async function stopEdge(edge: RunningEdge): Promise<number | null> {
  if (edge.process.child.exitCode !== null || edge.process.child.signalCode !== null) return edge.process.child.exitCode;
  edge.process.child.kill('SIGTERM');
  return edge.process.exited;
}

function alive(edge: RunningEdge): boolean {
  return edge.process.child.exitCode === null && edge.process.child.signalCode === null;
}

async function scrape(edge: RunningEdge): Promise<Exposition> {
  const response = await request(`http://127.0.0.1:${edge.adminPort}/metrics`);
  assert.equal(response.statusCode, 200);
  return parsePrometheusText(await response.body.text());
}

async function api(edge: RunningEdge, method: string, path: string, token: string, body?: unknown) {
  const response = await request(`http://127.0.0.1:${edge.port}${path}`, {
    method: method as 'GET',
    headers: { host: `localhost:${edge.port}`, authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, text, json: text === '' ? undefined : (JSON.parse(text) as any) };
}

/** A POST of `body` to `subdomain` on the edge. */
async function post(edge: RunningEdge, subdomain: string, path: string, body: Buffer) {
  const response = await request(`http://127.0.0.1:${edge.port}${path}`, { method: 'POST', headers: { host: `${subdomain}.localhost:${edge.port}` }, body });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

/** A local server that answers every request 200 with the number of body bytes it read. */
function lengthServer(): Promise<LocalServer> {
  return startLocal((req, res) => {
    void readBody(req).then((body) => res.end(`read ${body.length}`));
  });
}

async function connect(edge: RunningEdge, token: string, port: number, subdomain: string): Promise<TunnelClient> {
  const client = new TunnelClient({ edge: `http://localhost:${edge.port}`, token, routes: new RouteTable(port, []), subdomain, minBackoffMs: 50, maxBackoffMs: 500 });
  await client.start();
  return client;
}

async function createAccount(data: string, env: Record<string, string>, email: string): Promise<string> {
  const created = await runCli(['admin', 'create-account', '--email', email, '--data', data, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  return (JSON.parse(created.stdout) as { token: { token: string } }).token.token;
}

function lines(log: string, pattern: RegExp): string[] {
  return log.split('\n').filter((line) => pattern.test(line));
}

function withLoopFs(sizeMiB: number, t: { skip(message: string): void }): LoopFs | null {
  const made = loopFs(sizeMiB);
  if (typeof made === 'string') {
    t.skip(made);
    return null;
  }
  return made;
}

/** An account, an edge on a loop-mounted disk of `sizeMiB` and a tunnel to a local server on `subdomain`. */
interface Scene {
  disk: LoopFs;
  token: string;
  edge: RunningEdge;
  local: LocalServer;
  client: TunnelClient;
}

async function scene(t: { skip(message: string): void }, sizeMiB: number, subdomain: string, edgeArgs: string[]): Promise<Scene | null> {
  const disk = withLoopFs(sizeMiB, t);
  if (disk === null) return null;
  const data = join(disk.dir, 'data');
  const env = { XDG_CONFIG_HOME: freshDir() };
  const token = await createAccount(data, env, `${subdomain}@example.test`);
  const edge = await startEdge(data, env, edgeArgs);
  const local = await lengthServer();
  return { disk, token, edge, local, client: await connect(edge, token, local.port, subdomain) };
}

/** More 1 MiB POSTs than the disk has room for: each must reach the local server whole and be answered 200. */
async function postPastTheFreeSpace(s: Scene, subdomain: string): Promise<number> {
  const sent = Math.ceil(s.disk.free() / MIB) + 8;
  for (let i = 0; i < sent; i++) {
    const answer = await post(s.edge, subdomain, `/hook/${i}`, BODY);
    assert.equal(answer.status, 200, `POST ${i}: ${answer.status} ${answer.text}`);
    assert.equal(answer.text, `read ${MIB}`, `POST ${i} reached the local server whole`);
  }
  assert.ok(alive(s.edge), `the edge is up:\n${s.edge.log()}`);
  return sent;
}

/** The edge stops cleanly (exit 0) after all that. */
async function stopsCleanly(s: Scene): Promise<void> {
  await s.client.close();
  assert.equal(await stopEdge(s.edge), 0, `a clean stop:\n${s.edge.log()}`);
}

async function endScene(s: Scene): Promise<void> {
  await s.client.close();
  await s.local.close();
  await stopEdge(s.edge);
}

test('issue 23.1 (a): 1 MiB POSTs fill a small disk through captures: every one answered 200 by the local server, captures skipped below --min-free-disk, held webhooks refused 503, the edge up', { timeout: 90_000 }, async (t) => {
  const floor = 24 * MIB;
  const s = await scene(t, 64, 'fill-river', ['--min-free-disk', '24MiB']);
  if (s === null) return;
  const { disk, edge, token } = s;
  try {
    // A name held in queue mode while no tunnel serves it: the other way in for anonymous bytes.
    const reserved = await api(edge, 'POST', '/api/v1/reserved-subdomains', token, { subdomain: 'held-river', offline: 'queue' });
    assert.equal(reserved.status, 201, reserved.text);

    const sent = await postPastTheFreeSpace(s, 'fill-river');
    assert.ok(disk.free() > floor - 4 * MIB, `the floor held: ${disk.free()} bytes free`);

    const listed = await api(edge, 'GET', '/api/v1/requests?subdomain=fill-river&limit=1000', token);
    assert.equal(listed.status, 200);
    const captured = (listed.json.requests as unknown[]).length;
    assert.ok(captured > 0 && captured < sent, `${captured} of ${sent} captured`);

    const metrics = await scrape(edge);
    assert.equal(sampleValue(metrics, 'burrow_disk_low'), 1);
    assert.equal(sampleValue(metrics, 'burrow_disk_min_free_bytes'), floor);
    assert.ok(sampleValue(metrics, 'burrow_disk_free_bytes') < floor);
    assert.equal(sampleValue(metrics, 'burrow_captures_committed_total'), captured);
    assert.equal(sampleValue(metrics, 'burrow_captures_skipped_total', { reason: 'disk' }), sent - captured);
    assert.equal(sampleValue(metrics, 'burrow_store_write_failures_total', { store: 'captures' }), 0, 'nothing was written past the floor');
    assert.ok(sampleValue(metrics, 'burrow_capture_stored_bytes') >= captured * MIB);

    const held = await post(edge, 'held-river', '/stripe', Buffer.from('{"id":"evt_1","object":"event"}'));
    assert.equal(held.status, 503, held.text);
    assert.equal(held.headers['burrow-error'], 'STORAGE_FULL');
    assert.equal(held.headers['retry-after'], '60');
    assert.equal(JSON.parse(held.text).error.code, 'STORAGE_FULL');

    assert.equal(lines(edge.log(), /below the minimum/).length, 1, edge.log());
    await stopsCleanly(s);
  } finally {
    await endScene(s);
  }
});

test('issue 23.1: without a floor the disk fills up: every failed commit is answered, logged once and counted; API reads work, API writes answer 503 STORAGE_FULL', { timeout: 90_000 }, async (t) => {
  const s = await scene(t, 48, 'no-floor', ['--min-free-disk', '0']);
  if (s === null) return;
  const { disk, edge, token } = s;
  try {
    await postPastTheFreeSpace(s, 'no-floor');
    let metrics = await scrape(edge);
    const failed = sampleValue(metrics, 'burrow_store_write_failures_total', { store: 'captures' });
    assert.ok(failed > 1, `commits failed: ${failed}`);
    assert.ok(sampleValue(metrics, 'burrow_captures_skipped_total', { reason: 'error' }) >= failed);
    assert.equal(lines(edge.log(), /^storage: writing captures failed: .*(EIO|ENOSPC)/).length, 1, `one line a minute:\n${edge.log()}`);

    const listed = await api(edge, 'GET', '/api/v1/requests?subdomain=no-floor&limit=1000', token);
    assert.equal(listed.status, 200);
    assert.ok((listed.json.requests as unknown[]).length > 0);

    // The last bytes go too: account writes cannot commit either. Each is answered in the spec's shape.
    disk.fill();
    const answers: number[] = [];
    for (let i = 0; i < 4; i++) {
      const created = await api(edge, 'POST', '/api/v1/tokens', token, { label: `full-${i}` });
      answers.push(created.status);
      if (created.status === 201) continue;
      assert.equal(created.status, 503, created.text);
      assert.deepEqual(Object.keys(created.json), ['error']);
      assert.equal(created.json.error.code, 'STORAGE_FULL');
      assert.equal(created.headers['retry-after'], '60');
    }
    assert.ok(answers.includes(503), `a token write on a full disk: ${answers.join(', ')}`);
    assert.equal((await api(edge, 'GET', '/api/v1/tokens', token)).status, 200, 'API reads still work');
    const answer = await post(edge, 'no-floor', '/after-full', BODY);
    assert.equal(answer.status, 200);
    assert.ok(alive(edge), `the edge is up:\n${edge.log()}`);
    metrics = await scrape(edge);
    assert.ok(sampleValue(metrics, 'burrow_store_write_failures_total', { store: 'accounts' }) >= 1);
    await stopsCleanly(s);
  } finally {
    await endScene(s);
  }
});

test('issue 23.1: held webhooks on a full disk without a floor: 503 STORAGE_FULL (body pieces or commit), sign-in 503, never a stuck name; held and delivered once space is back', { timeout: 90_000 }, async (t) => {
  const s = await scene(t, 48, 'beside-held', ['--min-free-disk', '0']);
  if (s === null) return;
  const { disk, edge, token } = s;
  const HELD = 'held-full';
  const reached: string[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      reached.push(`${req.method} ${req.url} ${body.length}`);
      res.end('ok');
    });
  });
  let client: TunnelClient | null = null;
  try {
    const reserved = await api(edge, 'POST', '/api/v1/reserved-subdomains', token, { subdomain: HELD, offline: 'queue' });
    assert.equal(reserved.status, 201, reserved.text);
    disk.fill();

    // 1 MiB bodies: their pieces cannot be stored. Each sender is told to retry; nothing goes unhandled.
    for (let i = 0; i < 3; i++) {
      const held = await post(edge, HELD, `/full/${i}`, BODY);
      assert.equal(held.status, 503, held.text);
      assert.equal(held.headers['burrow-error'], 'STORAGE_FULL');
      assert.equal(held.headers['retry-after'], '60');
      assert.equal(JSON.parse(held.text).error.code, 'STORAGE_FULL');
    }
    const metrics = await scrape(edge);
    assert.ok(sampleValue(metrics, 'burrow_store_write_failures_total', { store: 'queue' }) >= 3);
    assert.equal(lines(edge.log(), /^storage: writing queue failed: .*the webhook is answered 503 STORAGE_FULL/).length, 1, edge.log());

    // A dashboard sign-in writes a session and its indexes in one transaction: refused the same way.
    const signIns: number[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await request(`http://127.0.0.1:${edge.port}/api/v1/session`, {
        method: 'POST',
        headers: { host: `localhost:${edge.port}`, origin: `http://localhost:${edge.port}`, 'x-burrow-csrf': '1', 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
      });
      const text = await response.body.text();
      signIns.push(response.statusCode);
      if (response.statusCode === 201) continue;
      assert.equal(response.statusCode, 503, text);
      assert.equal(JSON.parse(text).error.code, 'STORAGE_FULL');
    }
    assert.ok(signIns.includes(503), `a sign-in on a full disk: ${signIns.join(', ')}`);
    assert.ok(sampleValue(await scrape(edge), 'burrow_store_write_failures_total', { store: 'sessions' }) >= 1, 'counted as a session write');
    assert.ok(alive(edge), `the edge is up:\n${edge.log()}`);

    // Space back: the name holds again, and its tunnel gets the event and then live traffic, nothing stuck.
    rmSync(join(disk.dir, 'filler'));
    const held = await post(edge, HELD, '/after', Buffer.from('{"after":true}'));
    assert.equal(held.status, 202, held.text);
    client = await connect(edge, token, local.port, HELD);
    let queue: { path: string; state: string }[] = [];
    await waitFor(
      async () => {
        queue = (await api(edge, 'GET', `/api/v1/queue?subdomain=${HELD}`, token)).json.queue;
        return queue.every((event) => event.state === 'delivered');
      },
      10_000,
      'the held event delivered',
    );
    assert.deepEqual(queue.map((event) => event.path), ['/after'], 'nothing of the refused webhooks was kept');
    const live = await post(edge, HELD, '/live', Buffer.from('live'));
    assert.equal(live.status, 200, live.text);
    assert.deepEqual(reached, ['POST /after 14', 'POST /live 4'], 'only what was held, then the live request');
    await client.close();
    await stopsCleanly(s);
  } finally {
    await client?.close();
    await local.close();
    await endScene(s);
  }
});

test('issue 23.1 (b): an edge restarted on a full disk starts and serves: one log line, tunnels, requests, API reads; captures skipped', { timeout: 90_000 }, async (t) => {
  const disk = withLoopFs(32, t);
  if (disk === null) return;
  const data = join(disk.dir, 'data');
  const env = { XDG_CONFIG_HOME: freshDir() };
  const token = await createAccount(data, env, 'restart@example.test');
  const local = await lengthServer();
  // A first life that captured something and died without a clean stop, as the edge did.
  const first = await startEdge(data, env, ['--min-free-disk', '0']);
  const client = await connect(first, token, local.port, 'after-full');
  assert.equal((await post(first, 'after-full', '/before', BODY)).status, 200);
  // Listed once its commit is done: the answer goes out after its journal write and before its LMDB
  // commit, and a kill in between leaves it to the journal, which a full disk keeps from being replayed.
  const before = await api(first, 'GET', '/api/v1/requests?subdomain=after-full', token);
  assert.deepEqual((before.json.requests as { path: string }[]).map((entry) => entry.path), ['/before']);
  await client.close();
  first.process.child.kill('SIGKILL');
  await once(first.process.child, 'exit');
  disk.fill();
  assert.equal(disk.free(), 0, 'the disk is full');

  const edge = await startEdge(data, env, []);
  const again = await connect(edge, token, local.port, 'after-full');
  try {
    assert.equal(lines(edge.log(), /^storage: 0 B free on .*below the minimum of 256 MiB/).length, 1, edge.log());
    for (let i = 0; i < 3; i++) {
      const answer = await post(edge, 'after-full', `/while-full/${i}`, BODY);
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.text, `read ${MIB}`);
    }
    const listed = await api(edge, 'GET', '/api/v1/requests?subdomain=after-full', token);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      (listed.json.requests as { path: string }[]).map((entry) => entry.path),
      ['/before'],
      'what was captured before is listed; nothing new was written',
    );
    assert.equal((await api(edge, 'GET', '/api/v1/auth/me', token)).status, 200);
    const metrics = await scrape(edge);
    assert.equal(sampleValue(metrics, 'burrow_disk_low'), 1);
    assert.equal(sampleValue(metrics, 'burrow_captures_skipped_total', { reason: 'disk' }), 3);
    assert.ok(alive(edge));
    await again.close();
    assert.equal(await stopEdge(edge), 0, `a clean stop:\n${edge.log()}`);
  } finally {
    await again.close();
    await local.close();
    await stopEdge(edge);
  }
});

test('burrow edge --help lists --min-free-disk', async () => {
  const help = await runCli(['edge', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--min-free-disk BYTES\|PERCENT/);
});
