/**
 * Clients on several edges (issue 28, item 3): three edges in cluster mode as real processes on one real
 * Redis, Debian's nginx in front with the shipped deploy/nginx-burrow-cluster.conf, and the real client
 * as a process (`burrow http --json`, connecting through nginx) with --edges' default: it attaches its
 * tunnel to two of the edges. Bounded public traffic goes through nginx (round robin over the three);
 * then one of the two edges the tunnel is attached to is killed with SIGKILL in the middle of it.
 *
 * Checked:
 * - the tunnel is attached to exactly two edges (its lease in Redis names two), and a request nginx
 *   gave to one of them was served there without the internal hop: its capture is in that edge's span
 *   of request ids (a forwarded request is captured by the edge that served it);
 * - no request sent after the kill failed (nginx retries a refused connection on the next edge; the
 *   third edge sends a request whose attached edge refuses the connection to the other one);
 * - the client attaches again to two edges (the third one), and says nothing alarming meanwhile: its
 *   other session kept the tunnel up, so there is no reconnect or failover event.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import '../wildcard-dns.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { frontProxySkip, makeCertificates, startClusterNginx, type RunningNginx } from '../nginx-front.js';
import { nodeNumberOfCaptureId } from '../../src/store/captures.js';
import { freePort, runCli, spawnCli, startLocal, tempDirs, waitFor, type SpawnedProcess } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { wildcardDnsEnv } from '../tls-fixtures.js';

const skip = redisSkip !== false ? redisSkip : frontProxySkip();
const DOMAIN = TEST_DOMAIN;
const SUBDOMAIN = 'two-edges';
const NODE_IDS = ['a', 'b', 'c'] as const;
/** Four senders, each one GET at a time with a pause: steady and bounded. */
const SENDERS = 4;
const PAUSE_MS = 25;
const MAX_REQUESTS = 1_500;
const BEFORE_KILL_MS = 1_500;
const AFTER_KILL_MS = 4_000;
const makeDir = tempDirs('burrow-two-edges-');

interface Outcome {
  seq: number;
  sentAt: number;
  status: number;
  error: string;
}

test('a client on two edges behind nginx: kill -9 of one of them under load fails no new request, and the client attaches to the third', { skip, timeout: 120_000 }, async () => {
  const redis = await TestRedis.start();
  const dir = makeDir();
  const { caFile, caPem, certDir } = makeCertificates(dir, DOMAIN);
  const env = { XDG_CONFIG_HOME: makeDir() };
  const httpsPort = await freePort();
  const httpPort = await freePort();
  const ports: number[] = [];
  const agentPorts: number[] = [];
  for (let i = 0; i < NODE_IDS.length; i++) {
    ports.push(await freePort());
    agentPorts.push(await freePort());
  }
  const edges: SpawnedProcess[] = [];
  let nginx: RunningNginx | undefined;
  let client: SpawnedProcess | undefined;
  const local = await startLocal((req, res) => {
    req.resume();
    req.on('end', () => res.end(`answer ${String(req.headers['x-seq'])}`));
  });
  const publicAgent = new Agent({ connect: { ca: caPem }, connections: SENDERS, headersTimeout: 10_000, bodyTimeout: 10_000 });
  try {
    for (let i = 0; i < NODE_IDS.length; i++) {
      edges.push(
        await spawnCli(
          [
            'edge', '--cluster', redis.url, '--node-id', NODE_IDS[i]!, '--advertise', `http://127.0.0.1:${ports[i]}`,
            '--host', '127.0.0.1', '--port', String(ports[i]), '--agent-port', String(agentPorts[i]), '--domain', DOMAIN,
            '--public-url', `https://${DOMAIN}:${httpsPort}`, '--trust-proxy', '127.0.0.1/32',
            '--data', makeDir(), '--rate-limit', '1000000', '--grace', '60000',
          ],
          env,
          /listening on/,
        ),
      );
    }
    const email = 'two-edges@example.test';
    const created = await runCli(['admin', 'create-account', '--email', email, '--cluster', redis.url, '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const minted = await runCli(['admin', 'token', 'create', '--email', email, '--label', 'two-edges', '--cluster', redis.url, '--json'], env);
    assert.equal(minted.code, 0, minted.stderr);
    const token = JSON.parse(minted.stdout).token.token as string;

    const front = await startClusterNginx(dir, { domain: DOMAIN, certDir, httpsPort, httpPort, edgePorts: ports, agentPorts });
    nginx = front.nginx;
    const nginxLog = front.log;

    client = await spawnCli(
      ['http', `127.0.0.1:${local.port}`, '--subdomain', SUBDOMAIN, '--edge', `https://${DOMAIN}:${httpsPort}`, '--ca', caFile, '--no-inspect', '--json'],
      { ...env, ...wildcardDnsEnv(), BURROW_TOKEN: token },
      /"event":"ready"[^\n]*\n/,
    );
    const running = client;
    const events = (): Record<string, unknown>[] =>
      running
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    const attachedNodes = async (): Promise<string[]> => {
      const reply = await redis.command('HKEYS', `burrow:cluster:lease:${SUBDOMAIN}`);
      return [...reply.matchAll(/^a:(\S+)\r?$/gm)].map((match) => match[1]!).sort();
    };
    await waitFor(async () => (await attachedNodes()).length === 2, 10_000, 'the tunnel attached to two edges').catch(async (error: Error) => {
      throw new Error(`${error.message}: lease fields ${JSON.stringify(await redis.command('HKEYS', `burrow:cluster:lease:${SUBDOMAIN}`))}; client:\n${running.output()}`);
    });
    assert.ok(events().some((event) => event.event === 'edges' && event.count === 2), running.output());
    const attached = await attachedNodes();
    const victim = NODE_IDS.indexOf(attached[0] as (typeof NODE_IDS)[number]);
    const survivor = NODE_IDS.indexOf(attached[1] as (typeof NODE_IDS)[number]);
    const third = [0, 1, 2].find((i) => i !== victim && i !== survivor)!;

    const outcomes: Outcome[] = [];
    let nextSeq = 0;
    let sending = true;
    const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
    const sender = async (): Promise<void> => {
      while (sending && nextSeq < MAX_REQUESTS) {
        const seq = nextSeq++;
        const sentAt = performance.now();
        try {
          const response = await request(`https://${SUBDOMAIN}.${DOMAIN}:${httpsPort}/load/${seq}`, { headers: { 'x-seq': String(seq) }, dispatcher: publicAgent });
          const text = await response.body.text();
          outcomes.push({ seq, sentAt, status: response.statusCode, error: response.statusCode === 200 && text === `answer ${seq}` ? '' : text.slice(0, 200) });
        } catch (error) {
          outcomes.push({ seq, sentAt, status: 0, error: String(error) });
        }
        await sleep(PAUSE_MS);
      }
    };
    const senders = Array.from({ length: SENDERS }, () => sender());
    await sleep(BEFORE_KILL_MS);
    edges[victim]!.child.kill('SIGKILL');
    const killedAt = performance.now();
    await edges[victim]!.exited;
    await sleep(AFTER_KILL_MS);
    sending = false;
    await Promise.all(senders);

    const failed = outcomes.filter((outcome) => outcome.status !== 200 || outcome.error !== '');
    const after = outcomes.filter((outcome) => outcome.sentAt >= killedAt);
    const failedAfter = failed.filter((outcome) => outcome.sentAt >= killedAt);
    console.log(
      `# clients on two edges: ${outcomes.length} requests through nginx, ${after.length} sent after the kill of edge ${NODE_IDS[victim]}; ` +
        `failed: ${failedAfter.length} sent after the kill, ${failed.length - failedAfter.length} in flight at the kill`,
    );
    assert.ok(outcomes.filter((outcome) => outcome.sentAt < killedAt).length > 50, 'traffic before the kill');
    assert.ok(after.length > 100, 'traffic after the kill');
    assert.deepEqual(failedAfter, [], 'no request sent after the kill failed');

    // The client attaches to the third edge; its other session kept the tunnel up all along.
    await waitFor(async () => {
      const now = await attachedNodes();
      return now.length === 2 && now.includes(NODE_IDS[survivor]!) && now.includes(NODE_IDS[third]!);
    }, 20_000, 'the tunnel attached to the survivor and the third edge');
    assert.ok(!events().some((event) => event.event === 'reconnect' || event.event === 'failover' || event.event === 'closed'), running.output());

    // Served where nginx sent it: a request nginx gave to an attached edge is captured in that edge's span of ids.
    const numbers = new Map<string, number>();
    for (const nodeId of NODE_IDS) numbers.set(nodeId, Number(/\r\n(\d+)\r\n/.exec(await redis.command('HGET', 'burrow:cluster:node-numbers', nodeId))?.[1]));
    const upstreamOf = new Map<string, string>();
    for (const line of readFileSync(nginxLog, 'utf8').split('\n')) {
      const [uri, status, upstream] = line.split(' ');
      if (uri?.startsWith('/load/') && status === '200' && upstream !== undefined && !upstream.includes(',')) upstreamOf.set(uri, upstream);
    }
    const captures = await listCaptures(ports[survivor]!, token);
    let checked = 0;
    for (const capture of captures) {
      const upstream = upstreamOf.get(capture.path);
      if (upstream !== `127.0.0.1:${ports[survivor]}`) continue;
      checked++;
      assert.equal(nodeNumberOfCaptureId(capture.id), numbers.get(NODE_IDS[survivor]!), `${capture.path} was sent to edge ${NODE_IDS[survivor]} and served there`);
    }
    assert.ok(checked > 20, `requests nginx sent to the attached edge ${NODE_IDS[survivor]}: ${checked}`);
  } finally {
    client?.child.kill('SIGTERM');
    if (client !== undefined) await client.exited;
    await nginx?.stop();
    for (const edge of edges) {
      edge.child.kill('SIGTERM');
      await edge.exited;
    }
    await publicAgent.close();
    await local.close();
  }
});

/** Every capture of SUBDOMAIN, through one edge's API (newest first, paged with `before`). */
async function listCaptures(port: number, token: string): Promise<{ id: string; path: string }[]> {
  const listed: { id: string; path: string }[] = [];
  let before = '';
  for (let page = 0; page < 10; page++) {
    const query = `subdomain=${SUBDOMAIN}&limit=1000${before === '' ? '' : `&before=${before}`}`;
    const response = await request(`http://127.0.0.1:${port}/api/v1/requests?${query}`, { headers: { host: `${DOMAIN}:${port}`, authorization: `Bearer ${token}` } });
    const text = await response.body.text();
    assert.equal(response.statusCode, 200, `listing answered ${response.statusCode}: ${text}`);
    const requests = (JSON.parse(text) as { requests: { id: string; path: string }[] }).requests;
    listed.push(...requests);
    if (requests.length < 1000) return listed;
    before = requests[requests.length - 1]!.id;
  }
  return listed;
}
