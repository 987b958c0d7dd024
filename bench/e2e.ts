/**
 * The end-to-end benchmark (`npm run bench`): a local target, edges and tunnel clients as child processes,
 * autocannon from this process directly against the target and through the tunnel, interleaved, plus a
 * sub-millisecond latency probe and RSS/CPU sampling of every process. Prints the tables and the
 * tunnel/direct ratios and writes everything to bench/out/e2e-<timestamp>.json, from which
 * `npm run bench:results` writes bench/RESULTS.md.
 *
 * Dimensions: GET and 1 KiB JSON POST; 1, 10, 100 connections; capture on/off (two edges, one with
 * --no-capture); inspector on/off (a client per setting, when `burrow http` has --no-inspect). Every
 * tunnel run is preceded by a direct run of the same scenario and compared with it.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runLoad, stopCurrentLoad, type Method, type Target } from './e2e/load.js';
import { machineInfo, sourceInfo } from './e2e/machine.js';
import { POST_SIZE } from './e2e/payloads.js';
import { hopsTables, measureHops, type HopsResult } from './e2e/hops.js';
import { probe } from './e2e/probe.js';
import { Children, type ExitInfo } from './e2e/processes.js';
import type { ClientLogCounts, ProbeRecord, RunRecord, TunnelInfo, WarmupRecord } from './e2e/records.js';
import { Sampler, type ProcStats, type WindowStats } from './e2e/sampler.js';
import { summarize, type Summary } from './e2e/summary.js';
import { round } from './e2e/stats.js';
import { formatNumber, textTable } from './e2e/table.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));

const HELP = `
Usage: npm run bench -- [options]        (or: node dist/bench/e2e.js [options])

Starts a local target, two edges (capture on / --no-capture) and tunnel clients (inspector on / off when
"burrow http" supports --no-inspect), then runs autocannon directly and through the tunnel, interleaved:
GET and 1 KiB JSON POST at 1, 10 and 100 connections, plus a 1-connection latency probe. Writes
bench/out/e2e-<timestamp>.json; "npm run bench:results" turns it into bench/RESULTS.md.

Options:
  --duration SEC        seconds per autocannon run (default 5; --quick: 1)
  --warmup SEC          seconds of warm-up per path and method before measuring (default 2; --quick: 0.5)
  --repeat N            rounds of the headline scenario (1 KiB POST @100 connections); medians reported
                        (default 5, so a comparison of two configurations rests on five runs each;
                        --quick: 1)
  --repeat-all          repeat every scenario, not only the headline
  --connections LIST    comma-separated connection counts (default 1,10,100; --quick: 1,100)
  --methods LIST        GET,POST (default both)
  --probe N             latency-probe requests per path and method in each round (default 5000; --quick: 1000)
  --pause MS            pause between runs (default 300)
  --max-other-cpu PCT   a direct/tunnel pair (or a probe) during which processes outside the benchmark, or
                        the hypervisor's other guests (steal), took more than PCT % of a core is discarded
                        and run again, after waiting for the machine to be quiet (default 25; 0 turns this
                        off). Interrupt work (the benchmark's own loopback traffic) does not count.
  --retries N           how often one pair or probe is run again for that reason (default 2)
  --no-hops             skip the last phase: the target through one and two bare Node relays and a minimal
                        uWS + undici proxy (the floor of any two-process path here; see bench/e2e/hops.ts)
  --quick               a smoke run: shorter, fewer scenarios
  --burrow DIR          the Burrow checkout whose bin/burrow.js runs (default: this one); it must be built
  --out DIR             where the results JSON goes (default bench/out)
  --keep                keep the temp dir (edge data, client logs) for inspection
  --resummarize FILE    recompute the summary of an existing results file in place (no benchmark run)
  -h, --help            show this help
`;

interface Options {
  durationS: number;
  warmupS: number;
  repeat: number;
  repeatAll: boolean;
  connections: number[];
  methods: Method[];
  probeRequests: number;
  pauseMs: number;
  maxOtherCpuPct: number;
  retries: number;
  quick: boolean;
  hops: boolean;
  burrowDir: string;
  outDir: string;
  keep: boolean;
}

function parseOptions(argv: string[]): Options | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      repeat: { type: 'string' },
      'repeat-all': { type: 'boolean' },
      connections: { type: 'string' },
      methods: { type: 'string' },
      probe: { type: 'string' },
      pause: { type: 'string' },
      'max-other-cpu': { type: 'string' },
      retries: { type: 'string' },
      quick: { type: 'boolean' },
      'no-hops': { type: 'boolean' },
      burrow: { type: 'string' },
      out: { type: 'string' },
      keep: { type: 'boolean' },
      resummarize: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help === true) {
    process.stdout.write(HELP.trimStart());
    return null;
  }
  if (values.resummarize !== undefined) {
    resummarize(resolve(values.resummarize));
    return null;
  }
  const quick = values.quick === true;
  const number = (text: string | undefined, name: string, fallback: number, min: number, max: number): number => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isFinite(value) || value < min || value > max) throw new Error(`--${name} must be a number from ${min} to ${max}`);
    return value;
  };
  const connections = (values.connections ?? (quick ? '1,100' : '1,10,100')).split(',').map((part) => number(part.trim(), 'connections', 0, 1, 10_000));
  const methods = (values.methods ?? 'GET,POST').split(',').map((part) => part.trim().toUpperCase());
  for (const method of methods) if (method !== 'GET' && method !== 'POST') throw new Error(`--methods: ${method} is not GET or POST`);
  return {
    durationS: number(values.duration, 'duration', quick ? 1 : 5, 0.2, 600),
    warmupS: number(values.warmup, 'warmup', quick ? 0.5 : 2, 0, 60),
    repeat: Math.round(number(values.repeat, 'repeat', quick ? 1 : 5, 1, 50)),
    repeatAll: values['repeat-all'] === true,
    connections: [...new Set(connections.map(Math.round))].sort((a, b) => a - b),
    methods: [...new Set(methods)] as Method[],
    probeRequests: Math.round(number(values.probe, 'probe', quick ? 1000 : 5000, 0, 1_000_000)),
    pauseMs: number(values.pause, 'pause', 300, 0, 60_000),
    maxOtherCpuPct: number(values['max-other-cpu'], 'max-other-cpu', 25, 0, 10_000),
    retries: Math.round(number(values.retries, 'retries', 2, 0, 20)),
    quick,
    hops: values['no-hops'] !== true,
    burrowDir: resolve(values.burrow ?? ROOT),
    outDir: resolve(values.out ?? join(ROOT, 'bench', 'out')),
    keep: values.keep === true,
  };
}

/** Recomputes the summary of a results file written earlier (after the summary's rules changed). */
function resummarize(file: string): void {
  const results = JSON.parse(readFileSync(file, 'utf8')) as { kind?: string; runs: RunRecord[]; probes: ProbeRecord[]; tunnels: TunnelInfo[]; summary: Summary };
  if (results.kind !== 'burrow-e2e-bench') throw new Error(`${file} is not an end-to-end benchmark results file`);
  results.summary = summarize(results.runs, results.probes, results.tunnels);
  writeFileSync(file, `${JSON.stringify(results, null, 1)}\n`);
  process.stdout.write(`resummarized ${file}\n`);
}

// ---------------------------------------------------------------------------------------------------------
// The set-up: target, edges, accounts, clients.

interface TunnelConfig extends TunnelInfo {
  edge: string;
  client: string;
  target: Target;
}

interface Setup {
  targetPort: number;
  targetPid: number;
  direct: Target;
  tunnels: TunnelConfig[];
  inspectFlag: boolean;
  clientLogs: Map<string, { file: string; offset: number }>;
}

const children = new Children();
const sampler = new Sampler(200, 1_000);
let aborting: string | null = null;

function checkAbort(): void {
  if (aborting !== null) throw new Error(`aborted: ${aborting}`);
  const crashed = children.crashed();
  if (crashed.length > 0) {
    throw new Error(crashed.map((child) => `${child.name} exited unexpectedly (code ${child.exit?.code}, signal ${child.exit?.signal})\n${child.describeOutput()}`).join('\n'));
  }
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

function burrowHelp(bin: string, command: string): string {
  const result = spawnSync(process.execPath, [bin, command, '--help'], { encoding: 'utf8', timeout: 20_000 });
  return `${result.stdout ?? ''}${result.stderr ?? ''}`;
}

async function setUp(options: Options, temp: string): Promise<Setup> {
  const bin = join(options.burrowDir, 'bin', 'burrow.js');
  const inspectFlag = /--no-inspect\b/.test(burrowHelp(bin, 'http'));
  log(`burrow: ${bin}; "burrow http --no-inspect" ${inspectFlag ? 'exists: inspector on/off is measured' : 'does not exist yet: inspector dimension skipped'}`);

  const { child: target, port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
  sampler.track('target', target.pid);
  const direct: Target = { origin: `http://127.0.0.1:${targetPort}`, host: null };

  const tunnels: TunnelConfig[] = [];
  const clientLogs = new Map<string, { file: string; offset: number }>();
  for (const capture of [true, false]) {
    const edgeName = capture ? 'edge-capture' : 'edge-nocapture';
    const dataDir = join(temp, edgeName);
    mkdirSync(dataDir);
    const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: join(temp, `${edgeName}-config`) };
    delete env.BURROW_TOKEN;
    delete env.BURROW_EDGE;
    const created = spawnSync(process.execPath, [bin, 'admin', 'create-account', '--email', `bench-${capture ? 'c' : 'n'}@example.test`, '--data', dataDir, '--json'], {
      encoding: 'utf8',
      env,
      timeout: 30_000,
    });
    if (created.status !== 0) throw new Error(`admin create-account failed (${created.status}): ${created.stderr}`);
    const token = (JSON.parse(created.stdout) as { token: { token: string } }).token.token;

    const edge = children.spawn({
      name: edgeName,
      command: process.execPath,
      args: [bin, 'edge', '--host', '127.0.0.1', '--port', '0', '--data', dataDir, '--rate-limit', '1000000', ...(capture ? [] : ['--no-capture'])],
      env,
    });
    const edgePort = Number((await edge.waitFor(/listening on http:\/\/localhost:(\d+)/, 20_000))[1]);
    sampler.track(edgeName, edge.pid);

    for (const inspect of inspectFlag ? [true, false] : [null]) {
      const id = `${capture ? 'cap' : 'nocap'}${inspect === null ? '' : inspect ? '-insp' : '-noinsp'}`;
      const clientName = `client-${id}`;
      const subdomain = `bench-${id}`;
      // Port 0: each inspector on a free loopback port, so two clients never fight over 4040.
      const inspectArgs = inspect === null ? [] : inspect ? ['--inspect', '127.0.0.1:0'] : ['--no-inspect'];
      const logFile = join(temp, `${clientName}.log`);
      const client = children.spawn({
        name: clientName,
        command: process.execPath,
        args: [bin, 'http', String(targetPort), '--edge', `http://localhost:${edgePort}`, '--token', token, '--subdomain', subdomain, ...inspectArgs],
        env: { ...env, XDG_CONFIG_HOME: join(temp, `${clientName}-config`) },
        stdoutFile: logFile,
      });
      const forwarding = await client.waitFor(/Forwarding (http:\/\/\S+)/, 20_000);
      sampler.track(clientName, client.pid);
      clientLogs.set(clientName, { file: logFile, offset: statSync(logFile).size });
      const label = `tunnel capture ${capture ? 'on' : 'off'}${inspect === null ? '' : `, inspector ${inspect ? 'on' : 'off'}`}`;
      tunnels.push({ id, capture, inspect, label, edge: edgeName, client: clientName, target: { origin: `http://127.0.0.1:${edgePort}`, host: `${subdomain}.localhost:${edgePort}` } });
      log(`${label}: ${forwarding[1]} (edge pid ${edge.pid}, client pid ${client.pid})`);
    }
  }
  sampler.start();
  return { targetPort, targetPid: target.pid, direct, tunnels, inspectFlag, clientLogs };
}

const EXCHANGE_LINE = /^[A-Z]+ \S+ (\d{3}|ERR) [\d.]+ms/;

/** Reads what a client logged since the last call: one line per exchange, "METHOD PATH STATUS TIMEms [REASON]". */
function readClientLog(entry: { file: string; offset: number }): ClientLogCounts {
  const counts: ClientLogCounts = { lines: 0, cancelled: 0, failed: 0, sample: [] };
  const size = statSync(entry.file).size;
  const length = size - entry.offset;
  if (length <= 0) return counts;
  const buffer = Buffer.alloc(length);
  const fd = openSync(entry.file, 'r');
  try {
    readSync(fd, buffer, 0, length, entry.offset);
  } finally {
    closeSync(fd);
  }
  const end = buffer.lastIndexOf(10) + 1; // a partial last line is read next time
  entry.offset += end;
  for (const line of buffer.subarray(0, end).toString('utf8').split('\n')) {
    const status = EXCHANGE_LINE.exec(line)?.[1];
    if (status === undefined) continue; // "Forwarding ...", "Inspector ...", reconnect notices
    counts.lines++;
    if (status.startsWith('2')) continue;
    if (status === 'ERR' && line.endsWith('cancelled by the edge')) counts.cancelled++;
    else {
      counts.failed++;
      if (counts.sample.length < 5) counts.sample.push(line);
    }
  }
  return counts;
}

// ---------------------------------------------------------------------------------------------------------
// Runs.

const runs: RunRecord[] = [];
/** Runs thrown away because other processes loaded the machine meanwhile; kept for the record. */
const discarded: RunRecord[] = [];
let runCounter = 0;
/** Client-log counts of the traffic outside measured runs (warm-up, probe), per phase and client. */
const otherClientLog: Array<{ phase: string; client: string } & ClientLogCounts> = [];

function drainClientLogs(setup: Setup, phase: string): void {
  for (const [client, entry] of setup.clientLogs) {
    const counts = readClientLog(entry);
    otherClientLog.push({ phase, client, ...counts });
    if (counts.failed > 0) log(`  !! ${client} logged ${counts.failed} failed exchanges during ${phase}, e.g. ${counts.sample[0]}`);
  }
}
const warmups: WarmupRecord[] = [];
const probes: ProbeRecord[] = [];
const discardedProbes: ProbeRecord[] = [];
let origin = Date.now();

function scenarioName(method: Method, connections: number): string {
  return `${method === 'POST' ? `POST ${POST_SIZE / 1024} KiB` : 'GET'} @${connections}`;
}

async function measure(
  setup: Setup,
  options: Options,
  round: number,
  method: Method,
  connections: number,
  config: TunnelConfig | null,
  pairedWith: number | null,
): Promise<RunRecord> {
  checkAbort();
  const target = config === null ? setup.direct : config.target;
  const window = sampler.window();
  const cpu = process.cpuUsage();
  const wall = process.hrtime.bigint();
  const startedAtS = (Date.now() - origin) / 1000;
  const load = await runLoad(target, method, connections, options.durationS);
  const seconds = Number(process.hrtime.bigint() - wall) / 1e9;
  const used = process.cpuUsage(cpu);
  const stats = window.end();
  const all = stats.procs;
  const procs: Record<string, ProcStats> = { target: all.target! };
  if (config !== null) {
    procs.edge = all[config.edge]!;
    procs.client = all[config.client]!;
  }
  const runnerCpuPct = percentOfCore(used, seconds);
  const record: RunRecord = {
    seq: ++runCounter,
    round,
    scenario: scenarioName(method, connections),
    method,
    connections,
    path: config === null ? 'direct' : config.id,
    capture: config?.capture ?? null,
    inspect: config?.inspect ?? null,
    pairedWith,
    startedAtS: round1(startedAtS),
    load,
    procs,
    runnerCpuPct,
    ...disturbance(stats, runnerCpuPct),
    clientLog: null,
    discarded: null,
  };
  if (options.pauseMs > 0) await sleep(options.pauseMs);
  if (config !== null) record.clientLog = readClientLog(setup.clientLogs.get(config.client)!);
  printRun(record, config);
  checkAbort();
  return record;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function printRun(record: RunRecord, config: TunnelConfig | null): void {
  const l = record.load;
  const bad = l.errors + l.timeouts + l.non2xx + l.mismatches;
  const edge = record.procs.edge;
  log(
    `  #${String(record.seq).padStart(3)} ${record.scenario.padEnd(16)} ${(config?.label ?? 'direct').padEnd(42)} ` +
      `${formatNumber(l.reqPerSec).padStart(7)} req/s  p50 ${l.latencyMs.p50} ms  p99 ${l.latencyMs.p99} ms` +
      (edge === undefined ? '' : `  edge ${formatNumber(edge.peakRssMiB)} MiB ${formatNumber(edge.cpuPct)}%`) +
      (record.otherCpuPct !== null && record.otherCpuPct > 20 ? `  !! other processes used ${formatNumber(record.otherCpuPct)}% CPU` : '') +
      (record.stealCpuPct !== null && record.stealCpuPct > 20 ? `  !! the hypervisor took ${formatNumber(record.stealCpuPct)}% CPU (steal)` : '') +
      (bad > 0 ? `  !! errors ${l.errors} timeouts ${l.timeouts} non2xx ${l.non2xx} mismatches ${l.mismatches}` : '') +
      (record.clientLog !== null && record.clientLog.failed > 0 ? `  !! client logged ${record.clientLog.failed} failed exchanges, e.g. ${record.clientLog.sample[0]}` : ''),
  );
}

/** What else used the machine during a window, percent of one core (nulls off Linux). */
interface Disturbance {
  /** The whole machine's process CPU (interrupt work and steal excluded). */
  systemCpuPct: number | null;
  /** Processes outside the benchmark: the machine's process CPU minus every process of ours and the runner. */
  otherCpuPct: number | null;
  /** What the hypervisor gave to other guests (steal): this machine's cores were not all ours. */
  stealCpuPct: number | null;
  /** irq + softirq: mostly the benchmark's own loopback traffic, which the kernel charges to no process. */
  interruptCpuPct: number | null;
}

/** The runner's own CPU (`process.cpuUsage` over `seconds`), percent of one core. */
function percentOfCore(used: NodeJS.CpuUsage, seconds: number): number {
  return ((used.user + used.system) / 1e6 / seconds) * 100;
}

/** The disturbance over a sampler window, given the runner's own CPU over it (percent of one core). */
function disturbance(stats: WindowStats, runnerCpuPct: number): Disturbance {
  // Every process we started (idle ones too) and the runner, taken away from what all processes used.
  const ours = Object.values(stats.procs).reduce((total, proc) => total + (proc.cpuPct ?? 0), runnerCpuPct);
  return {
    systemCpuPct: stats.systemCpuPct,
    otherCpuPct: stats.systemCpuPct === null ? null : Math.max(0, stats.systemCpuPct - ours),
    stealCpuPct: stats.stealCpuPct,
    interruptCpuPct: stats.interruptCpuPct,
  };
}

/** What disturbs the machine right now, measured over `ms` while the benchmark's own processes are idle. */
async function currentDisturbance(ms: number): Promise<Disturbance> {
  const window = sampler.window();
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await sleep(ms);
  const used = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return disturbance(window.end(), percentOfCore(used, seconds));
}

/** Why windows were spoiled by foreign load (other processes or steal over the threshold), or null. */
function spoiled(options: Options, ...windows: Disturbance[]): string | null {
  if (options.maxOtherCpuPct <= 0) return null;
  const other = Math.max(...windows.map((window) => window.otherCpuPct ?? 0));
  const steal = Math.max(...windows.map((window) => window.stealCpuPct ?? 0));
  if (other > options.maxOtherCpuPct) return `other processes used ${formatNumber(other)}% CPU (over ${options.maxOtherCpuPct}%)`;
  if (steal > options.maxOtherCpuPct) return `the hypervisor took ${formatNumber(steal)}% CPU for other guests (steal, over ${options.maxOtherCpuPct}%)`;
  return null;
}

/** Waits (at most `maxMs`) until neither other processes nor steal take more than the threshold. */
async function waitQuiet(options: Options, maxMs = 10_000, windowMs = 500): Promise<void> {
  if (options.maxOtherCpuPct <= 0) return;
  const deadline = Date.now() + maxMs;
  let reason: string | null = null;
  while (Date.now() < deadline) {
    checkAbort();
    reason = spoiled(options, await currentDisturbance(windowMs));
    if (reason === null) return;
  }
  log(`  (the machine did not get quiet within ${maxMs / 1000} s: ${reason}; going on)`);
}

/** A direct run and then a tunnel run of the same scenario; run again when foreign load spoiled either. */
async function measurePair(setup: Setup, options: Options, round: number, method: Method, connections: number, config: TunnelConfig): Promise<void> {
  await waitQuiet(options, 10_000, 250);
  for (let attempt = 0; ; attempt++) {
    const direct = await measure(setup, options, round, method, connections, null, null);
    const tunnel = await measure(setup, options, round, method, connections, config, direct.seq);
    const reason = spoiled(options, direct, tunnel);
    if (reason === null || attempt >= options.retries) {
      runs.push(direct, tunnel);
      if (reason !== null) log(`  (kept #${direct.seq}/#${tunnel.seq} although ${reason}: out of retries)`);
      return;
    }
    direct.discarded = reason;
    tunnel.discarded = reason;
    discarded.push(direct, tunnel);
    log(`  discarded #${direct.seq}/#${tunnel.seq}: ${reason}; waiting for a quiet machine and running the pair again`);
    await waitQuiet(options);
  }
}

async function warmUp(setup: Setup, options: Options): Promise<void> {
  if (options.warmupS <= 0) return;
  log(`warm-up: ${options.warmupS} s per path and method`);
  const paths: Array<[string, Target]> = [['direct', setup.direct], ...setup.tunnels.map((t): [string, Target] => [t.id, t.target])];
  for (const [path, target] of paths) {
    for (const method of options.methods) {
      checkAbort();
      const connections = Math.max(...options.connections);
      const load = await runLoad(target, method, connections, options.warmupS);
      warmups.push({ path, method, connections, load });
      const bad = load.errors + load.timeouts + load.non2xx + load.mismatches;
      if (bad > 0) log(`  warm-up ${path} ${method}: errors ${load.errors} timeouts ${load.timeouts} non2xx ${load.non2xx} mismatches ${load.mismatches}`);
    }
  }
  await sleep(Math.max(options.pauseMs, 100));
  drainClientLogs(setup, 'warm-up');
  checkAbort();
}

async function runProbe(setup: Setup, options: Options, round: number): Promise<void> {
  if (options.probeRequests <= 0) return;
  const paths = new Map<string, Target>([['direct', setup.direct], ...setup.tunnels.map((t): [string, Target] => [t.id, t.target])]);
  for (const method of options.methods) {
    for (let attempt = 0; ; attempt++) {
      checkAbort();
      await waitQuiet(options);
      const window = sampler.window();
      const cpu = process.cpuUsage();
      const started = process.hrtime.bigint();
      const results = await probe(paths, method, { requests: options.probeRequests, warmup: Math.min(500, options.probeRequests), block: 100 }, () => aborting !== null);
      const used = process.cpuUsage(cpu);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const during = disturbance(window.end(), percentOfCore(used, seconds));
      const reason = spoiled(options, during);
      const direct = results.get('direct');
      log(
        `  probe ${method} @1 (${options.probeRequests} sequential requests per path): ` +
          [...results]
            .map(([path, r]) => `${path} p50 ${formatNumber(r.p50)} µs p99 ${formatNumber(r.p99)} µs${path !== 'direct' && direct !== undefined ? ` (+${formatNumber(r.p50 - direct.p50)})` : ''}${r.errors > 0 ? ` !! ${r.errors} errors` : ''}`)
            .join('; ') +
          (reason === null ? '' : `  !! ${reason}`),
      );
      const keep = reason === null || attempt >= options.retries;
      for (const [path, result] of results) {
        (keep ? probes : discardedProbes).push({ round, method, path, result, otherCpuPct: during.otherCpuPct, stealCpuPct: during.stealCpuPct, discarded: keep ? null : reason });
      }
      if (keep) break;
      log('  discarded that probe; waiting for a quiet machine and probing again');
    }
  }
  drainClientLogs(setup, `probe round ${round}`);
}

async function runAll(setup: Setup, options: Options): Promise<void> {
  const headlineConnections = options.connections.includes(100) ? 100 : Math.max(...options.connections);
  const headlineMethod: Method = options.methods.includes('POST') ? 'POST' : options.methods[0]!;
  for (let round = 1; round <= options.repeat; round++) {
    log(`round ${round}/${options.repeat}`);
    await runProbe(setup, options, round);
    for (const method of options.methods) {
      for (const connections of options.connections) {
        const headline = method === headlineMethod && connections === headlineConnections;
        if (round > 1 && !headline && !options.repeatAll) continue;
        // Rotate the order of the tunnel configs across rounds so no config always runs first.
        const order = setup.tunnels.map((_, i) => setup.tunnels[(i + round - 1) % setup.tunnels.length]!);
        for (const config of order) await measurePair(setup, options, round, method, connections, config);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Output.

function printSummary(summary: Summary): void {
  log('\nEvery run (latencies from autocannon are whole milliseconds; CPU is % of one core):');
  log(
    textTable(
      ['#', 'rnd', 'scenario', 'path', 'req/s', 'p50 ms', 'p99 ms', 'mean ms', 'err', 't/o', 'non2xx', 'mism', 'edge MiB', 'edge CPU', 'client MiB', 'client CPU', 'target CPU', 'ac CPU', 'other CPU'],
      runs.map((r) => [
        r.seq,
        r.round,
        r.scenario,
        r.path,
        formatNumber(r.load.reqPerSec),
        r.load.latencyMs.p50,
        r.load.latencyMs.p99,
        formatNumber(r.load.latencyMs.mean, 2),
        r.load.errors,
        r.load.timeouts,
        r.load.non2xx,
        r.load.mismatches,
        formatNumber(r.procs.edge?.peakRssMiB),
        formatNumber(r.procs.edge?.cpuPct),
        formatNumber(r.procs.client?.peakRssMiB),
        formatNumber(r.procs.client?.cpuPct),
        formatNumber(r.procs.target?.cpuPct),
        formatNumber(r.runnerCpuPct),
        formatNumber(r.otherCpuPct),
      ]),
    ),
  );
  log('\nTunnel / direct, medians over repeats (direct: every direct run of the scenario; "paired": tunnel ÷ the direct run just before it):');
  log(
    textTable(
      ['scenario', 'tunnel config', 'n', 'direct req/s', 'tunnel req/s', 'ratio', 'paired', '+p50 ms', '+mean ms', '+p99 ms', 'edge MiB', 'edge CPU', 'client CPU', 'µs/req edge', 'client', 'target', 'direct target', 'other CPU', 'bad'],
      summary.groups.map((g) => [
        g.scenario,
        g.path,
        g.runs,
        formatNumber(g.direct.reqPerSec),
        formatNumber(g.tunnel.reqPerSec),
        formatNumber(g.ratio, 3),
        formatNumber(g.pairedRatio, 3),
        formatNumber(g.addedP50Ms, 1),
        formatNumber(g.addedMeanMs, 2),
        formatNumber(g.addedP99Ms, 1),
        formatNumber(g.edgePeakRssMiB),
        formatNumber(g.edgeCpuPct),
        formatNumber(g.clientCpuPct),
        formatNumber(g.cpuUsPerRequest.edge),
        formatNumber(g.cpuUsPerRequest.client),
        formatNumber(g.cpuUsPerRequest.target),
        formatNumber(g.cpuUsPerRequest.directTarget),
        formatNumber(g.otherCpuPctMax),
        g.errors + g.timeouts + g.non2xx + g.mismatches,
      ]),
    ),
  );
  if (summary.probes.length > 0) {
    log('\nLatency probe, 1 connection, sequential (µs, medians over rounds):');
    log(
      textTable(
        ['method', 'path', 'samples', 'p50', 'p99', 'p99.9', 'mean', '+p50 vs direct', 'errors'],
        summary.probes.map((p) => [p.method, p.path, p.samples, formatNumber(p.p50Us), formatNumber(p.p99Us), formatNumber(p.p999Us), formatNumber(p.meanUs), p.addedP50Us === null ? '' : formatNumber(p.addedP50Us), p.errors]),
      ),
    );
  }
  const peaks = sampler.peaks();
  log('\nProcesses over the whole run (peak RSS sampled every 200 ms; HWM is the kernel\'s VmHWM):');
  log(textTable(['process', 'peak RSS MiB', 'VmHWM MiB'], Object.entries(peaks).map(([name, p]) => [name, formatNumber(p.peakRssMiB, 1), formatNumber(p.hwmMiB, 1)])));
}

/**
 * The last phase: the same target through one and two bare Node relays and a minimal one-hop proxy of
 * Burrow's stack, probed and loaded like the tunnel, so the results show in the same run what two
 * processes on the path cost before any work of their own, and what parsing HTTP once on each side costs.
 */
async function runHops(setup: Setup, options: Options): Promise<HopsResult> {
  const requests = Math.max(100, options.probeRequests);
  const plan = { requests, warmup: Math.min(500, requests), block: 100, durationS: options.durationS, rounds: Math.min(3, options.repeat), connections: 100 };
  log(`\nfloor: the target directly, through one and two bare Node relays and a minimal uWS + undici proxy (${plan.requests} probe requests per path and method, then ${plan.rounds} round(s) of ${plan.durationS} s 1 KiB POST @${plan.connections})`);
  await waitQuiet(options);
  const result = await measureHops(children, { port: setup.targetPort, pid: setup.targetPid }, plan, () => aborting !== null);
  log(hopsTables(result));
  return result;
}

// ---------------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  let options: Options | null;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`bench: ${(error as Error).message}\n`);
    return 2;
  }
  if (options === null) return 0;

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      children.killAll();
      process.exit(130);
    }
    aborting = signal;
    process.stderr.write(`bench: ${signal}, stopping the run and its processes (again to kill at once)\n`);
    stopCurrentLoad();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const startedAt = new Date();
  origin = startedAt.getTime();
  const machine = machineInfo();
  const source = sourceInfo(options.burrowDir);
  const bench = options.burrowDir === ROOT ? source : sourceInfo(ROOT);
  log(`Burrow end-to-end benchmark, ${startedAt.toISOString()}: ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}`);
  log(`source: ${source.dir} at ${source.commit?.slice(0, 12) ?? 'unknown commit'}${source.dirtyFiles.length > 0 ? ` with ${source.dirtyFiles.length} uncommitted file(s)` : ''}`);
  log(`plan: ${options.durationS} s per run, warm-up ${options.warmupS} s, ${options.repeat} round(s), connections ${options.connections.join(',')}, methods ${options.methods.join(',')}, probe ${options.probeRequests}`);

  const temp = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
  let setup: Setup | null = null;
  let failure: Error | null = null;
  let hops: HopsResult | null = null;
  try {
    setup = await setUp(options, temp);
    await warmUp(setup, options);
    await runAll(setup, options);
    if (options.hops && aborting === null) hops = await runHops(setup, options);
  } catch (error) {
    failure = error as Error;
    process.stderr.write(`bench: ${failure.stack ?? failure.message}\n`);
  }

  sampler.sampleAll();
  sampler.stop();
  const peaks = sampler.peaks();
  const series = sampler.series(origin);
  const crashedBeforeStop = children.crashed().map((child) => child.name);
  const exits = await children.stopAll(5_000);
  const processes: Record<string, { pid: number; peakRssMiB: number | null; hwmMiB: number | null; exit: (ExitInfo & { killed: boolean }) | null; crashed: boolean; stderrTail: string }> = {};
  for (const child of children.all) {
    const exit = exits.get(child.name) ?? null;
    processes[child.name] = {
      pid: child.pid,
      peakRssMiB: peaks[child.name] === undefined ? null : round(peaks[child.name]!.peakRssMiB, 1),
      hwmMiB: peaks[child.name] === undefined ? null : round(peaks[child.name]!.hwmMiB, 1),
      exit,
      crashed: crashedBeforeStop.includes(child.name),
      stderrTail: child.stderr.slice(-4_000),
    };
    const unclean = exit !== null && (exit.killed || (exit.code !== 0 && exit.signal !== 'SIGTERM'));
    if (unclean && failure === null) log(`note: ${child.name} did not stop cleanly on SIGTERM (code ${exit.code}, signal ${exit.signal}${exit.killed ? ', needed SIGKILL' : ''})`);
  }

  const summary = summarize(runs, probes, setup?.tunnels ?? []);
  if (runs.length > 0) printSummary(summary);

  const finishedAt = new Date();
  const results = {
    kind: 'burrow-e2e-bench',
    version: 1,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    machine,
    source,
    bench: { dir: bench.dir, commit: bench.commit },
    options: { ...options, burrowDir: options.burrowDir, outDir: relative(ROOT, options.outDir) || '.' },
    inspectFlag: setup?.inspectFlag ?? null,
    headline: { method: options.methods.includes('POST') ? 'POST' : options.methods[0], connections: options.connections.includes(100) ? 100 : Math.max(...options.connections) },
    tunnels: setup?.tunnels.map(({ id, capture, inspect, label, edge, client }) => ({ id, capture, inspect, label, edge, client })) ?? [],
    error: failure === null ? null : failure.message,
    aborted: aborting,
    summary,
    runs,
    warmups,
    otherClientLog,
    probes,
    discarded,
    discardedProbes,
    hops,
    processes,
    series,
  };
  mkdirSync(options.outDir, { recursive: true });
  const file = join(options.outDir, `e2e-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(results, null, 1)}\n`);
  log(`\nresults: ${relative(process.cwd(), file) || file}`);

  if (options.keep) log(`kept temp dir: ${temp}`);
  else rmSync(temp, { recursive: true, force: true });

  if (failure === null && runs.length > 0) {
    // The acceptance targets of issue 6, checked by the same code that writes bench/RESULTS.md.
    const check = spawnSync(process.execPath, [join(ROOT, 'scripts', 'bench-results.mjs'), '--check', file], { encoding: 'utf8' });
    process.stdout.write(check.stdout ?? '');
    if (check.status !== 0) process.stderr.write(check.stderr ?? '');
    log(`write bench/RESULTS.md from it: npm run bench:results -- ${relative(ROOT, file)}`);
  }
  return failure === null ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: Error) => {
    process.stderr.write(`bench: ${error.stack ?? error.message}\n`);
    children.killAll();
    process.exit(1);
  },
);

