/**
 * `npm run bench:cluster`: what the cluster's internal hop costs (issue 17). A real Redis, two edges in
 * cluster mode (A and B, `burrow edge --cluster`), one tunnel (`burrow http`) connected to A, and the
 * benchmark's target (bench/e2e/target.ts), each its own process. Three paths to the same target, all
 * measured in the same run, interleaved:
 *   direct   the target itself (the baseline)
 *   owner    through the tunnel, the request sent to A, the edge that holds it
 *   hop      through the tunnel, the request sent to B, which forwards it to A over the internal hop
 * Latency at one connection (the end-to-end probe: undici, keep-alive, GET and 1 KiB POST, blocks of
 * each path in turn); throughput with autocannon at 50 connections (1 KiB POST, rounds over the three
 * paths); and the CPU time per request of every process (from /proc), so the hop's cost is seen where
 * it is paid (B, and A's extra work). About three minutes; `--quick` is a smoke run of a few seconds.
 *
 *   node dist/bench/cluster.js [--quick] [--requests N] [--warmup N] [--block N] [--duration SEC]
 *                              [--rounds N] [--connections N] [--docs]
 *
 * `--docs` writes the tables into docs/cluster.md between its bench:cluster markers.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { burrowEnv, startBurrowEdge, startBurrowHttp } from './e2e/burrow.js';
import type { HopsPlan } from './e2e/hops.js';
import { runLoad, type Method, type Target } from './e2e/load.js';
import { probe, type ProbeResult } from './e2e/probe.js';
import { Children, freePort, type Child } from './e2e/processes.js';
import { clockTicks, readProc } from './e2e/sampler.js';
import { median } from './e2e/stats.js';
import { formatNumber, textTable } from './e2e/table.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'burrow.js');
const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));
const REDIS_SERVER = process.env.BURROW_REDIS_SERVER ?? '/usr/bin/redis-server';
const DOCS = join(ROOT, 'docs', 'cluster.md');
const DOCS_START = '<!-- bench:cluster:start -->';
const DOCS_END = '<!-- bench:cluster:end -->';

const PATHS = ['direct', 'owner', 'hop'] as const;
type PathName = (typeof PATHS)[number];
const PATH_LABELS: Record<PathName, string> = { direct: 'direct to the target', owner: 'tunnel, sent to A (owner)', hop: 'tunnel, sent to B (hop to A)' };
const PROCESSES = ['edge A', 'edge B', 'client', 'target', 'redis'] as const;
type ProcessName = (typeof PROCESSES)[number];

/** Probe sizes and autocannon runs, as bench:hops plans them. */
type Plan = HopsPlan;

const log = (line: string): void => void process.stderr.write(`bench:cluster: ${line}\n`);

function count(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 10_000_000) throw new Error(`--${name} must be a whole number from 1 to 10000000, not "${value}"`);
  return parsed;
}

/** Runs a burrow command to its end; its stdout, or an error with its stderr. */
async function burrow(children: Children, name: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const child = children.spawn({ name, command: process.execPath, args: [BIN, ...args], env });
  // It ends by itself: not a crash.
  child.stopRequested = true;
  const exit = await child.exited;
  if (exit.code !== 0) throw new Error(`burrow ${args.join(' ')} failed (${exit.code}): ${child.stderr}`);
  return child.stdout;
}

interface Setup {
  paths: Map<PathName, Target>;
  pids: Record<ProcessName, number>;
}

async function setUp(children: Children, temp: string): Promise<Setup> {
  const env = burrowEnv(join(temp, 'config'));
  const redisPort = await freePort();
  // The persistence docs/cluster.md asks for: append-only, an fsync per write.
  const redis = children.spawn({
    name: 'redis',
    command: REDIS_SERVER,
    args: ['--port', String(redisPort), '--bind', '127.0.0.1', '--dir', temp, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--protected-mode', 'no'],
  });
  await redis.waitFor(/Ready to accept connections/, 10_000);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;

  const { child: target, port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
  const edges: { child: Child; port: number }[] = [];
  for (const nodeId of ['a', 'b']) {
    // A port known before the edge starts: --advertise tells the other edge where to reach this one.
    const port = await freePort();
    edges.push(
      await startBurrowEdge(children, {
        bin: BIN,
        name: `edge ${nodeId}`,
        dataDir: join(temp, `edge-${nodeId}`),
        env,
        port,
        edgeArgs: ['--cluster', redisUrl, '--node-id', nodeId, '--advertise', `http://127.0.0.1:${port}`],
      }),
    );
  }
  const created = await burrow(children, 'create-account', ['admin', 'create-account', '--email', 'bench-cluster@example.test', '--cluster', redisUrl, '--json'], env);
  const token = (JSON.parse(created) as { token: { token: string } }).token.token;
  const subdomain = 'bench-cluster';
  const [a, b] = edges as [{ child: Child; port: number }, { child: Child; port: number }];
  const { child: client, url } = await startBurrowHttp(children, {
    bin: BIN,
    name: 'client',
    targetPort,
    edgePort: a.port,
    token,
    subdomain,
    env,
    // One session, on A: with --edges' default of 2 the tunnel would be on B too and nothing would take the hop.
    clientArgs: ['--no-inspect', '--edges', '1'],
    stdoutFile: join(temp, 'client.log'),
  });
  log(`tunnel ${url} on edge A (pid ${a.child.pid}); edge B pid ${b.child.pid}; redis ${redisUrl}`);
  return {
    paths: new Map<PathName, Target>([
      ['direct', { origin: `http://127.0.0.1:${targetPort}`, host: null }],
      ['owner', { origin: `http://127.0.0.1:${a.port}`, host: `${subdomain}.localhost:${a.port}` }],
      ['hop', { origin: `http://127.0.0.1:${b.port}`, host: `${subdomain}.localhost:${b.port}` }],
    ]),
    pids: { 'edge A': a.child.pid, 'edge B': b.child.pid, client: client.pid, target: target.pid, redis: redis.pid },
  };
}

interface LoadRow {
  runs: number[];
  bad: number;
  /** µs of CPU per completed request, per process, one value per run. */
  cpu: Record<ProcessName, number[]>;
}

async function measure(setup: Setup, plan: Plan): Promise<{ probes: Record<string, Map<string, ProbeResult>>; load: Record<PathName, LoadRow> }> {
  const probes: Record<string, Map<string, ProbeResult>> = {};
  for (const method of ['GET', 'POST'] as Method[]) {
    log(`probe ${method}: ${plan.requests} requests per path after ${plan.warmup} warm-up, blocks of ${plan.block}`);
    probes[method] = await probe(setup.paths, method, plan, () => false);
  }
  const usPerTick = 1e6 / clockTicks();
  const ticks = (): Record<ProcessName, number | null> =>
    Object.fromEntries(PROCESSES.map((name) => [name, readProc(setup.pids[name])?.ticks ?? null])) as Record<ProcessName, number | null>;
  const load = Object.fromEntries(
    PATHS.map((path) => [path, { runs: [], bad: 0, cpu: Object.fromEntries(PROCESSES.map((name) => [name, []])) as unknown as Record<ProcessName, number[]> }]),
  ) as unknown as Record<PathName, LoadRow>;
  // Warm the tunnel paths at the load's concurrency (connections, JIT) before anything is recorded.
  for (const path of ['owner', 'hop'] as const) await runLoad(setup.paths.get(path)!, 'POST', plan.connections, 1);
  for (let round = 0; round < plan.rounds; round++) {
    for (const path of PATHS) {
      log(`autocannon round ${round + 1}/${plan.rounds}: ${path}, ${plan.connections} connections, ${plan.durationS} s`);
      const before = ticks();
      const result = await runLoad(setup.paths.get(path)!, 'POST', plan.connections, plan.durationS);
      const after = ticks();
      const row = load[path];
      row.runs.push(result.reqPerSec);
      row.bad += result.errors + result.timeouts + result.non2xx + result.mismatches;
      for (const name of PROCESSES) {
        const start = before[name];
        const end = after[name];
        if (result.requests > 0 && start !== null && end !== null) row.cpu[name].push(((end - start) * usPerTick) / result.requests);
      }
    }
  }
  return { probes, load };
}

/** A difference with its sign: +1,234 or -56. */
function signed(value: number): string {
  return value >= 0 ? `+${formatNumber(value)}` : formatNumber(value);
}

function tables(plan: Plan, probes: Record<string, Map<string, ProbeResult>>, load: Record<PathName, LoadRow>): { latency: string; throughput: string } {
  const latencyRows: (string | number)[][] = [];
  for (const [method, byPath] of Object.entries(probes)) {
    const direct = byPath.get('direct');
    const owner = byPath.get('owner');
    for (const path of PATHS) {
      const r = byPath.get(path);
      if (r === undefined) continue;
      latencyRows.push([
        method === 'POST' ? 'POST 1 KiB' : method,
        PATH_LABELS[path],
        r.samples,
        formatNumber(r.p50),
        formatNumber(r.p99),
        path === 'direct' || direct === undefined ? '' : signed(r.p50 - direct.p50),
        path === 'direct' || direct === undefined ? '' : signed(r.p99 - direct.p99),
        path !== 'hop' || owner === undefined ? '' : signed(r.p50 - owner.p50),
        path !== 'hop' || owner === undefined ? '' : signed(r.p99 - owner.p99),
        r.errors,
      ]);
    }
  }
  const latency = textTable(['Method', 'Path', 'Samples', 'p50 µs', 'p99 µs', '+p50 vs direct', '+p99 vs direct', '+p50 vs owner', '+p99 vs owner', 'Errors'], latencyRows);
  const medianOf = (values: number[]): number => (values.length > 0 ? median(values) : Number.NaN);
  const direct = medianOf(load.direct.runs);
  const owner = medianOf(load.owner.runs);
  const throughput = textTable(
    ['Path', 'Runs', 'Median req/s', 'vs direct', 'vs owner', ...PROCESSES.map((name) => `${name} µs/req`), 'Bad'],
    PATHS.map((path) => {
      const row = load[path];
      const value = medianOf(row.runs);
      return [
        PATH_LABELS[path],
        row.runs.length,
        formatNumber(value),
        path === 'direct' ? '' : formatNumber(value / direct, 3),
        path === 'hop' ? formatNumber(value / owner, 3) : '',
        ...PROCESSES.map((name) => (path === 'direct' && name !== 'target' ? '–' : formatNumber(medianOf(row.cpu[name]), 0))),
        row.bad,
      ];
    }),
  );
  return {
    latency,
    throughput: `autocannon, 1 KiB POST, ${plan.connections} connections, ${plan.durationS} s per run, ${plan.rounds} round(s) of the three paths; CPU from /proc, median over the runs:\n\n${throughput}`,
  };
}

function writeDocs(text: string): void {
  const docs = readFileSync(DOCS, 'utf8');
  const start = docs.indexOf(DOCS_START);
  const end = docs.indexOf(DOCS_END);
  if (start < 0 || end < start) throw new Error(`docs/cluster.md has no ${DOCS_START} … ${DOCS_END} section`);
  writeFileSync(DOCS, `${docs.slice(0, start + DOCS_START.length)}\n${text}\n${docs.slice(end)}`);
  log('tables written into docs/cluster.md');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      requests: { type: 'string' },
      warmup: { type: 'string' },
      block: { type: 'string' },
      duration: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      docs: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) {
    process.stdout.write(
      'usage: node dist/bench/cluster.js [--quick] [--requests N (default 5000)] [--warmup N (default 1000)] [--block N (default 100)]\n' +
        '                                  [--duration SEC per autocannon run (default 10)] [--rounds N (default 3)] [--connections N (default 50)]\n' +
        '                                  [--docs: write the tables into docs/cluster.md]\n',
    );
    return;
  }
  const quick = values.quick === true;
  const plan: Plan = {
    requests: count(values.requests, 'requests', quick ? 300 : 5_000),
    warmup: count(values.warmup, 'warmup', quick ? 100 : 1_000),
    block: count(values.block, 'block', quick ? 50 : 100),
    durationS: count(values.duration, 'duration', quick ? 1 : 10),
    rounds: count(values.rounds, 'rounds', quick ? 1 : 3),
    connections: count(values.connections, 'connections', 50),
  };
  const children = new Children();
  const temp = mkdtempSync(join(tmpdir(), 'burrow-bench-cluster-'));
  const stop = (): void => {
    void children.stopAll(1_000).finally(() => {
      rmSync(temp, { recursive: true, force: true });
      process.exit(130);
    });
  };
  process.once('SIGINT', stop);
  try {
    const started = Date.now();
    const setup = await setUp(children, temp);
    const { probes, load } = await measure(setup, plan);
    const { latency, throughput } = tables(plan, probes, load);
    const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}, ${new Date().toISOString().slice(0, 16)}Z${quick ? ', --quick' : ''}`;
    const text = `${machine}\n\nLatency at one connection (keep-alive, one request at a time), µs:\n\n${latency}\n\n${throughput}`;
    process.stdout.write(`\n${text}\n\n(${Math.round((Date.now() - started) / 1000)} s)\n`);
    const crashed = children.crashed();
    if (crashed.length > 0) throw new Error(`${crashed.map((child) => child.name).join(', ')} exited during the run:\n${crashed.map((child) => child.describeOutput()).join('\n')}`);
    if (values.docs === true) writeDocs(`\`\`\`text\n${text}\n\`\`\``);
  } finally {
    await children.stopAll();
    rmSync(temp, { recursive: true, force: true });
  }
}

main().catch((error: Error) => {
  process.stderr.write(`bench:cluster: ${error.message}\n`);
  process.exit(1);
});
