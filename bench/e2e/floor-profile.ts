/**
 * The floor profile (issue 25: "where a target cannot be met, the profile that shows the floor, per
 * process, per request, in the same run"): for every body size of the targets (1 KiB and 64 KiB at 100
 * connections, 1 MiB at 10, as the matrix runs them), POST up and GET down with content-length answers,
 * on the headline tunnel and each floor beside it (a --quick run: 1 KiB only),
 *
 * 1. per process on the path: CPU µs per request split into user and system (/proc/<pid>/stat), voluntary
 *    and involuntary context switches per request (summed over the threads), from one autocannon run;
 *    then syscalls per request by name (`perf stat` on the syscall tracepoints) from a second, shorter run,
 *    so the tracing does not inflate the CPU figures;
 * 2. for Burrow's own processes, right after the tunnel's run of step 1: a separate edge + `burrow http`
 *    pair, same flags as the matrix's tunnel, under `node --cpu-prof`, a warm-up and one run, stopped with
 *    SIGINT so the profiles are written (one pair per scenario); the samples inside each run (the profile's clock and `process.hrtime` are both
 *    CLOCK_MONOTONIC) bucketed by SELF time into categories, idle left out. A sample's time is wall time
 *    (a preempted thread keeps its sample), so a category is its share of the non-idle samples times the
 *    main thread's CPU per request from /proc; beside them the same processes' CPU under the profiler and
 *    the unprofiled figure of step 1 (the profiler's inflation).
 *
 * The runner (bench/e2e.ts) calls `runFloorProfile` and stores the record as `floorProfile` in the results
 * file; `summarizeFloorProfile` gives the comparisons the summary keeps; `floorProfileLines` prints it.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { burrowEnv, createBenchAccount, RING_FILL_UPLOADS, startBurrowEdge, startBurrowHttp } from './burrow.js';
import { badCount, runLoad, type Target } from './load.js';
import { KIB, MIB, scenarioLabel, SMALL, type Scenario } from './payloads.js';
import { ALL_SYSCALLS, contextSwitches, countSyscalls, perfProblem, READ_SYSCALLS, ticksOf, WRITE_SYSCALLS } from './proc-counters.js';
import type { Child, Children } from './processes.js';
import { clockTicks } from './sampler.js';
import { formatNumber, textTable } from './table.js';

/** A scenario of the floor profile and the connections it runs at (the matrix's for its size). */
export interface FloorScenario {
  scenario: Scenario;
  connections: number;
}

const floorScenario = (method: Scenario['method'], size: number, connections: number): FloorScenario => ({ scenario: { method, size, shape: 'length' }, connections });
/** Every size issue 25 has a target for. */
export const FLOOR_SCENARIOS: readonly FloorScenario[] = [
  floorScenario('POST', SMALL, 100),
  floorScenario('GET', SMALL, 100),
  floorScenario('POST', 64 * KIB, 100),
  floorScenario('GET', 64 * KIB, 100),
  floorScenario('POST', MIB, 10),
  floorScenario('GET', MIB, 10),
];
/** A --quick run's: the 1 KiB pair. */
export const QUICK_FLOOR_SCENARIOS: readonly FloorScenario[] = FLOOR_SCENARIOS.slice(0, 2);

/** One process on a path, per completed request of the run. */
export interface ProcessFloor {
  role: string;
  name: string;
  pid: number;
  userUs: number;
  sysUs: number;
  cpuUs: number;
  /** The main thread's share of `cpuUs` (a Node process's JS, and what its CPU profile samples). */
  mainThreadUs: number;
  voluntarySwitches: number;
  involuntarySwitches: number;
  /** Syscalls per request by name, `(all)` included; null when perf could not count. */
  syscalls: Record<string, number> | null;
  reads: number | null;
  writes: number | null;
}

export interface PathFloor {
  scenario: string;
  path: string;
  label: string;
  kind: string;
  reqPerSec: number;
  requests: number;
  /** Requests of the second run, the one perf counted syscalls over (0 when perf was skipped). */
  syscallRequests: number;
  bad: number;
  processes: ProcessFloor[];
  error: string | null;
}

export interface ProfileBreakdown {
  scenario: string;
  role: 'edge' | 'client';
  reqPerSec: number;
  requests: number;
  /** Samples inside the run and the profiler's interval, µs. */
  samples: number;
  /**
   * Non-idle time in the run's samples, µs per request: wall time between samples, so it includes the
   * time the main thread was runnable but preempted (2 cores, 5 busy processes). The categories and the
   * top functions are these samples' shares scaled to `profiledMainThreadUs`, the main thread's CPU.
   */
  sampledUs: number;
  /** The profiled process's CPU over the run from /proc (every thread), and its main thread's. */
  profiledCpuUs: number;
  profiledMainThreadUs: number;
  /** The same role's CPU without the profiler, from the floor runs of the headline tunnel, and their req/s. */
  unprofiledCpuUs: number | null;
  unprofiledReqPerSec: number | null;
  /** profiledCpuUs ÷ unprofiledCpuUs. */
  inflation: number | null;
  categories: Array<{ category: string; us: number }>;
  top: Array<{ functionName: string; where: string; category: string; us: number }>;
}

export interface FloorProfileRecord {
  /** Each with its connections ("POST 1 KiB up, length @100"). */
  scenarios: string[];
  durationS: number;
  syscallDurationS: number;
  /** Why syscalls were not counted (perf missing or not permitted), else null. */
  perfSkipped: string | null;
  paths: PathFloor[];
  profiles: ProfileBreakdown[];
  /** Why there is no CPU profile of the edge and client, else null. */
  profileError: string | null;
  /** Errors, timeouts, non-2xx and wrong bodies in the profiled pairs' warm-ups and runs (absent in older files). */
  profiledBad?: number;
}

/** A path as the runner has it: its processes by role with their pids. */
export interface FloorPath {
  id: string;
  kind: string;
  label: string;
  target: Target;
  processes: Array<{ role: string; name: string; pid: number }>;
}

export interface FloorContext {
  /** The headline tunnel first (its CPU figures are the unprofiled ones), then the floors. */
  paths: FloorPath[];
  scenarios: readonly FloorScenario[];
  durationS: number;
  warmupS: number;
  pauseMs: number;
  children: Children;
  /** bin/burrow.js of the measured checkout, the target's port, the run's temp dir. */
  bin: string;
  targetPort: number;
  temp: string;
  /** Whether `burrow http` has --inspect/--no-inspect (then the client runs with `--inspect 127.0.0.1:0`). */
  inspectFlag: boolean;
  log: (line: string) => void;
  checkAbort: () => void;
}

/** Rounded to `digits` decimals (NaN stays NaN, which JSON writes as null). */
const round = (value: number, digits: number): number => Math.round(value * 10 ** digits) / 10 ** digits;
const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
const HZ = clockTicks();
const scenarioName = ({ scenario, connections }: FloorScenario): string => `${scenarioLabel(scenario)} @${connections}`;

interface Counters {
  user: number;
  system: number;
  main: number;
  voluntary: number;
  involuntary: number;
}

function counters(pid: number): Counters {
  const all = ticksOf(pid);
  const main = ticksOf(pid, pid);
  return { user: all.user, system: all.system, main: main.user + main.system, ...contextSwitches(pid) };
}

/** Per-request figures of one process between two readings. */
function floorOf(process: FloorPath['processes'][number], before: Counters, after: Counters, requests: number): ProcessFloor {
  const us = (ticks: number): number => round((ticks * 1e6) / HZ / Math.max(1, requests), 1);
  const each = (count: number): number => round(count / Math.max(1, requests), 2);
  return {
    ...process,
    userUs: us(after.user - before.user),
    sysUs: us(after.system - before.system),
    cpuUs: us(after.user + after.system - before.user - before.system),
    mainThreadUs: us(after.main - before.main),
    voluntarySwitches: each(after.voluntary - before.voluntary),
    involuntarySwitches: each(after.involuntary - before.involuntary),
    syscalls: null,
    reads: null,
    writes: null,
  };
}

/** Step 1 for one path and scenario: a warm-up, a CPU run, then (perf permitting) a syscall run. */
async function measurePath(context: FloorContext, path: FloorPath, floor: FloorScenario, syscallDurationS: number, perfSkipped: string | null): Promise<PathFloor> {
  const { scenario, connections } = floor;
  const record: PathFloor = { scenario: scenarioName(floor), path: path.id, label: path.label, kind: path.kind, reqPerSec: 0, requests: 0, syscallRequests: 0, bad: 0, processes: [], error: null };
  try {
    context.checkAbort();
    const warmup = context.warmupS > 0 ? await runLoad(path.target, scenario, connections, context.warmupS) : null;
    const before = path.processes.map((p) => counters(p.pid));
    const started = process.hrtime.bigint();
    const load = await runLoad(path.target, scenario, connections, context.durationS);
    const after = path.processes.map((p) => counters(p.pid));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    record.requests = load.requests;
    record.reqPerSec = round(load.requests / seconds, 0);
    record.bad = badCount(load) + (warmup === null ? 0 : badCount(warmup));
    record.processes = path.processes.map((p, i) => floorOf(p, before[i]!, after[i]!, load.requests));
    if (context.pauseMs > 0) await sleep(context.pauseMs);
    if (perfSkipped === null) {
      context.checkAbort();
      const stops = path.processes.map((p) => countSyscalls(p.pid));
      await sleep(300); // perf attaches to every thread before the run starts
      const counted = await runLoad(path.target, scenario, connections, syscallDurationS);
      const maps = await Promise.all(stops.map((stop) => stop()));
      record.syscallRequests = counted.requests;
      record.bad += badCount(counted);
      maps.forEach((map, i) => {
        const floor = record.processes[i]!;
        const per = (count: number): number => round(count / Math.max(1, counted.requests), 2);
        floor.syscalls = Object.fromEntries([...map].filter(([name, count]) => name === ALL_SYSCALLS || count > 0).map(([name, count]) => [name, per(count)]));
        const sum = (names: readonly string[]): number => per(names.reduce((total, name) => total + (map.get(name) ?? 0), 0));
        floor.reads = sum(READ_SYSCALLS);
        floor.writes = sum(WRITE_SYSCALLS);
      });
      if (context.pauseMs > 0) await sleep(context.pauseMs);
    }
  } catch (error) {
    record.error = (error as Error).message.split('\n')[0]!;
  }
  return record;
}

// ---------------------------------------------------------------------------------------------------------
// Step 2: the CPU profile of a fresh edge and client.

interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Natives that write to a socket (stream_wrap's, as LibuvStreamWrap names them). */
const WRITE_NATIVES = new Set(['writeBuffer', 'writev', 'writeUtf8String', 'writeLatin1String', 'writeAsciiString', 'writeUcs2String']);
const STREAM_WRITE_FUNCTIONS = /^(writeGeneric|writevGeneric|handleWriteReq|afterWriteDispatched|onWriteComplete|createWriteWrap)$/;

/** The category of a JavaScript frame (one with a script url), or null for natives (the caller decides). */
function categoryOfScript(functionName: string, url: string): string {
  if (url.includes('/src/http1/') || url.startsWith('node:_http_common') || url.includes('/llhttp') || url.startsWith('wasm://')) return 'HTTP parsing';
  if (url.includes('/src/protocol/') || url.includes('/node_modules/msgpackr/')) return 'frame codec';
  if (url.includes('/src/store/') || url.includes('/node_modules/lmdb/')) return 'LMDB / capture store';
  if (url.includes('/src/inspector/')) return 'inspector';
  if (url.includes('/node_modules/ws/') || url.includes('uWebSockets') || url.includes('uws-js') || /\/src\/uws\.[jt]s$/.test(url)) return 'WebSocket';
  if (url === 'node:internal/stream_base_commons') return STREAM_WRITE_FUNCTIONS.test(functionName) ? 'socket writes' : 'socket read path';
  if (url === 'node:internal/streams/writable' || (url === 'node:net' && /write/i.test(functionName))) return 'socket writes';
  if (url === 'node:internal/streams/readable' || (url === 'node:net' && /read/i.test(functionName))) return 'socket read path';
  if (url === 'node:fs' || url.startsWith('node:internal/fs/')) return 'file writes (logs, capture journal and blocks)';
  const burrow = /\/dist\/src\/(?:([^/]+)\/.*)?[^/]+$/.exec(url);
  if (burrow !== null) return `other Burrow JS (src/${burrow[1] ?? '*.ts, top level'})`;
  if (url.includes('/node_modules/')) return 'other packages';
  if (url.startsWith('node:')) return 'other Node internals';
  return 'other';
}

const IDLE = '(idle)';

/**
 * Self time of the samples inside [fromUs, toUs] (monotonic µs), by category and by function. A native
 * frame without a script (an lmdb or uWS binding, say) counts where its nearest JavaScript caller does,
 * except the socket-write natives and the parser's `execute`.
 */
export function bucketProfile(profile: CpuProfile, fromUs: number, toUs: number): { samples: number; byCategory: Map<string, number>; byFunction: Map<string, { functionName: string; where: string; category: string; us: number }> } {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const categoryCache = new Map<number, string>();
  const categoryOf = (id: number): string => {
    const cached = categoryCache.get(id);
    if (cached !== undefined) return cached;
    const { functionName, url } = nodes.get(id)!.callFrame;
    let category: string;
    if (functionName === '(idle)') category = IDLE;
    else if (functionName === '(garbage collector)') category = 'GC';
    else if (functionName === '(program)' || functionName === '(root)') category = '(program)';
    else if (url !== '') category = categoryOfScript(functionName, url);
    else if (functionName === 'execute') category = 'HTTP parsing';
    else {
      const up = parent.get(id);
      const callerCategory = up === undefined ? '(program)' : categoryOf(up);
      // A write native called from fs (the client's log on stdout) is no socket write.
      category = WRITE_NATIVES.has(functionName) && callerCategory !== 'file writes (logs, capture journal and blocks)' ? 'socket writes' : callerCategory === '(program)' ? 'other natives' : callerCategory;
    }
    categoryCache.set(id, category);
    return category;
  };
  const byCategory = new Map<string, number>();
  const byFunction = new Map<string, { functionName: string; where: string; category: string; us: number }>();
  let t = profile.startTime;
  let samples = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    // A sample stands for the time until the next one.
    const us = profile.timeDeltas[i + 1] ?? 0;
    const id = profile.samples[i]!;
    const category = categoryOf(id);
    samples++;
    if (category === IDLE) continue;
    byCategory.set(category, (byCategory.get(category) ?? 0) + us);
    const { functionName, url, lineNumber } = nodes.get(id)!.callFrame;
    const where = url === '' ? '(native)' : `${url.replace(/^file:\/\/.*?\/(dist\/|node_modules\/)/, '$1')}:${lineNumber + 1}`;
    const key = `${functionName}\n${where}`;
    const entry = byFunction.get(key) ?? { functionName: functionName || '(anonymous)', where, category, us: 0 };
    entry.us += us;
    byFunction.set(key, entry);
  }
  return { samples, byCategory, byFunction };
}

/** Stops a child with SIGINT (so `--cpu-prof` writes its profile) and waits; SIGKILL after `graceMs`. */
async function interrupt(child: Child, graceMs: number): Promise<void> {
  child.stopRequested = true;
  if (!child.alive) return;
  child.process.kill('SIGINT');
  const timer = setTimeout(() => child.process.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(timer);
}

/**
 * A fresh edge and client under the profiler for `scenarios` (`tag` tells the pairs of one run apart), run
 * right after the unprofiled tunnel's floor run of the same scenario, so the inflation compares runs a few
 * seconds apart.
 */
async function profileTunnel(context: FloorContext, scenarios: readonly FloorScenario[], tag: string, unprofiled: PathFloor[]): Promise<{ breakdowns: ProfileBreakdown[]; bad: number }> {
  const dir = join(context.temp, `floor-profile-${tag}`);
  const profiles = join(dir, 'profiles');
  mkdirSync(profiles, { recursive: true });
  const env = burrowEnv(join(dir, 'config'));
  const dataDir = join(dir, 'edge-data');
  const token = createBenchAccount({ bin: context.bin, dataDir, email: 'floor@bench.test', env });
  const profArgs = (name: string): string[] => ['--cpu-prof', `--cpu-prof-dir=${profiles}`, `--cpu-prof-name=${name}.cpuprofile`];
  const { child: edge, port } = await startBurrowEdge(context.children, { bin: context.bin, name: `edge-profiled-${tag}`, dataDir, env, nodeArgs: profArgs('edge') });
  let client: Child | null = null;
  let bad = 0;
  const windows: Array<{ scenario: FloorScenario; fromUs: number; toUs: number; requests: number; reqPerSec: number; procs: Record<'edge' | 'client', { cpu: number; main: number }> }> = [];
  try {
    const started = await startBurrowHttp(context.children, {
      bin: context.bin,
      name: `client-profiled-${tag}`,
      targetPort: context.targetPort,
      edgePort: port,
      token,
      subdomain: 'bench-profiled',
      env: burrowEnv(join(dir, 'client-config')),
      inspector: context.inspectFlag,
      nodeArgs: profArgs('client'),
      stdoutFile: join(dir, 'client.log'),
    });
    client = started.child;
    const target: Target = { origin: `http://127.0.0.1:${port}`, host: `bench-profiled.localhost:${port}` };
    const pids = { edge: edge.pid, client: client.pid };
    // A fresh edge: its capture ring laps once first, as the matrix's tunnels' do (RING_FILL_UPLOADS).
    if (scenarios.some((floor) => floor.scenario.size >= MIB)) bad += badCount(await runLoad(target, { method: 'POST', size: MIB, shape: 'length' }, 10, 0, RING_FILL_UPLOADS));
    for (const floor of scenarios) {
      const { scenario, connections } = floor;
      context.checkAbort();
      bad += badCount(await runLoad(target, scenario, connections, Math.max(1, context.warmupS)));
      const before = { edge: counters(pids.edge), client: counters(pids.client) };
      const fromUs = Number(process.hrtime.bigint() / 1000n);
      const load = await runLoad(target, scenario, connections, context.durationS);
      bad += badCount(load);
      const toUs = Number(process.hrtime.bigint() / 1000n);
      const after = { edge: counters(pids.edge), client: counters(pids.client) };
      const us = (ticks: number): number => (ticks * 1e6) / HZ / Math.max(1, load.requests);
      const procs = {
        edge: { cpu: us(after.edge.user + after.edge.system - before.edge.user - before.edge.system), main: us(after.edge.main - before.edge.main) },
        client: { cpu: us(after.client.user + after.client.system - before.client.user - before.client.system), main: us(after.client.main - before.client.main) },
      };
      windows.push({ scenario: floor, fromUs, toUs, requests: load.requests, reqPerSec: load.requests / ((toUs - fromUs) / 1e6), procs });
      if (context.pauseMs > 0) await sleep(context.pauseMs);
    }
  } finally {
    // The client first: the edge then has no tunnel to drain.
    if (client !== null) await interrupt(client, 15_000);
    await interrupt(edge, 15_000);
  }
  const breakdowns: ProfileBreakdown[] = [];
  for (const role of ['edge', 'client'] as const) {
    const profile = JSON.parse(readFileSync(join(profiles, `${role}.cpuprofile`), 'utf8')) as CpuProfile;
    for (const window of windows) {
      const { samples, byCategory, byFunction } = bucketProfile(profile, window.fromUs, window.toUs);
      if (samples === 0) throw new Error(`the ${role}'s profile has no samples inside the run (${profile.startTime}..${profile.endTime} µs against ${window.fromUs}..${window.toUs}): its clock is not the runner's`);
      const sampled = [...byCategory.values()].reduce((total, us) => total + us, 0);
      const toCpu = sampled > 0 ? (window.procs[role].main * window.requests) / sampled : 0;
      const perRequest = (us: number): number => round((us * toCpu) / Math.max(1, window.requests), 2);
      const name = scenarioName(window.scenario);
      const floor = unprofiled.find((p) => p.scenario === name);
      const unprofiledCpu = floor?.processes.find((p) => p.role === role)?.cpuUs ?? null;
      const profiledCpu = round(window.procs[role].cpu, 1);
      breakdowns.push({
        scenario: name,
        role,
        reqPerSec: round(window.reqPerSec, 0),
        requests: window.requests,
        samples,
        sampledUs: round(sampled / Math.max(1, window.requests), 1),
        profiledCpuUs: profiledCpu,
        profiledMainThreadUs: round(window.procs[role].main, 1),
        unprofiledCpuUs: unprofiledCpu,
        unprofiledReqPerSec: floor?.reqPerSec ?? null,
        inflation: unprofiledCpu === null || unprofiledCpu <= 0 ? null : round(profiledCpu / unprofiledCpu, 2),
        categories: [...byCategory].sort((a, b) => b[1] - a[1]).map(([category, us]) => ({ category, us: perRequest(us) })),
        top: [...byFunction.values()].sort((a, b) => b.us - a.us).slice(0, 15).map((entry) => ({ ...entry, us: perRequest(entry.us) })),
      });
    }
  }
  return { breakdowns, bad };
}

export async function runFloorProfile(context: FloorContext): Promise<FloorProfileRecord> {
  const syscallDurationS = Math.max(1, Math.round(context.durationS / 2));
  const perfSkipped = perfProblem();
  const record: FloorProfileRecord = { scenarios: context.scenarios.map(scenarioName), durationS: context.durationS, syscallDurationS, perfSkipped, paths: [], profiles: [], profileError: null, profiledBad: 0 };
  context.log(`\nfloor profile: ${record.scenarios.join(', ')}; per path ${context.durationS} s of CPU and context switches per process, then ${perfSkipped === null ? `${syscallDurationS} s of syscalls (perf stat)` : 'no syscalls'}; after the tunnel a fresh edge and client under --cpu-prof`);
  if (perfSkipped !== null) context.log(`  syscalls per request skipped: ${perfSkipped}`);
  const headline = context.paths.find((p) => p.kind === 'tunnel');
  for (const [index, scenario] of context.scenarios.entries()) {
    for (const path of context.paths) {
      const floor = await measurePath(context, path, scenario, syscallDurationS, perfSkipped);
      record.paths.push(floor);
      context.log(
        `  ${floor.scenario.padEnd(30)} ${path.label.padEnd(36)} ${formatNumber(floor.reqPerSec).padStart(7)} req/s  ` +
          floor.processes.map((p) => `${p.role} ${formatNumber(p.userUs, 1)}+${formatNumber(p.sysUs, 1)} µs, ${formatNumber(p.syscalls?.[ALL_SYSCALLS], 1)} syscalls, ${formatNumber(p.voluntarySwitches + p.involuntarySwitches, 2)} cs`).join('; ') +
          (floor.bad > 0 ? `  !! ${floor.bad} bad answers` : '') +
          (floor.error === null ? '' : `  !! ${floor.error}`),
      );
      if (path !== headline) continue;
      try {
        const { breakdowns: profiles, bad } = await profileTunnel(context, [scenario], String(index + 1), [floor]);
        record.profiles.push(...profiles);
        record.profiledBad = (record.profiledBad ?? 0) + bad;
        context.log(
          `  ${floor.scenario.padEnd(30)} ${'the same under --cpu-prof'.padEnd(36)} ${formatNumber(profiles[0]?.reqPerSec).padStart(7)} req/s  ${profiles.map((p) => `${p.role} ${formatNumber(p.profiledCpuUs, 1)} µs (${formatNumber(p.inflation, 2)}x)`).join('; ')}` +
            (bad > 0 ? `  !! ${bad} bad answers` : ''),
        );
      } catch (error) {
        record.profileError ??= (error as Error).message.split('\n')[0]!;
        context.log(`  !! CPU profile of the edge and client failed: ${(error as Error).message.split('\n')[0]!}`);
      }
    }
  }
  return record;
}

// ---------------------------------------------------------------------------------------------------------
// Summary and terminal output.

export interface FloorComparison {
  scenario: string;
  path: string;
  label: string;
  cpuUs: number;
  userUs: number;
  sysUs: number;
  syscalls: number | null;
  writes: number | null;
  reads: number | null;
  contextSwitches: number;
}

/** Per scenario and path, the path's processes summed: what the tunnel's floor is compared on. */
export function summarizeFloorProfile(record: FloorProfileRecord | null | undefined): FloorComparison[] | null {
  if (record === null || record === undefined) return null;
  const sum = (list: ProcessFloor[], pick: (p: ProcessFloor) => number | null): number | null => (list.some((p) => pick(p) === null) ? null : round(list.reduce((total, p) => total + pick(p)!, 0), 2));
  return record.paths
    .filter((p) => p.error === null)
    .map((p) => ({
      scenario: p.scenario,
      path: p.path,
      label: p.label,
      cpuUs: sum(p.processes, (x) => x.cpuUs)!,
      userUs: sum(p.processes, (x) => x.userUs)!,
      sysUs: sum(p.processes, (x) => x.sysUs)!,
      syscalls: sum(p.processes, (x) => x.syscalls?.[ALL_SYSCALLS] ?? null),
      writes: sum(p.processes, (x) => x.writes),
      reads: sum(p.processes, (x) => x.reads),
      contextSwitches: sum(p.processes, (x) => x.voluntarySwitches + x.involuntarySwitches)!,
    }));
}

/** The syscalls of a process that make up most of its count, "write 2.1, epoll_wait 1.3, ...". */
export function topSyscalls(syscalls: Record<string, number> | null, count = 4): string {
  if (syscalls === null) return '';
  return Object.entries(syscalls)
    .filter(([name]) => name !== ALL_SYSCALLS)
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
}

export function floorProfileLines(record: FloorProfileRecord): string[] {
  const lines = ['\nFloor profile: per process on each path, per request (user + sys CPU from /proc, syscalls from perf stat, context switches over all threads):'];
  if (record.perfSkipped !== null) lines.push(`(syscalls not counted: ${record.perfSkipped})`);
  lines.push(
    textTable(
      ['scenario', 'path', 'process', 'req/s', 'user µs', 'sys µs', 'CPU µs', 'main thr', 'syscalls', 'reads', 'writes', 'vol cs', 'invol cs', 'most syscalls'],
      record.paths.flatMap((p) =>
        p.error !== null
          ? [[p.scenario, p.label, `failed: ${p.error}`, null, null, null, null, null, null, null, null, null, null, null]]
          : p.processes.map((x) => [p.scenario, p.label, x.role, formatNumber(p.reqPerSec), formatNumber(x.userUs, 1), formatNumber(x.sysUs, 1), formatNumber(x.cpuUs, 1), formatNumber(x.mainThreadUs, 1), formatNumber(x.syscalls?.[ALL_SYSCALLS], 1), formatNumber(x.reads, 2), formatNumber(x.writes, 2), formatNumber(x.voluntarySwitches, 2), formatNumber(x.involuntarySwitches, 2), topSyscalls(x.syscalls)]),
      ),
    ),
  );
  if (record.profileError !== null) lines.push(`CPU profile of the edge and client: failed: ${record.profileError}`);
  for (const scenario of record.scenarios) {
    const profiles = record.profiles.filter((p) => p.scenario === scenario);
    if (profiles.length === 0) continue;
    const categories = [...new Set(profiles.flatMap((p) => p.categories.map((c) => c.category)))];
    lines.push(`\nCPU profile, ${scenario}: self time µs per request by category (main thread, idle left out; sample shares scaled to the main thread's CPU):`);
    lines.push(
      textTable(
        ['category', ...profiles.map((p) => p.role)],
        [
          ...categories.map((category) => [category, ...profiles.map((p) => formatNumber(p.categories.find((c) => c.category === category)?.us ?? 0, 1))]),
          ['= main thread CPU under the profiler (/proc)', ...profiles.map((p) => formatNumber(p.profiledMainThreadUs, 1))],
          ['non-idle sample time (wall, with preemption)', ...profiles.map((p) => formatNumber(p.sampledUs, 1))],
          ['other threads under the profiler', ...profiles.map((p) => formatNumber(p.profiledCpuUs - p.profiledMainThreadUs, 1))],
          ['CPU under the profiler (/proc, all threads)', ...profiles.map((p) => formatNumber(p.profiledCpuUs, 1))],
          ['CPU unprofiled (floor run above)', ...profiles.map((p) => formatNumber(p.unprofiledCpuUs, 1))],
          ['inflation by the profiler (x)', ...profiles.map((p) => formatNumber(p.inflation, 2))],
          ['req/s profiled', ...profiles.map((p) => formatNumber(p.reqPerSec))],
          ['req/s unprofiled', ...profiles.map((p) => formatNumber(p.unprofiledReqPerSec))],
        ],
      ),
    );
    for (const p of profiles) lines.push(`  top ${p.role}: ${p.top.slice(0, 8).map((f) => `${f.functionName} ${formatNumber(f.us, 1)}`).join(', ')}`);
  }
  return lines;
}
