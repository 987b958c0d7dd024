/**
 * Failover (issue 17, Acceptance): three edges in cluster mode as real processes on one real Redis, the
 * real client as a process (`burrow http --edge A --edge B --edge C --json`) on a real local server,
 * steady bounded public traffic sent to A (the owner) and to B and C (which forward to A over the
 * hop); then edge A is killed with SIGKILL in the middle of it.
 *
 * Checked: the client is connected again to B or C with the same subdomain (within the 5 s the issue
 * asks; the time from the kill to the first answered request through a surviving edge is printed);
 * public requests to the surviving edges succeed again; and after A is started again on its data
 * directory (it rejoins the cluster), the API on B, which asks every edge for its captures, lists every
 * request whose response was received: nothing answered is lost, whichever edge stored it, and no
 * request id is listed twice.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { nodeNumberOfCaptureId } from '../../src/store/captures.js';
import { freePort, runCli, spawnCli, startLocal, tempDirs, waitFor, type SpawnedProcess } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';

const NODE_IDS = ['a', 'b', 'c'] as const;
const SUBDOMAIN = 'failover-acceptance';
/** Two senders per edge, each one request at a time with a pause between: steady and bounded. */
const SENDERS_PER_EDGE = 2;
const PAUSE_MS = 40;
/** All requests sent, at most; below FREE's 1000 captured requests per ring and one listing page. */
const MAX_REQUESTS = 900;
const BEFORE_KILL_MS = 1_500;
/** Traffic goes on this long after the surviving edges answer again (or after the kill, at most 8 s). */
const AFTER_RECOVERY_MS = 1_500;
const AFTER_KILL_MAX_MS = 8_000;
/** The issue's bound on the reconnect. */
const FAILOVER_BOUND_MS = 5_000;

const freshDir = tempDirs('burrow-failover-');

interface Sent {
  seq: number;
  edge: number;
  sentAt: number;
  answeredAt: number;
}

test('kill -9 of the owning edge under load: the client moves to B or C with its subdomain, and nothing answered is missing from the captures', { skip: redisSkip, timeout: 120_000 }, async () => {
  const redis = await TestRedis.start();
  const env = { XDG_CONFIG_HOME: freshDir() };
  const ports = [await freePort(), await freePort(), await freePort()];
  const dataDirs = NODE_IDS.map(() => freshDir());
  const startEdge = (index: number): Promise<SpawnedProcess> =>
    spawnCli(
      [
        'edge', '--cluster', redis.url, '--node-id', NODE_IDS[index]!, '--advertise', `http://127.0.0.1:${ports[index]}`,
        '--host', '127.0.0.1', '--port', String(ports[index]), '--data', dataDirs[index]!, '--rate-limit', '1000000', '--grace', '60000',
      ],
      env,
      /listening on/,
    );
  const edges: SpawnedProcess[] = [];
  for (let index = 0; index < NODE_IDS.length; index++) edges.push(await startEdge(index));

  // The operator's way in on a cluster: the account and a token straight in the shared store.
  const email = 'failover@example.test';
  const created = await runCli(['admin', 'create-account', '--email', email, '--cluster', redis.url, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const minted = await runCli(['admin', 'token', 'create', '--email', email, '--label', 'failover', '--cluster', redis.url, '--json'], env);
  assert.equal(minted.code, 0, minted.stderr);
  const token = JSON.parse(minted.stdout).token.token as string;

  // The local server remembers every request it answered; its answer echoes the sequence number.
  const seenByLocal = new Set<number>();
  const local = await startLocal((req, res) => {
    const seq = Number(req.headers['x-seq']);
    req.resume();
    req.on('end', () => {
      seenByLocal.add(seq);
      res.setHeader('x-seq', String(seq));
      res.end(`answer ${seq}`);
    });
  });

  const edgeUrls = ports.map((port) => `http://localhost:${port}`);
  const client = await spawnCli(
    ['http', String(local.port), '--subdomain', SUBDOMAIN, '--edge', edgeUrls[0]!, '--edge', edgeUrls[1]!, '--edge', edgeUrls[2]!, '--no-inspect', '--json'],
    { ...env, BURROW_TOKEN: token },
    /"event":"ready"[^\n]*\n/,
  );
  const events = (): Record<string, unknown>[] =>
    client
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.equal(events().find((event) => event.event === 'ready')?.subdomain, SUBDOMAIN);
  // When the client says failover, and to where.
  let failoverSeenAt = 0;
  client.child.stdout!.on('data', (chunk: Buffer) => {
    if (failoverSeenAt === 0 && chunk.toString().includes('"event":"failover"')) failoverSeenAt = performance.now();
  });

  const agent = new Agent({ connections: NODE_IDS.length * SENDERS_PER_EDGE, keepAliveTimeout: 5_000, headersTimeout: 5_000, bodyTimeout: 5_000 });
  const answered: Sent[] = [];
  const failedByEdge = [0, 0, 0];
  let nextSeq = 0;
  let running = true;
  let killedAt = 0;
  let recoveredAt = 0;
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  const sender = async (edge: number): Promise<void> => {
    while (running && nextSeq < MAX_REQUESTS) {
      const seq = nextSeq++;
      const sentAt = performance.now();
      try {
        const response = await request(`http://127.0.0.1:${ports[edge]}/load/${seq}`, {
          method: 'POST',
          body: `payload ${seq}`,
          headers: { host: `${SUBDOMAIN}.localhost:${ports[edge]}`, 'x-seq': String(seq) },
          dispatcher: agent,
        });
        const text = await response.body.text();
        if (response.statusCode === 200 && text === `answer ${seq}` && response.headers['x-seq'] === String(seq)) {
          const answeredAt = performance.now();
          answered.push({ seq, edge, sentAt, answeredAt });
          if (killedAt !== 0 && recoveredAt === 0 && edge !== 0 && sentAt >= killedAt) recoveredAt = answeredAt;
        } else failedByEdge[edge]!++;
      } catch {
        failedByEdge[edge]!++;
      }
      await sleep(PAUSE_MS);
    }
  };

  try {
    const senders = NODE_IDS.flatMap((_, edge) => Array.from({ length: SENDERS_PER_EDGE }, () => sender(edge)));
    await sleep(BEFORE_KILL_MS);
    const answeredBeforeKill = answered.length;
    assert.ok(answered.some((sent) => sent.edge === 1) && answered.some((sent) => sent.edge === 2), 'B and C forward to A before the kill');

    edges[0]!.child.kill('SIGKILL');
    killedAt = performance.now();
    await edges[0]!.exited;
    await waitFor(() => recoveredAt !== 0 || performance.now() - killedAt > AFTER_KILL_MAX_MS, AFTER_KILL_MAX_MS + 1_000, 'the surviving edges to answer');
    if (recoveredAt !== 0) await sleep(AFTER_RECOVERY_MS);
    running = false;
    await Promise.all(senders);

    const failover = events().find((event) => event.event === 'failover');
    const failoverMs = failoverSeenAt === 0 ? NaN : failoverSeenAt - killedAt;
    const recoveryMs = recoveredAt === 0 ? NaN : recoveredAt - killedAt;
    console.log(
      `# failover: client said failover ${failoverMs.toFixed(0)} ms after the kill (to ${String(failover?.to)}); ` +
        `first answer through a surviving edge ${recoveryMs.toFixed(0)} ms after the kill; ` +
        `${answered.length} answered (${answeredBeforeKill} before the kill), not answered by edge a/b/c: ${failedByEdge.join('/')}`,
    );

    assert.ok(failover !== undefined, `the client reported no failover:\n${client.output()}`);
    const movedTo = String(failover.to);
    assert.ok(movedTo.includes(`:${ports[1]}`) || movedTo.includes(`:${ports[2]}`), `the client moved to B or C, not to ${movedTo}`);
    assert.equal(failover.subdomain, SUBDOMAIN, 'the same subdomain after the failover');
    assert.ok(recoveredAt !== 0, 'public requests through B or C are answered again after the kill');
    assert.ok(recoveryMs <= FAILOVER_BOUND_MS, `answered again through a surviving edge ${recoveryMs.toFixed(0)} ms after the kill (the issue asks for 5 s)`);
    for (const edge of [1, 2]) {
      assert.ok(answered.some((sent) => sent.edge === edge && sent.sentAt >= recoveredAt), `edge ${NODE_IDS[edge]} answers again after the failover`);
    }
    for (const sent of answered) assert.ok(seenByLocal.has(sent.seq), `request ${sent.seq} was answered by the local server`);

    // A comes back on its own data and joins the cluster again; the API on B lists every edge's captures.
    edges[0] = await startEdge(0);
    const listed = await listCaptures(ports[1]!, token);
    const listedPaths = new Set(listed.map((capture) => capture.path));
    const missing = answered.filter((sent) => !listedPaths.has(`/load/${sent.seq}`)).map((sent) => `${sent.seq} (sent to ${NODE_IDS[sent.edge]})`);
    assert.deepEqual(missing, [], `answered but not captured: ${missing.slice(0, 20).join(', ')}`);
    // Captures from A (before the kill) and B (after it) keep ids of their own: each edge numbers its rings in its own span.
    assert.equal(new Set(listed.map((capture) => capture.id)).size, listed.length, 'no request id is listed twice');
    const storedBy = new Set(listed.map((capture) => nodeNumberOfCaptureId(capture.id)));
    assert.ok(storedBy.size >= 2, `the listing merges the captures of A and of the new owner (edge numbers ${[...storedBy].join(', ')})`);
  } finally {
    running = false;
    client.child.kill('SIGTERM');
    await client.exited;
    for (const edge of edges) {
      edge.child.kill('SIGTERM');
      await edge.exited;
    }
    await agent.close();
    await local.close();
  }
});

interface Listed {
  id: string;
  path: string;
}

/** Every capture of SUBDOMAIN, through one edge's API (newest first, paged with `before`). */
async function listCaptures(port: number, token: string): Promise<Listed[]> {
  const listed: Listed[] = [];
  let before = '';
  for (let page = 0; page < 10; page++) {
    const query = `subdomain=${SUBDOMAIN}&limit=1000${before === '' ? '' : `&before=${before}`}`;
    const response = await request(`http://127.0.0.1:${port}/api/v1/requests?${query}`, {
      headers: { host: `localhost:${port}`, authorization: `Bearer ${token}` },
    });
    const text = await response.body.text();
    assert.equal(response.statusCode, 200, `listing answered ${response.statusCode}: ${text}`);
    const requests = (JSON.parse(text) as { requests: Listed[] }).requests;
    listed.push(...requests);
    if (requests.length < 1000) return listed;
    before = requests[requests.length - 1]!.id;
  }
  return listed;
}
