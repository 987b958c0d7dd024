/**
 * Issue 25: captures whose records live in the blocks file (src/store/capture-blocks.ts) keep the
 * promise small ones keep (test/edge/crash.test.ts): the edge is killed with SIGKILL at random moments
 * under uploads of 3 KB to 1 MB and restarted on the same data, and after each restart every answered
 * request among the ring's newest is listed, and every listed capture's body reads back byte for byte
 * through the API: never a torn record, never another capture's bytes.
 *
 * Real edge processes, the real tunnel client (which reconnects on its own), a real local server; a
 * small ring (a FREE plan of 24 captured requests) so that a lap is quick and blocks are reused in every
 * life.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { parseCaptureId } from '../../src/store/captures.js';
import { freePort, runCli, startLocal, tempDirs, TEST_MIN_FREE_DISK, type SpawnedProcess } from '../helpers.js';
import { startEdgeProcess } from './edge-process.js';

const KILLS = 4;
const RING = 24;
const SENDERS = 8;
const SIZES = [3_000, 45_000, 300_000, 1_000_000];
const SUBDOMAIN = 'blocks-crash';

const freshDir = tempDirs('burrow-blocks-crash-');

function startEdge(port: number, dataDir: string, env: Record<string, string>): Promise<SpawnedProcess> {
  return startEdgeProcess({ dataDir, port, host: '127.0.0.1', graceMs: 60_000, rateLimit: 1_000_000, plans: { FREE: { capturedRequests: RING } }, minFreeDisk: TEST_MIN_FREE_DISK }, env);
}

interface Listed {
  id: string;
  path: string;
}

interface Detail {
  request: { body: string; body_encoding: string; body_size: number; truncated: boolean };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

test(`kill -9 under uploads of 3 KB to 1 MB, ${KILLS} times: answered captures listed, every body back byte for byte`, { timeout: 240_000 }, async () => {
  const dataDir = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir() };
  const port = await freePort();
  const local = await startLocal((req, res) => {
    req.resume();
    req.on('end', () => res.end(`ok ${req.url}`));
  });
  let edge = await startEdge(port, dataDir, env);
  const created = await runCli(['admin', 'create-account', '--email', 'blocks-crash@example.test', '--plan', 'FREE', '--data', dataDir, '--json'], env);
  const token = JSON.parse(created.stdout).token.token as string;
  const client = new TunnelClient({
    edge: `http://localhost:${port}`,
    token,
    routes: new RouteTable(local.port),
    subdomain: SUBDOMAIN,
    recordLimit: 0,
    minBackoffMs: 10,
    maxBackoffMs: 100,
  });
  const idOfPath = new Map<string, string>();
  client.on('exchange', (exchange) => idOfPath.set(exchange.path, exchange.id));
  await client.start();

  const api = async <T>(path: string): Promise<T> => {
    const response = await request(`http://127.0.0.1:${port}${path}`, { headers: { host: `localhost:${port}`, authorization: `Bearer ${token}` } });
    assert.equal(response.statusCode, 200, `${path} answered ${response.statusCode}`);
    return (await response.body.json()) as T;
  };

  const host = `${SUBDOMAIN}.localhost:${port}`;
  const agent = new Agent({ connections: SENDERS, keepAliveTimeout: 10_000 });
  const sent = new Map<string, string>();
  const answered: string[] = [];
  let answeredThisLife = 0;
  let running = true;
  let paused = false;
  let inFlight = 0;
  let count = 0;
  const sender = async (lane: number): Promise<void> => {
    while (running) {
      if (paused) {
        await sleep(5);
        continue;
      }
      const n = count++;
      const path = `/upload/${lane}/${n}`;
      const body = randomBytes(SIZES[n % SIZES.length]!);
      sent.set(path, sha(body));
      inFlight++;
      try {
        const response = await request(`http://127.0.0.1:${port}${path}`, { method: 'POST', body, headers: { host }, dispatcher: agent });
        const text = await response.body.text();
        if (response.statusCode === 200 && text === `ok ${path}`) {
          answered.push(path);
          answeredThisLife++;
        }
      } catch {
        await sleep(5);
      } finally {
        inFlight--;
      }
    }
  };
  const senders = Array.from({ length: SENDERS }, (_, lane) => sender(lane));

  const lost: string[] = [];
  const wrong: string[] = [];
  let bodiesChecked = 0;
  try {
    for (let kill = 0; kill < KILLS; kill++) {
      answeredThisLife = 0;
      paused = false;
      const deadline = Date.now() + 30_000;
      while (answeredThisLife <= RING) {
        assert.ok(Date.now() < deadline, `life ${kill}: only ${answeredThisLife} answered in 30 s`);
        await sleep(2);
      }
      await sleep(Math.random() * 200);
      edge.child.kill('SIGKILL');
      await edge.exited;
      paused = true;
      while (inFlight > 0) await sleep(5);

      edge = await startEdge(port, dataDir, env);
      const listed = (await api<{ requests: Listed[] }>(`/api/v1/requests?subdomain=${SUBDOMAIN}&limit=1000`)).requests;
      assert.ok(listed.length <= RING);
      const newest = Math.max(-1, ...listed.map((entry) => parseCaptureId(entry.id)!.seq));
      const listedIds = new Set(listed.map((entry) => `${entry.id} ${entry.path}`));
      for (const path of answered) {
        const id = idOfPath.get(path);
        assert.ok(id !== undefined, `${path} was answered but the tunnel client never saw it`);
        if (parseCaptureId(id)!.seq <= newest - RING) continue;
        if (!listedIds.has(`${id} ${path}`)) lost.push(`life ${kill}: ${id} ${path}`);
      }
      answered.length = 0;
      for (const entry of listed) {
        const detail = await api<Detail>(`/api/v1/requests/${entry.id}`);
        const body = Buffer.from(detail.request.body, detail.request.body_encoding === 'base64' ? 'base64' : 'utf8');
        bodiesChecked++;
        if (detail.request.truncated || sha(body) !== sent.get(entry.path)) wrong.push(`life ${kill}: ${entry.id} ${entry.path} (${body.byteLength} bytes)`);
      }
    }
  } finally {
    running = false;
    await Promise.all(senders);
    await client.close();
    await agent.close();
    edge.child.kill('SIGTERM');
    await edge.exited;
    await local.close();
  }
  console.log(`blocks crash loop: ${KILLS} kills, ${count} uploads sent, ${bodiesChecked} captured bodies read back, ${lost.length} lost, ${wrong.length} wrong`);
  assert.deepEqual(lost, [], 'answered requests not listed');
  assert.deepEqual(wrong, [], 'captured bodies that are not what was sent');
  assert.ok(bodiesChecked >= KILLS * RING / 2, `only ${bodiesChecked} bodies read back`);
});
