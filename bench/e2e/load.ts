/**
 * One bounded autocannon run (programmatic API, in the runner's process) against a path, direct or through
 * the tunnel, reduced to the numbers the benchmark records.
 */
import autocannon, { type Instance, type Result } from 'autocannon';
import { GET_BODY, POST_ANSWER, POST_PAYLOAD } from './payloads.js';

export type Method = 'GET' | 'POST';

/** Where requests go: `origin` is always http://127.0.0.1:PORT; `host` picks the tunnel on the edge. */
export interface Target {
  origin: string;
  host: string | null;
}

export interface LoadResult {
  /** Completed requests per second over the run. */
  reqPerSec: number;
  requests: number;
  durationS: number;
  latencyMs: { p50: number; p90: number; p99: number; p999: number; mean: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  resets: number;
  statusCodes: Record<string, number>;
}

let current: Instance | null = null;

/** Stops the autocannon run in progress, if any (SIGINT of the runner). */
export function stopCurrentLoad(): void {
  current?.stop();
}

export async function runLoad(target: Target, method: Method, connections: number, durationS: number): Promise<LoadResult> {
  const headers: Record<string, string> = {};
  if (target.host !== null) headers.host = target.host;
  if (method === 'POST') headers['content-type'] = 'application/json';
  const result = await new Promise<Result>((resolve, reject) => {
    current = autocannon(
      {
        url: `${target.origin}/bench`,
        method,
        connections,
        duration: durationS,
        timeout: 10,
        headers,
        ...(method === 'POST' ? { body: POST_PAYLOAD, expectBody: POST_ANSWER } : { expectBody: GET_BODY }),
      },
      (error, value) => {
        current = null;
        if (error !== null && error !== undefined) reject(error);
        else resolve(value);
      },
    );
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  return {
    reqPerSec: result.duration > 0 ? result.requests.total / result.duration : 0,
    requests: result.requests.total,
    durationS: result.duration,
    latencyMs: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      p999: result.latency.p99_9,
      mean: result.latency.mean,
      max: result.latency.max,
    },
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    mismatches: result.mismatches,
    resets: result.resets,
    statusCodes,
  };
}
