/**
 * Cluster tests' parts: real edges in cluster mode on one real Redis (test/redis-server.ts), each with
 * its own data directory, and local servers that answer with their own name, so a public answer says
 * which client served it.
 */
import { request } from 'undici';
import type { ClusterTimings } from '../../src/edge/cluster/registry.js';
import type { EdgeOptions } from '../../src/edge/server.js';
import { startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

/** Test-sized lease timings: a lease lives 3 s, is renewed every 0.5 s, is served until 2.5 s after a renewal. */
export const FAST_TIMINGS: Partial<ClusterTimings> = {
  leaseTtlMs: 3_000,
  renewEveryMs: 500,
  marginMs: 500,
  heartbeatTtlMs: 2_000,
  ownerCacheMs: 200,
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
  target: TestEdge,
  token: string,
  subdomain: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string; json: any }> {
  const { default: WebSocket } = await import('ws');
  const { PROTOCOL_HEADER, PROTOCOL_VERSION, CONNECT_PATH } = await import('../../src/protocol/constants.js');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${target.edge.agentPort}${CONNECT_PATH}?port=3000&subdomain=${subdomain}`, {
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
