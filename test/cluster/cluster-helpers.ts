/**
 * Cluster tests' parts: real edges in cluster mode on one real Redis (test/redis-server.ts), each with
 * its own data directory, and local servers that answer with their own name, so a public answer says
 * which client served it.
 */
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { request } from 'undici';
import type { ClusterTimings } from '../../src/edge/cluster/registry.js';
import type { EdgeOptions } from '../../src/edge/server.js';
import { agentUrlOf, startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

/** Test-sized lease timings: a lease lives 3 s, is renewed every 0.5 s, is served until 2.5 s after a renewal. */
export const FAST_TIMINGS: Partial<ClusterTimings> = {
  leaseTtlMs: 3_000,
  renewEveryMs: 500,
  marginMs: 500,
  heartbeatTtlMs: 2_000,
};

export async function startClusterEdge(redisUrl: string, nodeId: string, options: Partial<EdgeOptions> = {}): Promise<TestEdge> {
  return startEdge({
    cluster: { redis: redisUrl, nodeId, advertise: '' },
    clusterTimings: FAST_TIMINGS,
    graceMs: 5_000,
    ...options,
  });
}

/** A local server whose every answer is its name. */
export function startNamed(name: string): Promise<LocalServer> {
  return startLocal((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'text/plain');
      res.end(name);
    });
  });
}

/** A public GET for `subdomain` sent to `target`: the status and the body (a local server's name when 200). */
export async function publicGet(target: TestEdge, subdomain: string, path = '/'): Promise<{ status: number; text: string }> {
  const response = await request(`${target.base}${path}`, { headers: { host: `${subdomain}.localhost:${target.port}` } });
  return { status: response.statusCode, text: await response.body.text() };
}

/** A tunnel connect by hand that expects a refusal: its status, headers and JSON body (the spec's error shape). */
export async function refusedConnect(
  target: Pick<TestEdge, 'port' | 'base'>,
  token: string,
  subdomain: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string; json: any }> {
  const { default: WebSocket } = await import('ws');
  const { PROTOCOL_HEADER, PROTOCOL_VERSION } = await import('../../src/protocol/constants.js');
  // Where a client would connect: the agent endpoint the edge names (an edge object or a CLI edge alike).
  const agentUrl = await agentUrlOf(target.base, `localhost:${target.port}`);
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${agentUrl}?port=3000&subdomain=${subdomain}`, {
      headers: { host: `localhost:${target.port}`, authorization: `Bearer ${token}`, [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) },
    });
    ws.on('open', () => {
      ws.terminate();
      reject(new Error('the connect was accepted'));
    });
    ws.on('error', () => undefined);
    ws.on('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: response.statusCode ?? 0, headers: response.headers, text, json });
        ws.terminate();
      });
    });
  });
}

/** One public request of a steady load: where it went, when, and how it was answered. */
export interface LoadOutcome {
  subdomain: string;
  /** Index of the edge it was sent to. */
  edge: number;
  sentAt: number;
  answeredAt: number;
  status: number;
  /** The edge's error code (`burrow-error` header) or the body when 200 (the local server's name). */
  code: string;
  text: string;
  path: string;
}

/**
 * Steady, bounded public traffic: one sender per (subdomain, edge), each one GET at a time with a pause
 * between, every path unique (`/load-<subdomain>-<edge>-<n>`). `stop()` ends it and returns every outcome;
 * a request that found no answer (connection refused, reset) is status 0.
 */
export function steadyLoad(edges: readonly Pick<TestEdge, 'base' | 'port'>[], subdomains: readonly string[], pauseMs = 20): { stop(): Promise<LoadOutcome[]>; outcomes: LoadOutcome[] } {
  const outcomes: LoadOutcome[] = [];
  let running = true;
  const senders: Promise<void>[] = [];
  for (const subdomain of subdomains) {
    edges.forEach((target, index) => {
      senders.push(
        (async () => {
          for (let n = 0; running; n++) {
            const path = `/load-${subdomain}-${index}-${n}`;
            const sentAt = performance.now();
            let status = 0;
            let code = '';
            let text = '';
            try {
              const response = await request(`${target.base}${path}`, {
                headers: { host: `${subdomain}.localhost:${target.port}` },
                headersTimeout: 10_000,
                bodyTimeout: 10_000,
              });
              status = response.statusCode;
              text = await response.body.text();
              const error = response.headers['burrow-error'];
              code = typeof error === 'string' ? error : '';
            } catch (error) {
              code = (error as Error).message;
            }
            outcomes.push({ subdomain, edge: index, sentAt, answeredAt: performance.now(), status, code, text, path });
            await new Promise((resolve) => setTimeout(resolve, pauseMs));
          }
        })(),
      );
    });
  }
  return {
    outcomes,
    async stop() {
      running = false;
      await Promise.all(senders);
      return outcomes;
    },
  };
}

/** Counts outcomes by "status code" (e.g. "200 ", "503 STORE_UNAVAILABLE"), for assertion messages. */
export function tally(outcomes: readonly LoadOutcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) {
    const key = `${outcome.status} ${outcome.status === 200 ? '' : outcome.code}`.trim();
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/**
 * A TCP relay in front of Redis for one edge, so a test can cut that edge off from Redis alone (a
 * partition) and heal it. Cut, it drops every relayed connection and takes new ones without ever
 * answering (as a lost network does: the edge's calls time out); healed, it relays new ones again.
 */
export class RedisRelay {
  private readonly sockets = new Set<Socket>();
  private cutOff = false;

  private constructor(private readonly server: Server, readonly url: string) {}

  static async start(redisPort: number): Promise<RedisRelay> {
    let relay: RedisRelay | null = null;
    const server = createServer((socket) => relay!.take(socket, redisPort));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    relay = new RedisRelay(server, `redis://127.0.0.1:${(server.address() as { port: number }).port}`);
    return relay;
  }

  private take(socket: Socket, redisPort: number): void {
    this.sockets.add(socket);
    socket.on('error', () => undefined).on('close', () => this.sockets.delete(socket));
    if (this.cutOff) return; // held open, never answered
    const upstream = connect(redisPort, '127.0.0.1');
    this.sockets.add(upstream);
    socket.pipe(upstream).pipe(socket);
    const drop = (): void => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on('close', drop);
    upstream.on('error', drop).on('close', () => {
      this.sockets.delete(upstream);
      drop();
    });
  }

  cut(): void {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
  }

  heal(): void {
    this.cutOff = false;
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
  }
}
