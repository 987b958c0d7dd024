/**
 * One bounded autocannon run (programmatic API, in the runner's process) against a path, direct, through
 * the tunnel or through a floor, reduced to the numbers the benchmark records. Several may run at once
 * (the many-tenant phase runs one per tunnel).
 */
import autocannon, { type Instance, type Result } from 'autocannon';
import { expectedAnswer, payload, scenarioPath, type Method, type Scenario } from './payloads.js';

export type { Method } from './payloads.js';

/** Where requests go: `origin` is always http://127.0.0.1:PORT; `host` picks the tunnel on the edge. */
export interface Target {
  origin: string;
  host: string | null;
  /**
   * https only: spread the connections evenly over these loopback source addresses, one autocannon
   * instance each, as public clients come from many addresses. The edge bounds TLS handshakes per client
   * address (8 at once, 32 waiting; docs/security.md), so 100 connections opened at once from one address
   * would mostly be closed at the door.
   */
  sourceAddresses?: readonly string[];
}

export interface LoadResult {
  /** Completed requests per second over the run. */
  reqPerSec: number;
  requests: number;
  durationS: number;
  /** Body bytes per second, both ways (autocannon's throughput counts what it read). */
  bytesPerSec: number;
  latencyMs: { p50: number; p90: number; p99: number; p999: number; mean: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  /** false when the answers were too big to compare byte for byte (1 MiB GET): `mismatches` is then 0 by default. */
  bodiesChecked: boolean;
  resets: number;
  statusCodes: Record<string, number>;
}

/** Answers up to this size are compared with what they should be; bigger ones only by status and framing. */
const CHECKED_BODY_LIMIT = 64 * 1024;

const running = new Set<Instance>();

/** Stops every autocannon run in progress (SIGINT of the runner). */
export function stopCurrentLoad(): void {
  for (const instance of running) instance.stop();
}

/** A scenario, or for the older callers a method (1 KiB POST, or GET of the target's small default body). */
/** `amount`: stop after this many requests instead of after `durationS` (bench/ab.ts). */
export async function runLoad(target: Target, scenario: Scenario | Method, connections: number, durationS: number, amount = 0): Promise<LoadResult> {
  const sources = target.sourceAddresses ?? [];
  if (sources.length > 1 && amount === 0) {
    const share = (i: number): number => Math.floor(connections / sources.length) + (i < connections % sources.length ? 1 : 0);
    const parts = await Promise.all(sources.map((address, i) => runLoad({ origin: target.origin, host: target.host, sourceAddresses: [address] }, scenario, share(i), durationS)));
    return mergeLoads(parts);
  }
  const s: Scenario = typeof scenario === 'string' ? { method: scenario, size: 1024, shape: 'length' } : scenario;
  const headers: Record<string, string> = {};
  if (target.host !== null) headers.host = target.host;
  if (s.method === 'POST') headers['content-type'] = 'application/json';
  const expected = expectedAnswer(s);
  const bodiesChecked = expected.length <= CHECKED_BODY_LIMIT;
  const result = await new Promise<Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: `${target.origin}${scenarioPath(s)}`,
        method: s.method,
        connections,
        ...(amount > 0 ? { amount } : { duration: durationS }),
        timeout: 10,
        headers,
        ...(s.method === 'POST' ? { body: payload(s.size) } : {}),
        ...(bodiesChecked ? { expectBody: expected } : {}),
        ...(sources.length === 1 ? { tlsOptions: { localAddress: sources[0] } } : {}),
      },
      (error, value) => {
        running.delete(instance);
        if (error !== null && error !== undefined) reject(error);
        else resolve(value);
      },
    );
    running.add(instance);
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  return {
    reqPerSec: result.duration > 0 ? result.requests.total / result.duration : 0,
    requests: result.requests.total,
    durationS: result.duration,
    bytesPerSec: result.duration > 0 ? result.throughput.total / result.duration : 0,
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
    bodiesChecked,
    resets: result.resets,
    statusCodes,
  };
}

/**
 * Instances run side by side as one result: counts and rates add up; of the latency percentiles only an
 * estimate survives (autocannon gives no histogram): the request-weighted mean of p50 and mean, the
 * largest of the others.
 */
export function mergeLoads(parts: readonly LoadResult[]): LoadResult {
  const sum = (pick: (l: LoadResult) => number): number => parts.reduce((total, l) => total + pick(l), 0);
  const requests = sum((l) => l.requests);
  const weighted = (pick: (l: LoadResult) => number): number => (requests > 0 ? Math.round((sum((l) => pick(l) * l.requests) / requests) * 100) / 100 : Number.NaN);
  const most = (pick: (l: LoadResult) => number): number => Math.max(...parts.map(pick));
  const statusCodes: Record<string, number> = {};
  for (const part of parts) for (const [code, count] of Object.entries(part.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  return {
    reqPerSec: sum((l) => l.reqPerSec),
    requests,
    durationS: most((l) => l.durationS),
    bytesPerSec: sum((l) => l.bytesPerSec),
    latencyMs: {
      p50: weighted((l) => l.latencyMs.p50),
      p90: most((l) => l.latencyMs.p90),
      p99: most((l) => l.latencyMs.p99),
      p999: most((l) => l.latencyMs.p999),
      mean: weighted((l) => l.latencyMs.mean),
      max: most((l) => l.latencyMs.max),
    },
    errors: sum((l) => l.errors),
    timeouts: sum((l) => l.timeouts),
    non2xx: sum((l) => l.non2xx),
    mismatches: sum((l) => l.mismatches),
    bodiesChecked: parts.every((l) => l.bodiesChecked),
    resets: sum((l) => l.resets),
    statusCodes,
  };
}

/** Errors, timeouts, non-2xx and wrong bodies of a run. */
export function badCount(load: LoadResult): number {
  return load.errors + load.timeouts + load.non2xx + load.mismatches;
}
