/**
 * The sub-millisecond latency probe: sequential requests on one keep-alive connection (an undici Client),
 * each timed with process.hrtime.bigint() from the call to the last body byte. Paths are probed in
 * interleaved blocks so drift on the machine hits them all alike.
 */
import { Client } from 'undici';
import type { Method, Target } from './load.js';
import { GET_BODY, POST_ANSWER, POST_PAYLOAD } from './payloads.js';
import { mean, percentileSorted } from './stats.js';

export interface ProbeResult {
  samples: number;
  errors: number;
  /** Microseconds. */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  mean: number;
  min: number;
  max: number;
}

class ProbeConnection {
  private readonly client: Client;
  private readonly headers: Record<string, string>;
  private readonly body: string | undefined;
  private readonly expected: string;

  constructor(target: Target, private readonly method: Method) {
    this.client = new Client(target.origin, { pipelining: 1, keepAliveTimeout: 120_000, keepAliveMaxTimeout: 120_000 });
    this.headers = {};
    if (target.host !== null) this.headers.host = target.host;
    if (method === 'POST') this.headers['content-type'] = 'application/json';
    this.body = method === 'POST' ? POST_PAYLOAD : undefined;
    this.expected = method === 'POST' ? POST_ANSWER : GET_BODY;
  }

  /** One request; its latency in µs, or -1 when it failed or answered wrongly. */
  async once(): Promise<number> {
    const started = process.hrtime.bigint();
    try {
      const response = await this.client.request({
        path: '/probe',
        method: this.method,
        headers: this.headers,
        ...(this.body === undefined ? {} : { body: this.body }),
      });
      const text = await response.body.text();
      const elapsed = Number(process.hrtime.bigint() - started) / 1000;
      return response.statusCode === 200 && text === this.expected ? elapsed : -1;
    } catch {
      return -1;
    }
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => this.client.destroy());
  }
}

export interface ProbePlan {
  /** Measured requests per path. */
  requests: number;
  /** Unmeasured requests per path first (connection set-up, JIT). */
  warmup: number;
  /** Requests per path before moving on to the next path. */
  block: number;
}

/** Probes every path with one method; returns stats per path name. */
export async function probe(paths: ReadonlyMap<string, Target>, method: Method, plan: ProbePlan, aborted: () => boolean): Promise<Map<string, ProbeResult>> {
  const connections = new Map<string, ProbeConnection>();
  const samples = new Map<string, number[]>();
  const errors = new Map<string, number>();
  try {
    for (const [name, target] of paths) {
      const connection = new ProbeConnection(target, method);
      connections.set(name, connection);
      samples.set(name, []);
      errors.set(name, 0);
      for (let i = 0; i < plan.warmup && !aborted(); i++) await connection.once();
    }
    for (let done = 0; done < plan.requests && !aborted(); done += plan.block) {
      const count = Math.min(plan.block, plan.requests - done);
      for (const [name, connection] of connections) {
        const list = samples.get(name)!;
        for (let i = 0; i < count; i++) {
          const micros = await connection.once();
          if (micros < 0) errors.set(name, errors.get(name)! + 1);
          else list.push(micros);
        }
      }
    }
  } finally {
    for (const connection of connections.values()) await connection.close();
  }
  const results = new Map<string, ProbeResult>();
  for (const [name, list] of samples) {
    const sorted = Float64Array.from(list).sort();
    results.set(name, {
      samples: sorted.length,
      errors: errors.get(name)!,
      p50: percentileSorted(sorted, 0.5),
      p90: percentileSorted(sorted, 0.9),
      p99: percentileSorted(sorted, 0.99),
      p999: percentileSorted(sorted, 0.999),
      mean: mean(sorted),
      min: sorted.length > 0 ? sorted[0]! : Number.NaN,
      max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
    });
  }
  return results;
}
