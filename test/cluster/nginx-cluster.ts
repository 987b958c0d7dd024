/**
 * Three edges in cluster mode as real processes on one real Redis, behind Debian's nginx with the
 * shipped deploy/nginx-burrow-cluster.conf, and what the tests of clients on several edges measure with
 * them: bounded public traffic through nginx, the edges a name's lease has attached, which edge nginx
 * gave each request to and which edge captured it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { nodeNumberOfCaptureId } from '../../src/store/captures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { freePorts, makeCertificates, startClusterNginx, type RunningNginx } from '../nginx-front.js';
import { runCli, spawnCli, startLocal, type LocalServer, type SpawnedProcess } from '../helpers.js';
import type { TestRedis } from '../redis-server.js';

export const NODE_IDS = ['a', 'b', 'c'] as const;

export interface NginxCluster {
  env: Record<string, string>;
  token: string;
  caFile: string;
  caPem: Buffer;
  httpsPort: number;
  /** Each edge's public (API) port, in NODE_IDS order. */
  ports: number[];
  edges: SpawnedProcess[];
  nginx: RunningNginx;
  /** nginx's "$request_uri $status $upstream_addr" lines. */
  nginxLog: string;
  /** Stops nginx and the edges still running. */
  stop(): Promise<void>;
}

/** Three edge processes, an account with a token, nginx in front. `dir` holds certificates and nginx's files. */
export async function startNginxCluster(redis: TestRedis, dir: string, makeDir: () => string, email: string): Promise<NginxCluster> {
  const { caFile, caPem, certDir } = makeCertificates(dir, TEST_DOMAIN);
  const env = { XDG_CONFIG_HOME: makeDir() };
  // Every port different: the edges bind theirs before nginx binds its two.
  const [httpsPort, httpPort, ...edgePorts] = (await freePorts(2 + 2 * NODE_IDS.length)) as [number, number, ...number[]];
  const ports = edgePorts.slice(0, NODE_IDS.length);
  const agentPorts = edgePorts.slice(NODE_IDS.length);
  const edges: SpawnedProcess[] = [];
  let nginx: RunningNginx | undefined;
  const stop = async (): Promise<void> => {
    await nginx?.stop();
    for (const edge of edges) {
      edge.child.kill('SIGTERM');
      await edge.exited;
    }
  };
  try {
    for (let i = 0; i < NODE_IDS.length; i++) {
      edges.push(
        await spawnCli(
          [
            'edge', '--cluster', redis.url, '--node-id', NODE_IDS[i]!, '--advertise', `http://127.0.0.1:${ports[i]}`,
            '--host', '127.0.0.1', '--port', String(ports[i]), '--agent-port', String(agentPorts[i]), '--domain', TEST_DOMAIN,
            '--public-url', `https://${TEST_DOMAIN}:${httpsPort}`, '--trust-proxy', '127.0.0.1/32',
            '--data', makeDir(), '--rate-limit', '1000000', '--grace', '60000',
          ],
          env,
          /listening on/,
        ),
      );
    }
    const created = await runCli(['admin', 'create-account', '--email', email, '--cluster', redis.url, '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const minted = await runCli(['admin', 'token', 'create', '--email', email, '--label', 'several-edges', '--cluster', redis.url, '--json'], env);
    assert.equal(minted.code, 0, minted.stderr);
    const token = JSON.parse(minted.stdout).token.token as string;
    const front = await startClusterNginx(dir, { domain: TEST_DOMAIN, certDir, httpsPort, httpPort, edgePorts: ports, agentPorts });
    nginx = front.nginx;
    return { env, token, caFile, caPem, httpsPort, ports, edges, nginx, nginxLog: front.log, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The edges a name's lease has attached, sorted. */
export async function attachedNodes(redis: TestRedis, subdomain: string): Promise<string[]> {
  const reply = await redis.command('HKEYS', `burrow:cluster:lease:${subdomain}`);
  return [...reply.matchAll(/^a:(\S+)\r?$/gm)].map((match) => match[1]!).sort();
}

export interface Outcome {
  subdomain: string;
  seq: number;
  sentAt: number;
  status: number;
  error: string;
}

/**
 * Steady, bounded public traffic through nginx: `senders` loops, one GET at a time each with a pause,
 * taking the subdomains in turn; the local server must answer `answer <x-seq>`. Stops at `stop()` or
 * after `max` requests.
 */
export function boundedLoad(cluster: NginxCluster, subdomains: readonly string[], options: { senders: number; pauseMs: number; max: number }): { stop(): Promise<Outcome[]> } {
  const agent = new Agent({ connect: { ca: cluster.caPem }, connections: options.senders, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const outcomes: Outcome[] = [];
  let nextSeq = 0;
  let sending = true;
  const sender = async (): Promise<void> => {
    while (sending && nextSeq < options.max) {
      const seq = nextSeq++;
      const subdomain = subdomains[seq % subdomains.length]!;
      const sentAt = performance.now();
      try {
        const response = await request(`https://${subdomain}.${TEST_DOMAIN}:${cluster.httpsPort}/load/${seq}`, { headers: { 'x-seq': String(seq) }, dispatcher: agent });
        const text = await response.body.text();
        outcomes.push({ subdomain, seq, sentAt, status: response.statusCode, error: response.statusCode === 200 && text === `answer ${seq}` ? '' : text.slice(0, 200) });
      } catch (error) {
        outcomes.push({ subdomain, seq, sentAt, status: 0, error: String(error) });
      }
      await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
  };
  const running = Array.from({ length: options.senders }, () => sender());
  return {
    async stop() {
      sending = false;
      await Promise.all(running);
      await agent.close();
      return outcomes;
    },
  };
}

/** The local server behind the tunnels: answers `answer <x-seq>` once it has read the body. */
export function startSequenceServer(): Promise<LocalServer> {
  return startLocal((req, res) => {
    req.resume();
    req.on('end', () => res.end(`answer ${String(req.headers['x-seq'])}`));
  });
}

/** The --json events a client process printed so far. */
export function jsonEventsOf(client: SpawnedProcess): Record<string, unknown>[] {
  return client
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * Bounded traffic to `subdomains` through nginx, the edge `victim` killed with SIGKILL after 1.5 s of it,
 * 4 s more: asserts traffic on both sides of the kill and no failed request sent after it (`label`
 * names the run in the line it prints).
 */
export async function killUnderLoad(cluster: NginxCluster, victim: string, subdomains: readonly string[], label: string): Promise<void> {
  const load = boundedLoad(cluster, subdomains, { senders: 4, pauseMs: 25, max: 1_500 });
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const killed = cluster.edges[NODE_IDS.indexOf(victim as (typeof NODE_IDS)[number])]!;
  killed.child.kill('SIGKILL');
  const killedAt = performance.now();
  await killed.exited;
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  const outcomes = await load.stop();
  const failed = outcomes.filter((outcome) => outcome.status !== 200 || outcome.error !== '');
  const after = outcomes.filter((outcome) => outcome.sentAt >= killedAt);
  const failedAfter = failed.filter((outcome) => outcome.sentAt >= killedAt);
  console.log(
    `# ${label}: ${outcomes.length} requests through nginx, ${after.length} sent after the kill of edge ${victim}; ` +
      `failed: ${failedAfter.length} sent after the kill, ${failed.length - failedAfter.length} in flight at the kill`,
  );
  assert.ok(outcomes.filter((outcome) => outcome.sentAt < killedAt).length > 50, 'traffic before the kill');
  assert.ok(after.length > 100, 'traffic after the kill');
  assert.deepEqual(failedAfter, [], 'no request sent after the kill failed');
}

/**
 * How many of the requests nginx gave to the edge `nodeId` (and to it alone) were captured by that edge,
 * i.e. served there without the internal hop; asserts that every one was.
 */
export async function servedWhereSent(redis: TestRedis, cluster: NginxCluster, nodeId: string, subdomain: string): Promise<number> {
  const index = NODE_IDS.indexOf(nodeId as (typeof NODE_IDS)[number]);
  const number = Number(/\r\n(\d+)\r\n/.exec(await redis.command('HGET', 'burrow:cluster:node-numbers', nodeId))?.[1]);
  const upstreamOf = new Map<string, string>();
  for (const line of readFileSync(cluster.nginxLog, 'utf8').split('\n')) {
    const [uri, status, upstream] = line.split(' ');
    if (uri?.startsWith('/load/') && status === '200' && upstream !== undefined && !upstream.includes(',')) upstreamOf.set(uri, upstream);
  }
  let checked = 0;
  for (const capture of await listCaptures(cluster.ports[index]!, cluster.token, subdomain)) {
    if (upstreamOf.get(capture.path) !== `127.0.0.1:${cluster.ports[index]}`) continue;
    checked++;
    assert.equal(nodeNumberOfCaptureId(capture.id), number, `${subdomain}${capture.path} was sent to edge ${nodeId} and served there`);
  }
  return checked;
}

/** Every capture of `subdomain`, through one edge's API (newest first, paged with `before`). */
async function listCaptures(port: number, token: string, subdomain: string): Promise<{ id: string; path: string }[]> {
  const listed: { id: string; path: string }[] = [];
  let before = '';
  for (let page = 0; page < 10; page++) {
    const query = `subdomain=${subdomain}&limit=1000${before === '' ? '' : `&before=${before}`}`;
    const response = await request(`http://127.0.0.1:${port}/api/v1/requests?${query}`, { headers: { host: `${TEST_DOMAIN}:${port}`, authorization: `Bearer ${token}` } });
    const text = await response.body.text();
    assert.equal(response.statusCode, 200, `listing answered ${response.statusCode}: ${text}`);
    const requests = (JSON.parse(text) as { requests: { id: string; path: string }[] }).requests;
    listed.push(...requests);
    if (requests.length < 1000) return listed;
    before = requests[requests.length - 1]!.id;
  }
  return listed;
}
