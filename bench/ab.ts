/**
 * A focused A/B of Burrow builds (`node dist/bench/ab.js --dir A=/path --dir B=/path ...`): one target,
 * and per build its own edge (capture on) and `burrow http` client (inspector on), each set up through
 * that build's own CLI. Rounds alternate the builds (order rotated each round); each run is autocannon
 * with a fixed number of requests, and the CPU time of the build's edge and client is read from
 * /proc/<pid>/stat before and after, so the figure is CPU µs per request, which a machine shared with
 * other work moves far less than req/s. Optionally a one-connection probe (undici, sequential) per
 * build and round. Medians over the rounds at the end, then each build paired with the first round by
 * round: on a machine whose speed drifts between rounds (a shared VM), a change that goes the same way
 * in every round says more than two medians do. Pairing does not remove an instance that is slow for
 * all of its life (seen in this VM: one long-lived edge 18-21% slower than its twin, every round): for a
 * step of a few percent, use `--fresh` and run both orders.
 *
 * `--fresh` starts every build's edge and client anew (fresh data directory, warm-up) before each of its
 * runs, so a comparison does not rest on two processes' histories. Processes change with age: before
 * `src/key-table.ts`, an edge or a client spent 8-10 µs a request more after its first full GC under
 * load than before it (bench/RESULTS.md, tuning log, "the promotion chain"), and long-lived instances
 * of one build side by side differed by that much. Use a warm-up long enough to reach the state you
 * mean to compare (`--warmup`), and say which it was.
 *
 * For a tuning step: build the "before" commit in a worktree beside this one and compare it with this
 * one. `--prof DIR` runs every edge and client under `node --cpu-prof` (written when they stop).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from 'undici';
import { burrowEnv, createBenchAccount, startBurrowEdge, startBurrowHttp } from './e2e/burrow.js';
import { runLoad, badCount } from './e2e/load.js';
import { payload, scenarioPath, type Method, type Scenario, type Shape } from './e2e/payloads.js';
import { Children, type Child } from './e2e/processes.js';
import { countSyscalls, ticksOf } from './e2e/proc-counters.js';
import { clockTicks, readSystem } from './e2e/sampler.js';

const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));

const HELP = `
Usage: node dist/bench/ab.js --dir LABEL=DIR --dir LABEL=DIR [options]

  --dir LABEL=DIR     a built Burrow checkout (repeat: two or more)
  --rounds N          alternated rounds (default 6)
  --duration SEC      seconds per autocannon run (default 4); CPU is per completed request
  --requests N        instead: requests per run (autocannon then ends on a whole second: req/s is coarse)
  --connections N     autocannon connections (default 100)
  --scenario S        post-length, post-chunked, get-length, get-chunked (default post-length)
  --size BYTES        body size up (POST) or down (GET) (default 1024)
  --probe N           one-connection requests per build and round (undici, sequential; default 0)
  --warmup SEC        seconds per build before the rounds (default 2)
  --mix BYTES         before each measured run (and after the warm-up), POSTs of BYTES at 10 connections
                      for --mix-seconds, not measured: the capture ring then holds captures of two
                      sizes, as a tunnel whose webhooks are small and whose uploads are not (and the
                      e2e bench's matrix) makes it
  --mix-seconds SEC   seconds of --mix load before each run (default 2)
  --fresh             start each build's edge and client anew before each of its runs (fresh data
                      directory, then the warm-up), so no comparison rests on two processes' histories
  --prof DIR          run edges and clients under node --cpu-prof, profiles in DIR
  --node-arg ARG      an extra node flag for the edges and clients (repeat)
  --flags LABEL=ARG   an extra node flag for one build's edge and client only (repeat; the same
                      DIR under two labels then compares flags)
  --edge-arg LABEL=ARG
                      an extra "burrow edge" argument for one build (repeat), e.g. B=--no-capture
  --client-arg LABEL=ARG
                      an extra "burrow http" argument for one build (repeat), e.g. B=--no-inspect
  --edge-log DIR      keep each edge's stdout in DIR/edge-LABEL.log (with a tracing --node-arg)
  --syscalls          count the edge's syscalls per request (perf stat on syscall tracepoints)
  --gc                V8's garbage collections during the measured runs, per build and process
                      (--trace-gc-nvp): scavenges, their pauses and what survived them, mark-compacts.
                      Counts and bytes do not depend on how fast the machine is today; CPU times do

Prints each run, the medians of each build, and each build paired with the first, round by round: the
median change of its runs against the first build's runs of the same rounds, their range, and in how
many rounds the change went that way. Pairing takes out drift between rounds, not a process that is
slow all its life: for a small step, add --fresh and run both orders. "idle" is the share of the
machine's time (all cores) that nothing used during the run, neither a process, interrupts nor steal:
work that waits on a wake-up or a timer rather than on a core shows there.
`;

interface Build {
  label: string;
  dir: string;
  edge: Child;
  client: Child;
  edgePort: number;
  host: string;
  /** --gc: where each process's stdout goes, and when it was started (ms since the epoch, just before its spawn). */
  logs: { edge: string; client: string; edgeStartedAt: number; clientStartedAt: number } | null;
}

interface RoundResult {
  label: string;
  reqPerSec: number;
  edgeUs: number;
  clientUs: number;
  /** The kernel's share (stime) of each. */
  edgeSysUs: number;
  clientSysUs: number;
  bad: number;
  /** The machine's idle share over the run, percent of all its cores (/proc/stat: not busy, not stolen). */
  idlePct: number;
  requests: number;
  probeP50: number | null;
  probeP99: number | null;
  /** The edge's syscalls per request by name (--syscalls). */
  syscalls: Map<string, number> | null;
  /** The run's wall-clock window (ms since the epoch) and its build's logs, for --gc. */
  startedAt: number;
  endedAt: number;
  logs: Build['logs'];
}

const children = new Children();
/** --edge-log DIR: where each edge's stdout goes (else it is kept in memory only). */
let edgeLogDir: string | null = null;
/** --gc: the processes run with --trace-gc-nvp and their output is kept in files. */
let traceGc = false;
const ticksPerSecond = clockTicks();

/**
 * Each build against the first, round by round: a run beside the first build's run of the same round,
 * minutes apart at most, so a machine that drifts between rounds moves both. The median change, its
 * range, and in how many rounds it went the way the median did (a sign test: 8 of 8 happens by chance
 * once in 128 when there is no difference, 7 of 8 about once in 14).
 */
function pairedTable(labels: string[], results: RoundResult[], rounds: number): string {
  if (labels.length < 2) return '';
  const base = labels[0]!;
  const figures: [string, (r: RoundResult) => number][] = [
    ['edge', (r) => r.edgeUs],
    ['client', (r) => r.clientUs],
    ['sum', (r) => r.edgeUs + r.clientUs],
    ['req/s', (r) => r.reqPerSec],
  ];
  let out = `\npaired with ${base}, round by round (change of each run against ${base}'s run of the same round):\n`;
  for (const label of labels.slice(1)) {
    const mine = results.filter((r) => r.label === label);
    const theirs = results.filter((r) => r.label === base);
    const pairs: [RoundResult, RoundResult][] = [];
    for (let round = 0; round < Math.min(rounds, mine.length, theirs.length); round++) pairs.push([mine[round]!, theirs[round]!]);
    const cells = figures.map(([name, value]) => {
      const changes = pairs.map(([run, baseRun]) => (value(run) / value(baseRun) - 1) * 100);
      const middle = median(changes);
      const sameWay = changes.filter((change) => Math.sign(change) === Math.sign(middle) && change !== 0).length;
      const percent = (n: number): string => `${n >= 0 ? '+' : ''}${n.toFixed(1)}%`;
      return `${name} ${percent(middle)} (${percent(Math.min(...changes))}..${percent(Math.max(...changes))}, ${sameWay} of ${changes.length} that way)`;
    });
    out += `${label.padEnd(10)} ${cells.join('  ')}\n`;
  }
  return out;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** How to start a build again (--fresh). */
interface BuildSpec {
  label: string;
  dir: string;
  nodeArgs: string[];
  edgeArgs: string[];
  clientArgs: string[];
}

/** Instances started per label: the first keeps the label's plain name (profiles edge-LABEL.cpuprofile). */
const instances = new Map<string, number>();

async function startBuild(spec: BuildSpec, temp: string, targetPort: number): Promise<Build> {
  const { label, dir, nodeArgs, edgeArgs, clientArgs } = spec;
  const bin = join(dir, 'bin', 'burrow.js');
  // Each instance its own data directory and profile name (--fresh starts several per label).
  const instance = instances.get(label) ?? 0;
  instances.set(label, instance + 1);
  const name = instance === 0 ? label : `${label}-${instance + 1}`;
  const dataDir = join(temp, `edge-${name}`);
  const env = burrowEnv(join(temp, `${name}-config`));
  const token = createBenchAccount({ bin, dataDir, email: `${label}@bench.test`, env });
  const named = (role: string): string[] => nodeArgs.map((arg) => arg.replace('%s', `${role}-${name}`));
  const edgeLog = edgeLogDir === null ? (traceGc ? join(temp, `edge-${name}.log`) : undefined) : join(edgeLogDir, `edge-${name}.log`);
  const edgeStartedAt = Date.now();
  const { child: edge, port: edgePort } = await startBurrowEdge(children, {
    bin,
    name: `edge-${label}`,
    dataDir,
    env,
    nodeArgs: named('edge'),
    edgeArgs,
    // The edge's output kept in a file (a --node-arg that traces, say) when asked.
    stdoutFile: edgeLog,
  });
  const subdomain = `ab-${label.toLowerCase().replace(/[^a-z0-9]/g, '')}`;
  const clientLog = join(temp, `client-${name}.log`);
  const clientStartedAt = Date.now();
  const { child: client } = await startBurrowHttp(children, {
    bin,
    name: `client-${label}`,
    targetPort,
    edgePort,
    token,
    subdomain,
    env: burrowEnv(join(temp, `${name}-client-config`)),
    nodeArgs: named('client'),
    clientArgs,
    stdoutFile: clientLog,
  });
  if (instance === 0) process.stdout.write(`${label}: ${dir} (edge ${edge.pid}, client ${client.pid})\n`);
  const logs = traceGc ? { edge: edgeLog!, client: clientLog, edgeStartedAt, clientStartedAt } : null;
  return { label, dir, edge, client, edgePort, host: `${subdomain}.localhost:${edgePort}`, logs };
}

async function probe(build: Build, scenario: Scenario, count: number): Promise<{ p50: number; p99: number }> {
  const client = new Client(`http://127.0.0.1:${build.edgePort}`, { pipelining: 1 });
  const body = scenario.method === 'POST' ? payload(scenario.size) : undefined;
  const headers: Record<string, string> = { host: build.host };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const times: number[] = [];
  try {
    for (let i = 0; i < count + 20; i++) {
      const started = process.hrtime.bigint();
      const answer = await client.request({ path: scenarioPath(scenario), method: scenario.method, headers, body });
      await answer.body.arrayBuffer();
      const took = Number(process.hrtime.bigint() - started) / 1000;
      if (answer.statusCode !== 200) throw new Error(`${build.label}: probe got ${answer.statusCode}`);
      if (i >= 20) times.push(took);
    }
  } finally {
    await client.close();
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(times.length * 0.5)]!, p99: times[Math.floor(times.length * 0.99)]! };
}

async function run(build: Build, scenario: Scenario, connections: number, durationS: number, requests: number, syscalls = false): Promise<RoundResult> {
  const stopCounting = syscalls ? countSyscalls(build.edge.pid) : null;
  if (stopCounting !== null) await new Promise((done) => setTimeout(done, 300));
  const edgeBefore = ticksOf(build.edge.pid);
  const clientBefore = ticksOf(build.client.pid);
  const systemBefore = readSystem();
  const startedAt = Date.now();
  const started = performance.now();
  const load = await runLoad({ origin: `http://127.0.0.1:${build.edgePort}`, host: build.host }, scenario, connections, durationS, requests);
  const seconds = (performance.now() - started) / 1000;
  const edgeAfter = ticksOf(build.edge.pid);
  const clientAfter = ticksOf(build.client.pid);
  const systemAfter = readSystem();
  const counted = stopCounting === null ? null : await stopCounting();
  if (counted !== null) for (const [name, count] of counted) counted.set(name, count / Math.max(1, load.requests));
  const perRequest = (ticks: number): number => (ticks * 1e6) / ticksPerSecond / Math.max(1, load.requests);
  return {
    label: build.label,
    reqPerSec: load.requests / seconds,
    edgeUs: perRequest(edgeAfter.user + edgeAfter.system - edgeBefore.user - edgeBefore.system),
    clientUs: perRequest(clientAfter.user + clientAfter.system - clientBefore.user - clientBefore.system),
    edgeSysUs: perRequest(edgeAfter.system - edgeBefore.system),
    clientSysUs: perRequest(clientAfter.system - clientBefore.system),
    bad: badCount(load),
    idlePct: idleShare(systemBefore, systemAfter),
    requests: load.requests,
    probeP50: null,
    probeP99: null,
    syscalls: counted,
    startedAt,
    endedAt: Date.now(),
    logs: build.logs,
  };
}

/** What share of the machine's time (all cores) was idle between two readings: neither busy nor stolen. */
function idleShare(before: ReturnType<typeof readSystem>, after: ReturnType<typeof readSystem>): number {
  if (before === null || after === null || after.total === before.total) return Number.NaN;
  const used = after.tasks + after.interrupts + after.steal - (before.tasks + before.interrupts + before.steal);
  return 100 * (1 - used / (after.total - before.total));
}

/** One line of --trace-gc-nvp: when (ms since the isolate started), the kind, the pause, the bytes that survived a scavenge. */
interface GcEvent {
  atMs: number;
  kind: 'scavenge' | 'mark-compact';
  pauseMs: number;
  survivedBytes: number;
}

function gcEvents(file: string): GcEvent[] {
  let text: string;
  try {
    text = readFileSync(file, 'latin1');
  } catch {
    return [];
  }
  const events: GcEvent[] = [];
  for (const line of text.split('\n')) {
    const at = /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: pause=([\d.]+) .*?\bgc=(s|mc)\b/.exec(line);
    if (at === null) continue;
    const survived = /\bnew_space_survived=(\d+)/.exec(line);
    events.push({ atMs: Number(at[1]), kind: at[3] === 's' ? 'scavenge' : 'mark-compact', pauseMs: Number(at[2]), survivedBytes: survived === null ? 0 : Number(survived[1]) });
  }
  return events;
}

/**
 * The collections inside the measured runs of each build, per process. V8 stamps each line with the time
 * since its isolate started; the process was spawned just after `…StartedAt`, and Node starts the
 * isolate within a few tens of milliseconds of that, against runs of seconds. The files are read once
 * the processes have exited: V8 writes through stdio, which holds up to a block when it is a file.
 */
function gcTable(builds: readonly Build[], results: readonly RoundResult[]): string {
  const lines: string[] = ['', 'garbage collection in the measured runs (--trace-gc-nvp):'];
  const cache = new Map<string, GcEvent[]>();
  const eventsOf = (file: string): GcEvent[] => {
    let events = cache.get(file);
    if (events === undefined) cache.set(file, (events = gcEvents(file)));
    return events;
  };
  for (const build of builds) {
    for (const role of ['edge', 'client'] as const) {
      const inRuns: GcEvent[] = [];
      let requests = 0;
      for (const result of results) {
        if (result.label !== build.label || result.logs === null) continue;
        const file = result.logs[role];
        const startedAt = role === 'edge' ? result.logs.edgeStartedAt : result.logs.clientStartedAt;
        requests += result.requests;
        for (const event of eventsOf(file)) {
          const wall = startedAt + event.atMs;
          if (wall >= result.startedAt && wall <= result.endedAt) inRuns.push(event);
        }
      }
      const scavenges = inRuns.filter((event) => event.kind === 'scavenge');
      const markCompacts = inRuns.filter((event) => event.kind === 'mark-compact');
      const pauses = scavenges.map((event) => event.pauseMs).sort((a, b) => a - b);
      const sum = (values: number[]): number => values.reduce((total, value) => total + value, 0);
      const perK = (value: number): string => (requests === 0 ? '-' : ((value * 1000) / requests).toFixed(2));
      lines.push(
        `${build.label.padEnd(10)} ${role.padEnd(6)} scavenges ${String(scavenges.length).padStart(5)} (${perK(scavenges.length)} per 1,000 req)  ` +
          `pause ${perK(sum(pauses))} ms per 1,000 req, median ${pauses.length === 0 ? '-' : median(pauses).toFixed(2)} p90 ${pauses.length === 0 ? '-' : pauses[Math.floor(pauses.length * 0.9)]!.toFixed(2)} ms  ` +
          `survived ${scavenges.length === 0 ? '-' : (sum(scavenges.map((event) => event.survivedBytes)) / scavenges.length / 1024).toFixed(0)} KB a scavenge  ` +
          `mark-compacts ${markCompacts.length} (${sum(markCompacts.map((event) => event.pauseMs)).toFixed(1)} ms)`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', multiple: true },
      rounds: { type: 'string' },
      requests: { type: 'string' },
      duration: { type: 'string' },
      connections: { type: 'string' },
      scenario: { type: 'string' },
      size: { type: 'string' },
      probe: { type: 'string' },
      warmup: { type: 'string' },
      mix: { type: 'string' },
      'mix-seconds': { type: 'string' },
      prof: { type: 'string' },
      'node-arg': { type: 'string', multiple: true },
      flags: { type: 'string', multiple: true },
      'edge-arg': { type: 'string', multiple: true },
      'client-arg': { type: 'string', multiple: true },
      syscalls: { type: 'boolean' },
      gc: { type: 'boolean' },
      'edge-log': { type: 'string' },
      fresh: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const dirs = values.dir ?? [];
  if (values.help === true || dirs.length < 1) {
    process.stdout.write(HELP);
    return;
  }
  const rounds = Number(values.rounds ?? 6);
  const requests = Number(values.requests ?? 0);
  const durationS = Number(values.duration ?? 4);
  const connections = Number(values.connections ?? 100);
  const probeCount = Number(values.probe ?? 0);
  const warmup = Number(values.warmup ?? 2);
  const fresh = values.fresh === true;
  const mixSize = Number(values.mix ?? 0);
  const mixSeconds = Number(values['mix-seconds'] ?? 2);
  const mixScenario: Scenario = { method: 'POST', shape: 'length', size: mixSize };
  const mix = async (build: Build): Promise<void> => {
    if (mixSize > 0) await run(build, mixScenario, 10, mixSeconds, 0);
  };
  const [method, shape] = (values.scenario ?? 'post-length').split('-') as [string, string];
  const scenario: Scenario = { method: method.toUpperCase() as Method, shape: shape as Shape, size: Number(values.size ?? 1024) };
  const nodeArgs = [...(values['node-arg'] ?? [])];
  if (values.gc === true) {
    traceGc = true;
    nodeArgs.push('--trace-gc-nvp');
  }
  if (values['edge-log'] !== undefined) {
    edgeLogDir = resolve(values['edge-log']);
    mkdirSync(edgeLogDir, { recursive: true });
  }
  if (values.prof !== undefined) {
    const profDir = resolve(values.prof);
    mkdirSync(profDir, { recursive: true });
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${profDir}`, '--cpu-prof-name=%s.cpuprofile');
  }

  const temp = mkdtempSync(join(tmpdir(), 'burrow-ab-'));
  const stop = async (): Promise<void> => {
    await children.stopAll(10_000);
    rmSync(temp, { recursive: true, force: true });
  };
  process.on('SIGINT', () => void stop().then(() => process.exit(130)));
  try {
    const { port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
    const builds: Build[] = [];
    const specs: BuildSpec[] = [];
    // Flags for one build only: the same checkout under two labels compares node or V8 flags.
    const forLabel = (entries: string[] | undefined, label: string): string[] =>
      (entries ?? []).filter((entry) => entry.startsWith(`${label}=`)).map((entry) => entry.slice(label.length + 1));
    for (const entry of dirs) {
      const at = entry.indexOf('=');
      const label = entry.slice(0, at);
      const spec: BuildSpec = {
        label,
        dir: resolve(entry.slice(at + 1)),
        nodeArgs: [...nodeArgs, ...forLabel(values.flags, label)],
        edgeArgs: forLabel(values['edge-arg'], label),
        clientArgs: forLabel(values['client-arg'], label),
      };
      specs.push(spec);
      builds.push(await startBuild(spec, temp, targetPort));
    }
    process.stdout.write(
      `${scenario.method} ${scenario.size} B ${scenario.shape} @${connections}, ${requests > 0 ? `${requests} requests` : `${durationS} s`} a run, ${rounds} rounds` +
        `${probeCount > 0 ? `, probe ${probeCount}` : ''}${fresh ? ', a fresh edge and client for every run' : ''}` +
        `${mixSize > 0 ? `, ${mixSeconds} s of POST ${mixSize} B @10 before each run` : ''}\n`,
    );
    const warmed = new Map<string, number>();
    const warm = async (build: Build): Promise<void> => {
      if (warmup > 0) warmed.set(build.label, (warmed.get(build.label) ?? 0) + (await run(build, scenario, connections, warmup, 0)).requests);
    };
    for (const build of builds) await warm(build);
    const results: RoundResult[] = [];
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < builds.length; i++) {
        const at = (i + round) % builds.length;
        if (fresh && round > 0) {
          // The old instance goes first (client, then edge), so the two never share the machine.
          await builds[at]!.client.stop(10_000);
          await builds[at]!.edge.stop(10_000);
          builds[at] = await startBuild(specs[at]!, temp, targetPort);
          await warm(builds[at]!);
        }
        const build = builds[at]!;
        await mix(build);
        const result = await run(build, scenario, connections, durationS, requests, values.syscalls === true);
        if (probeCount > 0) {
          const probed = await probe(build, scenario, probeCount);
          result.probeP50 = probed.p50;
          result.probeP99 = probed.p99;
        }
        results.push(result);
        if (result.syscalls !== null) process.stdout.write(`  ${build.label} syscalls/req: ${[...result.syscalls].filter(([, n]) => n >= 0.01).map(([name, n]) => `${name} ${n.toFixed(2)}`).join(', ')}\n`);
        const probeText = result.probeP50 === null ? '' : `  probe p50 ${result.probeP50.toFixed(0)} p99 ${result.probeP99!.toFixed(0)} µs`;
        process.stdout.write(`round ${round + 1} ${build.label.padEnd(10)} ${result.reqPerSec.toFixed(0).padStart(6)} req/s  edge ${result.edgeUs.toFixed(1).padStart(6)} (sys ${result.edgeSysUs.toFixed(1).padStart(5)})  client ${result.clientUs.toFixed(1).padStart(6)} (sys ${result.clientSysUs.toFixed(1).padStart(5)})  sum ${(result.edgeUs + result.clientUs).toFixed(1).padStart(6)} µs/req  idle ${result.idlePct.toFixed(0).padStart(2)}%${result.bad > 0 ? `  BAD ${result.bad}` : ''}${probeText}\n`);
      }
    }
    process.stdout.write('\nmedians:\n');
    for (const build of builds) {
      const mine = results.filter((r) => r.label === build.label);
      const probes = mine.filter((r) => r.probeP50 !== null);
      const probeText = probes.length === 0 ? '' : `  probe p50 ${median(probes.map((r) => r.probeP50!)).toFixed(0)} p99 ${median(probes.map((r) => r.probeP99!)).toFixed(0)} µs`;
      process.stdout.write(
        `${build.label.padEnd(10)} ${median(mine.map((r) => r.reqPerSec)).toFixed(0).padStart(6)} req/s  edge ${median(mine.map((r) => r.edgeUs)).toFixed(1).padStart(6)} (sys ${median(mine.map((r) => r.edgeSysUs)).toFixed(1).padStart(5)})  client ${median(mine.map((r) => r.clientUs)).toFixed(1).padStart(6)} (sys ${median(mine.map((r) => r.clientSysUs)).toFixed(1).padStart(5)})  sum ${median(mine.map((r) => r.edgeUs + r.clientUs)).toFixed(1).padStart(6)} µs/req  idle ${median(mine.map((r) => r.idlePct)).toFixed(0).padStart(2)}%  bad ${mine.reduce((n, r) => n + r.bad, 0)}  requests ${mine.reduce((n, r) => n + r.requests, warmed.get(build.label) ?? 0)}${probeText}\n`,
      );
    }
    process.stdout.write(pairedTable(builds.map((build) => build.label), results, rounds));
    if (traceGc) {
      // The processes exit first, so what V8 wrote is in the files.
      await children.stopAll(10_000);
      process.stdout.write(gcTable(builds, results));
    }
  } finally {
    await stop();
  }
}

await main();
