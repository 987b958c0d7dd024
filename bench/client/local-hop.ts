/**
 * The client's local hop against undici, as the tunnel client drives each: CPU of this process per
 * request (user + system, from process.cpuUsage) and requests per second, against the same local Node
 * server (bench/e2e/target.ts, in its own process so its CPU is not counted), for a 1 KiB POST and a
 * 1 KiB GET at concurrency 1 and 50. Rounds alternate which client goes first (A/B, B/A, ...), so
 * machine noise spreads over both; the table shows the median of the rounds and their range.
 *
 * undici is driven as src/client/http-stream.ts drives it today: a Pool per target with the tunnel
 * client's options and connector, `dispatch` with a handler object. The local hop as http-stream.ts is
 * to drive it: `pool.request` with a handler object. Both send the same fields.
 *
 * Run: npx tsc -p . && node dist/bench/client/local-hop.js [--rounds 5] [--ms 1500] [--only 'c=1']
 * On a busy shared machine take the numbers as rough; compare the two columns of one run only.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Pool, type Dispatcher } from 'undici';
import { localConnector } from '../../src/client/local-connector.js';
import { LocalHop, type TargetPool } from '../../src/client/local-hop/pool.js';
import type { LocalResponseHandler } from '../../src/client/local-hop/exchange.js';
import { localTarget, type LocalTarget } from '../../src/client/routes.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, ms: { type: 'string', default: '1500' }, only: { type: 'string' } } });
const ROUNDS = Number(values.rounds);
const RUN_MS = Number(values.ms);

const BODY = Buffer.alloc(1024, 0x61);
const FIELDS = [
  'host', 'quiet-river-42.localhost:8080',
  'user-agent', 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
  'content-type', 'application/json; charset=utf-8',
  'accept', '*/*; q=0.5, application/xml',
  'x-forwarded-for', '54.187.174.169',
  'x-forwarded-proto', 'https',
  'x-forwarded-host', 'quiet-river-42.localhost:8080',
];
const POST_FIELDS = [...FIELDS, 'content-length', String(BODY.length)];

interface Scenario {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  concurrency: number;
}

const ALL_SCENARIOS: Scenario[] = [
  { name: 'POST 1 KiB, c=1', method: 'POST', path: '/bench/length/0', concurrency: 1 },
  { name: 'POST 1 KiB, c=50', method: 'POST', path: '/bench/length/0', concurrency: 50 },
  { name: 'GET 1 KiB, c=1', method: 'GET', path: '/bench/length/1024', concurrency: 1 },
  { name: 'GET 1 KiB, c=50', method: 'GET', path: '/bench/length/1024', concurrency: 50 },
];
/** `--only TEXT` keeps the scenarios whose name contains it (`--only c=1`). */
const SCENARIOS = values.only === undefined ? ALL_SCENARIOS : ALL_SCENARIOS.filter((scenario) => scenario.name.includes(values.only!));

/** Runs requests back to back on `concurrency` lanes until `deadline`; calls `done` when all lanes stop. */
interface Driver {
  name: string;
  start(scenario: Scenario, deadline: number, done: (requests: number) => void): void;
  close(): Promise<void>;
}

class Lanes {
  requests = 0;
  private running: number;
  constructor(
    readonly scenario: Scenario,
    private readonly deadline: number,
    private readonly done: (requests: number) => void,
    private readonly issue: (lanes: Lanes) => void,
  ) {
    this.running = scenario.concurrency;
  }
  begin(): void {
    for (let i = 0; i < this.scenario.concurrency; i++) this.issue(this);
  }
  /** A request ended: the lane goes on or stops. */
  next(): void {
    this.requests++;
    if (performance.now() < this.deadline) this.issue(this);
    else if (--this.running === 0) this.done(this.requests);
  }
  failed(error: Error): never {
    throw error;
  }
}

class HopHandler implements LocalResponseHandler {
  bytes = 0;
  constructor(private readonly lanes: Lanes) {}
  onInterim(): void {}
  onHead(): void {}
  onBody(chunk: Buffer): void {
    this.bytes += chunk.byteLength;
  }
  onTrailers(): void {}
  onEnd(): void {
    this.lanes.next();
  }
  onUpgrade(): void {}
  onError(error: Error): void {
    this.lanes.failed(error);
  }
  onRequestDrain(): void {}
}

function hopDriver(target: LocalTarget): Driver & { pool: TargetPool } {
  const hop = new LocalHop([target]);
  const pool = hop.pool(target);
  const issue = (lanes: Lanes): void => {
    const post = lanes.scenario.method === 'POST';
    pool.request({ method: lanes.scenario.method, target: lanes.scenario.path, fields: post ? POST_FIELDS : FIELDS }, post ? BODY : null, true, new HopHandler(lanes));
  };
  return {
    name: 'local hop',
    pool,
    start(scenario, deadline, done) {
      new Lanes(scenario, deadline, done, issue).begin();
    },
    async close() {
      hop.close();
    },
  };
}

class UndiciHandler implements Dispatcher.DispatchHandler {
  bytes = 0;
  constructor(private readonly lanes: Lanes) {}
  onRequestStart(): void {}
  onResponseStart(): void {}
  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.byteLength;
  }
  onResponseEnd(): void {
    this.lanes.next();
  }
  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.lanes.failed(error);
  }
}

function undiciDriver(target: LocalTarget): Driver {
  // The tunnel client's pool, as src/client/tunnel-client.ts builds it.
  const pool = new Pool(target.origin, { connections: 128, pipelining: 1, keepAliveTimeout: 10_000, headersTimeout: 0, bodyTimeout: 0, connect: localConnector(target, false) });
  const issue = (lanes: Lanes): void => {
    const post = lanes.scenario.method === 'POST';
    pool.dispatch({ path: lanes.scenario.path, method: lanes.scenario.method, headers: post ? POST_FIELDS : FIELDS, body: post ? BODY : null, blocking: false }, new UndiciHandler(lanes));
  };
  return {
    name: 'undici',
    start(scenario, deadline, done) {
      new Lanes(scenario, deadline, done, issue).begin();
    },
    async close() {
      await pool.destroy();
    },
  };
}

interface Sample {
  cpuMicros: number;
  rate: number;
}

async function measure(driver: Driver, scenario: Scenario, ms: number): Promise<Sample> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const requests = await new Promise<number>((resolve) => driver.start(scenario, started + ms, resolve));
  const elapsed = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { cpuMicros: (used.user + used.system) / requests, rate: (requests * 1000) / elapsed };
}

async function startTarget(): Promise<{ port: number; stop(): void }> {
  const child = spawn(process.execPath, [new URL('../e2e/target.js', import.meta.url).pathname], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the target exited with ${code}`)));
  });
  return { port: (JSON.parse(line) as { port: number }).port, stop: () => child.kill('SIGTERM') };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

async function main(): Promise<void> {
  const server = await startTarget();
  const target = localTarget(server.port, '127.0.0.1');
  const drivers = [hopDriver(target), undiciDriver(target)];
  const samples = new Map<string, Sample[]>();
  try {
    // Warm-up: connections opened, code optimised, for both.
    for (const driver of drivers) for (const scenario of SCENARIOS) await measure(driver, scenario, 300);
    for (let round = 0; round < ROUNDS; round++) {
      for (const scenario of SCENARIOS) {
        const order = round % 2 === 0 ? drivers : [...drivers].reverse();
        for (const driver of order) {
          const key = `${scenario.name}|${driver.name}`;
          const sample = await measure(driver, scenario, RUN_MS);
          samples.set(key, [...(samples.get(key) ?? []), sample]);
        }
      }
    }
  } finally {
    for (const driver of drivers) await driver.close();
    server.stop();
  }
  const rows = [];
  for (const scenario of SCENARIOS) {
    const results = drivers.map((driver) => samples.get(`${scenario.name}|${driver.name}`)!);
    const cpu = results.map((list) => median(list.map((sample) => sample.cpuMicros)));
    for (const [index, driver] of drivers.entries()) {
      const list = results[index]!;
      const micros = list.map((sample) => sample.cpuMicros);
      rows.push({
        scenario: scenario.name,
        client: driver.name,
        'CPU µs/req (median)': cpu[index]!.toFixed(1),
        'range': `${Math.min(...micros).toFixed(1)}-${Math.max(...micros).toFixed(1)}`,
        'req/s (median)': Math.round(median(list.map((sample) => sample.rate))),
        'vs undici': `${((cpu[index]! / cpu[1]!) * 100).toFixed(0)}%`,
      });
    }
  }
  console.log(`local hop vs undici: node ${process.version}, ${ROUNDS} alternated rounds of ${RUN_MS} ms per cell; CPU of the client process only`);
  console.table(rows);
}

await main();
