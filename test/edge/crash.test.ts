/**
 * "Nothing lost" (issue 4, issue 11 finding 2): under continuous traffic the edge process is killed with
 * SIGKILL again and again and restarted on the same data. Before each kill more requests than the ring
 * holds are answered (a burst past the ring), and half the kills land around the edge's once-a-second
 * tick (where ring heads were saved lazily until issue 11, and the capture environment is still synced),
 * the others at random moments. After each restart, with the senders paused, every request whose
 * response was received and that is among the ring's newest `capacity` committed sequences must be
 * listed, under the id the tunnel client saw for it; and no id of a committed capture is ever handed out
 * again, in any life of the edge.
 *
 * Real edge processes, the real tunnel client (which reconnects on its own), a real local server. The
 * ring is small (a FREE plan of 50 captured requests) so that a burst past it takes a fraction of a
 * second; with BURROW_CRASH_RING=1000 (FREE's own size) the edge runs as `burrow edge` itself.
 * `npm run soak:crash` runs the loop with 60 kills (BURROW_CRASH_KILLS).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { parseCaptureId } from '../../src/store/captures.js';
import { DEFAULT_PLANS } from '../../src/store/plans.js';
import { freePort, runCli, spawnCli, startLocal, tempDirs, TEST_MIN_FREE_DISK, type SpawnedProcess } from '../helpers.js';
import { startEdgeProcess } from './edge-process.js';

const KILLS = Number(process.env.BURROW_CRASH_KILLS ?? 16);
const RING = Number(process.env.BURROW_CRASH_RING ?? 50);
const SENDERS = 32;
/** Every fourth tick of 250 ms after the edge starts listening: heads were saved there before issue 11. */
const HEAD_SAVE_MS = 1_000;
const SUBDOMAIN = 'crash-ring';

const freshDir = tempDirs('burrow-crash-');

/** An edge on the same data and port; the plan's ring is RING slots. */
function startEdge(port: number, dataDir: string, env: Record<string, string>): Promise<SpawnedProcess> {
  const ready = /listening on/;
  if (RING === DEFAULT_PLANS.FREE.capturedRequests) {
    return spawnCli(['edge', '--port', String(port), '--data', dataDir, '--grace', '60000', '--rate-limit', '1000000'], env, ready);
  }
  // The CLI has no option for plan limits: the same Edge the CLI starts, with FREE's ring made small.
  return startEdgeProcess({ dataDir, port, host: '127.0.0.1', graceMs: 60_000, rateLimit: 1_000_000, plans: { FREE: { capturedRequests: RING } }, minFreeDisk: TEST_MIN_FREE_DISK }, env);
}

interface Listed {
  id: string;
  path: string;
}

async function listRing(port: number, token: string): Promise<Listed[]> {
  const listed: Listed[] = [];
  let before = '';
  for (;;) {
    const query = `subdomain=${SUBDOMAIN}&limit=1000${before === '' ? '' : `&before=${before}`}`;
    const response = await request(`http://127.0.0.1:${port}/api/v1/requests?${query}`, {
      headers: { host: `localhost:${port}`, authorization: `Bearer ${token}` },
    });
    assert.equal(response.statusCode, 200, `listing answered ${response.statusCode}`);
    const page = ((await response.body.json()) as { requests: Listed[] }).requests;
    listed.push(...page);
    if (page.length < 1000) return listed;
    before = page[page.length - 1]!.id;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const seqOf = (id: string): number => parseCaptureId(id)!.seq;

test(`kill -9 after bursts past the ring, ${KILLS} times, around the head save: nothing answered lost, no id reused`, { timeout: 120_000 + KILLS * 10_000 }, async () => {
  const started = Date.now();
  const dataDir = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir() };
  const port = await freePort();
  const local = await startLocal((req, res) => {
    req.resume();
    req.on('end', () => res.end(`ok ${req.url}`));
  });
  let edge = await startEdge(port, dataDir, env);
  let listeningAt = Date.now();
  const created = await runCli(['admin', 'create-account', '--email', 'crash@example.test', '--plan', 'FREE', '--data', dataDir, '--json'], env);
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
  // The id the edge gave each request, as the tunnel client saw it in the request's OPEN frame.
  const idOfPath = new Map<string, string>();
  const pathOfId = new Map<string, string>();
  /** Ids of captures known to be committed: answered, or listed after a restart. */
  const committed = new Map<string, string>();
  const reused: string[] = [];
  client.on('exchange', (exchange) => {
    idOfPath.set(exchange.path, exchange.id);
    const earlier = committed.get(exchange.id);
    if (earlier !== undefined && earlier !== exchange.path) reused.push(`${exchange.id}: ${earlier}, then ${exchange.path}`);
    pathOfId.set(exchange.id, exchange.path);
  });
  await client.start();

  const host = `${SUBDOMAIN}.localhost:${port}`;
  const agent = new Agent({ connections: SENDERS, keepAliveTimeout: 10_000 });
  /** Paths answered 200 with their own body, in the current life of the edge and in all. */
  let answeredThisLife = 0;
  let firstAnsweredAt = 0;
  const answered: string[] = [];
  let running = true;
  let paused = false;
  let inFlight = 0;
  let sent = 0;
  const sender = async (lane: number): Promise<void> => {
    while (running) {
      if (paused) {
        await sleep(5);
        continue;
      }
      const path = `/crash/${lane}/${sent++}`;
      inFlight++;
      try {
        const response = await request(`http://127.0.0.1:${port}${path}`, { method: 'POST', body: 'payload', headers: { host }, dispatcher: agent });
        const text = await response.body.text();
        if (response.statusCode === 200 && text === `ok ${path}`) {
          answered.push(path);
          if (answeredThisLife++ === 0) firstAnsweredAt = Date.now();
        }
      } catch {
        await sleep(5);
      } finally {
        inFlight--;
      }
    }
  };
  const senders = Array.from({ length: SENDERS }, (_, lane) => sender(lane));

  let answeredInAll = 0;
  let checked = 0;
  const lost: string[] = [];
  let headSaveKills = 0;
  /** How long each life took to answer RING + 1 requests from its first answer. */
  const bursts: number[] = [];
  try {
    for (let kill = 0; kill < KILLS; kill++) {
      // A burst past the ring through this edge.
      answeredThisLife = 0;
      paused = false;
      const burstDeadline = Date.now() + 20_000;
      while (answeredThisLife <= RING) {
        assert.ok(Date.now() < burstDeadline, `life ${kill}: only ${answeredThisLife} answered in 20 s`);
        await sleep(2);
      }
      bursts.push(Date.now() - firstAnsweredAt);
      // Then the kill: every other one around a lazy head save (±40 ms), the rest at a random moment.
      let killAt = Date.now() + Math.random() * 300;
      if (kill % 2 === 0) {
        const jitter = (Math.random() - 0.5) * 80;
        let save = listeningAt + HEAD_SAVE_MS;
        while (save + jitter < Date.now()) save += HEAD_SAVE_MS;
        killAt = save + jitter;
        headSaveKills++;
      }
      await sleep(killAt - Date.now());
      edge.child.kill('SIGKILL');
      await edge.exited;
      paused = true;
      while (inFlight > 0) await sleep(5);

      edge = await startEdge(port, dataDir, env);
      listeningAt = Date.now();
      const listed = await listRing(port, token);
      assert.ok(listed.length <= RING, `life ${kill}: ${listed.length} listed from a ring of ${RING}`);
      for (const entry of listed) {
        const earlier = committed.get(entry.id);
        if (earlier !== undefined && earlier !== entry.path) reused.push(`${entry.id}: ${earlier}, then ${entry.path} (listed)`);
        committed.set(entry.id, entry.path);
      }
      // Every answered request among the ring's newest RING committed sequences is listed.
      const newest = Math.max(-1, ...listed.map((entry) => seqOf(entry.id)));
      const listedIds = new Set(listed.map((entry) => `${entry.id} ${entry.path}`));
      for (const path of answered) {
        const id = idOfPath.get(path);
        assert.ok(id !== undefined, `${path} was answered but the tunnel client never saw it`);
        committed.set(id, path);
        answeredInAll++;
        if (seqOf(id) <= newest - RING) continue;
        checked++;
        if (!listedIds.has(`${id} ${path}`)) lost.push(`life ${kill}: ${id} ${path} (newest listed ${newest})`);
      }
      answered.length = 0;
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
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const burstMs = bursts.sort((a, b) => a - b)[bursts.length >> 1] ?? 0;
  console.log(
    `crash loop: ring ${RING}, ${KILLS} kills (${headSaveKills} around the head save), ${answeredInAll} requests answered, ` +
      `${committed.size} captures known committed, ${checked} answered requests checked within the ring's newest ${RING}, ${lost.length} lost, ${reused.length} ids reused, ` +
      `median ${burstMs} ms to answer the ${RING + 1} of a burst, ${seconds} s`,
  );
  assert.deepEqual(lost, [], `${lost.length} answered requests are not listed`);
  assert.deepEqual(reused, [], `${reused.length} committed ids were handed out again`);
});
