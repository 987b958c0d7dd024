/**
 * The sub-millisecond latency probe: sequential requests on one keep-alive connection, per path, with one of
 * three senders, as users send:
 * - `undici`: an undici Client (pipelining 1), timed with process.hrtime.bigint() from the call to the
 *   last body byte;
 * - `node-http`: Node's `http.request` through a keep-alive Agent with one socket, timed the same way;
 * - `curl`: one curl process per block, all the block's URLs in one invocation (curl reuses its
 *   connection between them), each transfer timed by curl itself (`%{time_total}`); the first transfer of
 *   each invocation opens the connection and is not counted.
 * Every sender checks each answer (status 200 and the expected body; curl: status and size) and counts
 * the connections it had to open beyond the first (`newConnections`: a probe that does not reuse its
 * connection measures connection set-up, not the path). Paths are probed in interleaved blocks so drift
 * on the machine hits them all alike.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import type { Target } from './load.js';
import { expectedAnswer, payload, scenarioPath, type Method, type Scenario } from './payloads.js';
import { mean, percentileSorted } from './stats.js';

export type Sender = 'undici' | 'node-http' | 'curl';
export const SENDERS: readonly Sender[] = ['undici', 'node-http', 'curl'];

export interface ProbeResult {
  samples: number;
  errors: number;
  /** Connections opened after the first one (should be 0: every request on one connection). */
  newConnections: number;
  /** Microseconds. */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  mean: number;
  min: number;
  max: number;
}

interface Connection {
  /** `count` sequential requests; their latencies in µs (-1 for a failed or wrong answer). */
  run(count: number): Promise<number[]>;
  /** Connections opened so far. */
  readonly connects: number;
  close(): Promise<void>;
}

function headersFor(target: Target, scenario: Scenario): Record<string, string> {
  const headers: Record<string, string> = {};
  if (target.host !== null) headers.host = target.host;
  if (scenario.method === 'POST') headers['content-type'] = 'application/json';
  return headers;
}

class UndiciConnection implements Connection {
  private readonly client: Client;
  private readonly headers: Record<string, string>;
  private readonly path: string;
  private readonly body: string | undefined;
  private readonly expected: string;
  connects = 0;

  constructor(target: Target, private readonly scenario: Scenario) {
    this.client = new Client(target.origin, { pipelining: 1, keepAliveTimeout: 120_000, keepAliveMaxTimeout: 120_000 });
    this.client.on('connect', () => this.connects++);
    this.headers = headersFor(target, scenario);
    this.path = scenarioPath(scenario);
    this.body = scenario.method === 'POST' ? payload(scenario.size) : undefined;
    this.expected = expectedAnswer(scenario);
  }

  private async once(): Promise<number> {
    const started = process.hrtime.bigint();
    try {
      const response = await this.client.request({ path: this.path, method: this.scenario.method, headers: this.headers, ...(this.body === undefined ? {} : { body: this.body }) });
      const text = await response.body.text();
      const elapsed = Number(process.hrtime.bigint() - started) / 1000;
      return response.statusCode === 200 && text === this.expected ? elapsed : -1;
    } catch {
      return -1;
    }
  }

  async run(count: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push(await this.once());
    return out;
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => this.client.destroy());
  }
}

class NodeHttpConnection implements Connection {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1, keepAliveMsecs: 120_000 });
  private readonly port: number;
  private readonly headers: Record<string, string>;
  private readonly path: string;
  private readonly body: Buffer | undefined;
  private readonly expected: string;
  connects = 0;

  constructor(target: Target, private readonly scenario: Scenario) {
    this.port = Number(new URL(target.origin).port);
    this.path = scenarioPath(scenario);
    this.body = scenario.method === 'POST' ? Buffer.from(payload(scenario.size)) : undefined;
    this.headers = headersFor(target, scenario);
    if (this.body !== undefined) this.headers['content-length'] = String(this.body.length);
    this.expected = expectedAnswer(scenario);
  }

  private once(): Promise<number> {
    return new Promise<number>((resolve) => {
      const started = process.hrtime.bigint();
      const req = httpRequest({ agent: this.agent, host: '127.0.0.1', port: this.port, path: this.path, method: this.scenario.method, headers: this.headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const elapsed = Number(process.hrtime.bigint() - started) / 1000;
          const text = chunks.length === 1 ? chunks[0]!.toString('latin1') : Buffer.concat(chunks).toString('latin1');
          resolve(res.statusCode === 200 && text === this.expected ? elapsed : -1);
        });
        res.on('error', () => resolve(-1));
      });
      req.on('socket', () => {
        if (!req.reusedSocket) this.connects++;
      });
      req.on('error', () => resolve(-1));
      req.end(this.body);
    });
  }

  async run(count: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push(await this.once());
    return out;
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

/** A block is one curl process: a warm-up transfer that opens the connection, then `count` measured ones. */
class CurlConnection implements Connection {
  private readonly url: string;
  private readonly args: string[];
  private readonly expectedSize: number;
  connects = 0;

  constructor(target: Target, scenario: Scenario, private readonly dir: string) {
    this.url = `${target.origin}${scenarioPath(scenario)}`;
    this.args = ['-s', '--http1.1', '-H', 'Expect:', '-w', '%{http_code} %{size_download} %{num_connects} %{time_total}\\n'];
    if (target.host !== null) this.args.push('-H', `Host: ${target.host}`);
    if (scenario.method === 'POST') {
      const file = join(dir, `post-${scenario.size}.json`);
      writeFileSync(file, payload(scenario.size));
      this.args.push('-H', 'Content-Type: application/json', '--data-binary', `@${file}`);
    }
    this.expectedSize = Buffer.byteLength(expectedAnswer(scenario));
  }

  run(count: number): Promise<number[]> {
    const config = join(this.dir, 'urls.conf');
    writeFileSync(config, `url = "${this.url}"\noutput = "/dev/null"\n`.repeat(count + 1));
    return new Promise<number[]>((resolve) => {
      const child = spawn('curl', [...this.args, '--config', config], { stdio: ['ignore', 'pipe', 'ignore'] });
      let text = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        text += chunk;
      });
      const finish = (): void => {
        const lines = text.split('\n').filter((line) => line !== '');
        const out: number[] = [];
        lines.forEach((line, index) => {
          const [code, size, connects, total] = line.split(' ');
          this.connects += Number(connects) || 0;
          if (index === 0) return; // opened the connection
          out.push(code === '200' && Number(size) === this.expectedSize ? Number(total) * 1e6 : -1);
        });
        while (out.length < count) out.push(-1);
        resolve(out);
      };
      child.on('error', () => resolve(new Array<number>(count).fill(-1)));
      child.on('close', finish);
    });
  }

  async close(): Promise<void> {}

  /** Invocations are separate connections by design: one per block is expected. */
  expectedConnects(blocks: number): number {
    return blocks;
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

/** Probes every path with one scenario and sender; returns stats per path name. */
export async function probe(paths: ReadonlyMap<string, Target>, scenario: Scenario | Method, plan: ProbePlan, aborted: () => boolean, sender: Sender = 'undici'): Promise<Map<string, ProbeResult>> {
  const s: Scenario = typeof scenario === 'string' ? { method: scenario, size: 1024, shape: 'length' } : scenario;
  const dir = sender === 'curl' ? mkdtempSync(join(tmpdir(), 'burrow-bench-curl-')) : null;
  // curl: one process per block, so blocks are bigger (each costs a process start and a connection).
  const block = sender === 'curl' ? Math.max(plan.block, 250) : plan.block;
  const connections = new Map<string, Connection>();
  const samples = new Map<string, number[]>();
  const errors = new Map<string, number>();
  const blocks = new Map<string, number>();
  try {
    for (const [name, target] of paths) {
      const connection: Connection =
        sender === 'undici' ? new UndiciConnection(target, s) : sender === 'node-http' ? new NodeHttpConnection(target, s) : new CurlConnection(target, s, mkdtempSync(join(dir!, 'p-')));
      connections.set(name, connection);
      samples.set(name, []);
      errors.set(name, 0);
      blocks.set(name, 0);
      if (sender !== 'curl' && plan.warmup > 0 && !aborted()) await connection.run(plan.warmup);
    }
    for (let done = 0; done < plan.requests && !aborted(); done += block) {
      const count = Math.min(block, plan.requests - done);
      for (const [name, connection] of connections) {
        const list = samples.get(name)!;
        blocks.set(name, blocks.get(name)! + 1);
        for (const micros of await connection.run(count)) {
          if (micros < 0) errors.set(name, errors.get(name)! + 1);
          else list.push(micros);
        }
      }
    }
  } finally {
    for (const connection of connections.values()) await connection.close();
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
  }
  const results = new Map<string, ProbeResult>();
  for (const [name, list] of samples) {
    const sorted = Float64Array.from(list).sort();
    const connection = connections.get(name)!;
    const expected = connection instanceof CurlConnection ? connection.expectedConnects(blocks.get(name)!) : 1;
    results.set(name, {
      samples: sorted.length,
      errors: errors.get(name)!,
      newConnections: Math.max(0, connection.connects - expected),
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
