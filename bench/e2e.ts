/**
 * The end-to-end benchmark (`npm run bench`): a local target, an edge and a `burrow http` client, and the
 * floors (two Debian nginx, two bare Node relays, a minimal uWS + undici proxy) as child processes; load
 * from this process; every figure beside direct, measured in the same run. Phases:
 *
 * 1. Probes, 1 connection: sequential requests with three senders (undici, Node `http` with a keep-alive
 *    agent, curl reusing one connection), GET 1 KiB down and POST 1 KiB up, answers with `content-length`
 *    and chunked, on every path, interleaved; p50/p99 added vs direct.
 * 2. The matrix, autocannon: GET down and POST up of 1 KiB, 64 KiB (@100 connections) and 1 MiB (@10), both
 *    response shapes, direct then each path, with the CPU time per request of every process on the path
 *    (from /proc); the 1 KiB POSTs repeated for medians.
 * 2b. Floor profile (bench/e2e/floor-profile.ts): POST and GET of 1 KiB and 64 KiB @100 and 1 MiB @10
 *    (content-length; --quick: 1 KiB only) on the tunnel and each floor, per process on the path: CPU user/sys, syscalls by name (perf) and context switches
 *    per request; then a fresh edge and client under `node --cpu-prof`, self time by category per request.
 * 3. Many tenants: N tunnels (real TunnelClients in one process) through the same edge, 2 connections
 *    each, against the same load on one tunnel and direct.
 * 4. Idle tunnels: a fresh edge, 10,000 tunnels connected from one process: connect rate, edge RSS per
 *    tunnel, all still answering afterwards.
 * 5. TCP tunnels: a fresh edge with --tcp-ports, a bulk transfer each way and one-byte round trips on one
 *    connection through `burrow tcp` and through `ssh -R` (bench/e2e/tcp.ts).
 * 6. Open loop (issue 25): 1 KiB POST at one constant offered rate, half the tunnel's measured maximum,
 *    to direct, the tunnel, the baseline, ssh -R and nginx → nginx, latency charged from each request's scheduled time
 *    (bench/e2e/open-loop.ts says why autocannon's `overallRate` cannot do this).
 * 7. HTTPS (issue 25): a second edge with --tls-cert (HTTPS public side, wss to its client), 1 KiB POST
 *    and GET @100 beside direct over plain HTTP, the plain tunnel, nginx → nginx and two bare Node relays
 *    with TLS on both hops (the floors of an encrypted proxy pair: C, and `node:tls` alone) and ssh -R in
 *    the same group.
 * Writes bench/out/e2e-<timestamp>.json and prints the tables and issues 13's and 25's acceptance lines;
 * `npm run bench:results` turns the file into bench/RESULTS.md.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from 'undici';
import { Store } from '../src/store/store.js';
import { makeCa, makeServerCert } from '../test/tls-fixtures.js';
import { BENCH_CAPTURE_QUOTA, burrowEnv, createBenchAccount, edgesAtDefaultQuota, RING_FILL_UPLOADS, RING_SETTLE_REQUESTS, startBurrowEdge, startBurrowHttp } from './e2e/burrow.js';
import { badCount, runLoad, stopCurrentLoad, type LoadResult, type Target } from './e2e/load.js';
import { runOpenLoop, stopOpenLoop } from './e2e/open-loop.js';
import { machineInfo, sourceInfo } from './e2e/machine.js';
import { ensureNginx, startNginxTwoHop, type NginxTwoHop } from './e2e/nginx.js';
import { ensureSsh, SSH_CIPHER, startSshReverse } from './e2e/ssh.js';
import { measureTcpPath, peakMiB, TcpLocal, tcpPathLines, type TcpRecord } from './e2e/tcp.js';
import { KIB, MIB, SHAPES, SMALL, scenarioLabel, type Method, type Scenario } from './e2e/payloads.js';
import { probe, SENDERS, type Sender } from './e2e/probe.js';
import { Children, freePort, type Child, type ExitInfo } from './e2e/processes.js';
import type { ClientLogCounts, FleetDone, HttpsRecord, IdleRecord, OpenLoopRecord, PathInfo, ProbeRecord, RunRecord, TenantRun, TenantsRecord, WarmupRecord } from './e2e/records.js';
import { Sampler, type ProcStats, type WindowStats } from './e2e/sampler.js';
import { summarize, type Summary } from './e2e/summary.js';
import { FLOOR_SCENARIOS, floorProfileLines, QUICK_FLOOR_SCENARIOS, runFloorProfile, type FloorProfileRecord } from './e2e/floor-profile.js';
import { median, round } from './e2e/stats.js';
import { formatNumber, textTable } from './e2e/table.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));
const RELAY_SCRIPT = fileURLToPath(new URL('./e2e/relay.js', import.meta.url));
const PROXY_SCRIPT = fileURLToPath(new URL('./e2e/proxy.js', import.meta.url));
const FLEET_SCRIPT = fileURLToPath(new URL('./e2e/fleet.js', import.meta.url));
/** Tunnels one PRO account may hold (src/store/plans.ts): the fleets spread over this many per account. */
const TUNNELS_PER_ACCOUNT = 25;

const HELP = `
Usage: npm run bench -- [options]        (or: node dist/bench/e2e.js [options])

One run measures, every figure beside direct in the same run (about 22 minutes; --quick about 4):
  1. 1-connection probes (undici, Node http keep-alive, curl reusing its connection): GET 1 KiB and POST
     1 KiB, answers with content-length and chunked, through the tunnel and the floors;
  2. autocannon: GET down / POST up of 1 KiB and 64 KiB @100 connections and 1 MiB @10, both answer
     shapes, direct, tunnel (capture and inspector on), nginx -> nginx, ssh -R (a private OpenSSH sshd
     and ssh, aes128-gcm), two bare Node relays (and the
     minimal uWS + undici proxy for 1 KiB), with CPU µs per request of every process on each path;
  2b. floor profile: POST and GET of 1 KiB and 64 KiB @100 and 1 MiB @10 (content-length; --quick: 1 KiB
     only) on the tunnel, --baseline and the floors:
     per process on the path, CPU µs/req user and system, syscalls/req by name (perf stat; skipped with
     a line where perf is missing or not permitted), context switches/req; then a fresh edge and client
     under node --cpu-prof: self time per request by category and the top functions;
  3. many tenants: --tenants tunnels x 2 connections through one edge vs the same load on one tunnel;
  4. --idle-tunnels idle tunnels on a fresh edge: connect rate and edge RSS per tunnel.
  5. TCP tunnels: --tcp-mib MiB each way through one connection of "burrow tcp" (a fresh edge with
     --tcp-ports) and of ssh -R, and 2,000 one-byte round trips on one open connection of each.
  6. open loop: 1 KiB POST offered at one constant rate, half the tunnel's maximum (the matrix's median
     when it ran, else one autocannon run @100), to direct, the tunnel, --baseline, ssh -R and
     nginx -> nginx; latency charged from each request's scheduled time (corrected for coordinated
     omission); 2 x --duration s per path after min(2, --duration / 2) s of warm-up, at most 3 rounds
     (--repeat);
  7. HTTPS: a second edge with a throwaway certificate (HTTPS public side, wss to its client, capture and
     inspector on), 1 KiB POST and GET @100, beside direct over plain HTTP, nginx -> nginx and two bare
     Node relays with TLS on both hops, and ssh -R in the same group.
Every Burrow edge that captures gets a capture quota no run fills (burrow edge --plans), and each capturing
tunnel's ring laps once with 1,100 uploads of 1 MiB in the warm-up, then twice with 2,200 POSTs of 1 KiB:
every exchange is captured, over pages the capture file already has, as on an edge that has run a while,
and the first rows do not measure the big captures' pages being freed.
Writes bench/out/e2e-<timestamp>.json and prints issues 13's and 25's acceptance lines;
"npm run bench:results" turns it into bench/RESULTS.md.

Options:
  --duration SEC        seconds per autocannon run (default 4; --quick: 1)
  --warmup SEC          seconds of warm-up per path before measuring (default 1; --quick: 0.5)
  --repeat N            rounds of the 1 KiB POST @100 runs and of the probes; medians reported
                        (default 4 for the runs, 3 for the probes; --quick: 1)
  --probe N             probe requests per path, scenario and sender in each round (default 1500;
                        --quick: 200)
  --senders LIST        probe senders (default undici,node-http,curl)
  --onoff               also measure capture off (a second edge, --no-capture) and inspector off
                        (--no-inspect) at 1 KiB POST @100 (issue 6's on/off comparison)
  --tenants N           tunnels in the many-tenant phase, 2 connections each (default 200; 0 skips;
                        --quick: 50)
  --idle-tunnels N      idle tunnels on a fresh edge (default 10000; 0 skips; --quick: 1000)
  --idle-deadline SEC   stop connecting idle tunnels after this long (default 240; --quick: 60)
  --tcp-mib N           MiB each way in the tcp phase (default 256; 0 skips; --quick: 64)
  --no-floors           skip the nginx, ssh -R, relay and proxy paths
  --phases LIST         which phases run: probes,matrix,profile,openloop,https,tenants,idle,tcp (default
                        all; the acceptance lines of a phase left out say "not measured"; the set-up always
                        starts the target, edge, client and floors, so "--phases profile" runs alone;
                        probes, matrix and profile start with the warm-up, which laps the capture rings)
  --pause MS            pause between runs (default 200)
  --max-other-cpu PCT   a group of runs (or a probe) during which processes outside the benchmark, or
                        the hypervisor's other guests (steal), took more than PCT % of a core is run
                        again, after waiting for the machine to be quiet (default 25; 0 turns this off)
  --retries N           how often one group or probe is run again for that reason (default 1); after 9
                        minutes (--quick: 3) the guard stops waiting and rerunning and only records, so a
                        run on a busy machine still ends in about 15 minutes
  --quick               a smoke run: shorter, fewer rounds, smaller fleets
  --burrow DIR          the Burrow checkout whose bin/burrow.js runs (default: this one); it must be built
  --baseline DIR        another built Burrow checkout (e.g. a worktree of main) measured in the same run, as
                        a row beside the floors: its edge (capture on) and client (inspector on)
  --out DIR             where the results JSON goes (default bench/out)
  --keep                keep the temp dir (edge data, client logs, nginx configs) for inspection
  --resummarize FILE    recompute the summary of an existing results file in place (no benchmark run)
  -h, --help            show this help
`;

const PHASES = ['probes', 'matrix', 'profile', 'openloop', 'https', 'tenants', 'idle', 'tcp'] as const;
type Phase = (typeof PHASES)[number];

interface Options {
  durationS: number;
  warmupS: number;
  repeat: number;
  probeRounds: number;
  probeRequests: number;
  senders: Sender[];
  onoff: boolean;
  tenants: number;
  idleTunnels: number;
  idleDeadlineS: number;
  /** MiB each way through a TCP tunnel and `ssh -R` in the tcp phase (0 skips it). */
  tcpMiB: number;
  floors: boolean;
  phases: Phase[];
  pauseMs: number;
  maxOtherCpuPct: number;
  retries: number;
  quick: boolean;
  burrowDir: string;
  /** Another Burrow checkout (built) measured as a row of its own beside this one: `--baseline DIR`. */
  baselineDir: string | null;
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
      probe: { type: 'string' },
      senders: { type: 'string' },
      onoff: { type: 'boolean' },
      tenants: { type: 'string' },
      'idle-tunnels': { type: 'string' },
      'idle-deadline': { type: 'string' },
      'tcp-mib': { type: 'string' },
      'no-floors': { type: 'boolean' },
      phases: { type: 'string' },
      pause: { type: 'string' },
      'max-other-cpu': { type: 'string' },
      retries: { type: 'string' },
      quick: { type: 'boolean' },
      burrow: { type: 'string' },
      baseline: { type: 'string' },
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
  const senders = (values.senders ?? SENDERS.join(',')).split(',').map((part) => part.trim());
  for (const sender of senders) if (!(SENDERS as readonly string[]).includes(sender)) throw new Error(`--senders: ${sender} is not one of ${SENDERS.join(', ')}`);
  const phases = (values.phases ?? PHASES.join(',')).split(',').map((part) => part.trim());
  for (const name of phases) if (!(PHASES as readonly string[]).includes(name)) throw new Error(`--phases: ${name} is not one of ${PHASES.join(', ')}`);
  const repeat = values.repeat === undefined ? null : Math.round(number(values.repeat, 'repeat', 1, 1, 50));
  return {
    durationS: number(values.duration, 'duration', quick ? 1 : 4, 0.2, 600),
    warmupS: number(values.warmup, 'warmup', quick ? 0.5 : 1, 0, 60),
    repeat: repeat ?? (quick ? 1 : 4),
    probeRounds: repeat ?? (quick ? 1 : 3),
    probeRequests: Math.round(number(values.probe, 'probe', quick ? 200 : 1500, 0, 1_000_000)),
    senders: [...new Set(senders)] as Sender[],
    onoff: values.onoff === true,
    tenants: Math.round(number(values.tenants, 'tenants', quick ? 50 : 200, 0, 5_000)),
    idleTunnels: Math.round(number(values['idle-tunnels'], 'idle-tunnels', quick ? 1_000 : 10_000, 0, 100_000)),
    idleDeadlineS: number(values['idle-deadline'], 'idle-deadline', quick ? 60 : 240, 5, 3_600),
    tcpMiB: Math.round(number(values['tcp-mib'], 'tcp-mib', quick ? 64 : 256, 0, 4_096)),
    floors: values['no-floors'] !== true,
    phases: phases as Phase[],
    pauseMs: number(values.pause, 'pause', 200, 0, 60_000),
    maxOtherCpuPct: number(values['max-other-cpu'], 'max-other-cpu', 25, 0, 10_000),
    retries: Math.round(number(values.retries, 'retries', 1, 0, 20)),
    quick,
    burrowDir: resolve(values.burrow ?? ROOT),
    baselineDir: values.baseline === undefined ? null : resolve(values.baseline),
    outDir: resolve(values.out ?? join(ROOT, 'bench', 'out')),
    keep: values.keep === true,
  };
}

/** Recomputes the summary of a results file written earlier (after the summary's rules changed). */
function resummarize(file: string): void {
  const results = JSON.parse(readFileSync(file, 'utf8')) as { kind?: string; version?: number; runs: RunRecord[]; probes: ProbeRecord[]; paths: PathInfo[]; summary: Summary; openloop?: OpenLoopRecord | null; https?: HttpsRecord | null; floorProfile?: FloorProfileRecord | null };
  if (results.kind !== 'burrow-e2e-bench' || (results.version ?? 1) < 2) throw new Error(`${file} is not an end-to-end benchmark results file of version 2`);
  results.summary = summarize(results.runs, results.probes, results.paths, { openloop: results.openloop ?? null, https: results.https ?? null, floorProfile: results.floorProfile ?? null });
  writeFileSync(file, `${JSON.stringify(results, null, 1)}\n`);
  process.stdout.write(`resummarized ${file}\n`);
}

// ---------------------------------------------------------------------------------------------------------
// The set-up: target, edges, accounts, clients, floors.

interface PathConfig extends PathInfo {
  target: Target;
  /** Role → the sampler's name of the process. */
  roles: Record<string, string>;
  /** `burrow http` client whose log counts failed exchanges. */
  clientName: string | null;
}

interface Setup {
  targetPort: number;
  targetPid: number;
  temp: string;
  bin: string;
  paths: PathConfig[];
  /** The edge of the headline tunnel (the many-tenant fleet joins it). */
  edge: { name: string; port: number; dataDir: string; env: NodeJS.ProcessEnv };
  inspectFlag: boolean;
  clientLogs: Map<string, { file: string; offset: number }>;
  floorsMissing: string | null;
  /** Why there is no ssh -R path (null when there is one). */
  sshMissing: string | null;
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

/** Accounts written straight into an edge's data directory before the edge starts; their tokens. */
async function createAccounts(dataDir: string, prefix: string, count: number, plan: 'FREE' | 'PRO'): Promise<string[]> {
  const store = Store.open(dataDir);
  try {
    const created = await Promise.all(Array.from({ length: count }, (_, i) => store.createAccount(`${prefix}-${i}@bench.test`, plan, 'bench')));
    return created.map((entry) => entry.token.token);
  } finally {
    await store.close();
  }
}

function edgeEnv(temp: string, name: string): NodeJS.ProcessEnv {
  return burrowEnv(join(temp, `${name}-config`));
}

async function startEdge(
  bin: string,
  name: string,
  dataDir: string,
  env: NodeJS.ProcessEnv,
  capture: boolean,
  wrap: ((command: string, args: string[]) => { command: string; args: string[] }) | null = null,
  extraArgs: string[] = [],
): Promise<{ child: Child; port: number }> {
  const edge = await startBurrowEdge(children, { bin, name, dataDir, env, edgeArgs: [...(capture ? [] : ['--no-capture']), ...extraArgs], wrap: wrap ?? undefined });
  sampler.track(name, edge.child.pid);
  return edge;
}

/**
 * The baseline row: another checkout's edge and client on the same target, set up only through its own CLI
 * (its account made by its `burrow admin create-account`, so a store format of either side never meets the
 * other's code).
 */
async function startBaseline(dir: string, temp: string, targetPort: number, clientLogs: Map<string, { file: string; offset: number }>): Promise<PathConfig> {
  const bin = join(dir, 'bin', 'burrow.js');
  const source = sourceInfo(dir);
  const name = `baseline ${source.commit?.slice(0, 7) ?? dir}${source.dirtyFiles.length > 0 ? '+' : ''}`;
  const dataDir = join(temp, 'edge-baseline');
  const env = edgeEnv(temp, 'edge-baseline');
  const token = createBenchAccount({ bin, dataDir, email: 'baseline@bench.test', env });
  const { child: edge, port: edgePort } = await startEdge(bin, 'edge-baseline', dataDir, env, true);
  const logFile = join(temp, 'client-baseline.log');
  const { child: client, url } = await startBurrowHttp(children, {
    bin,
    name: 'client-baseline',
    targetPort,
    edgePort,
    token,
    subdomain: 'bench-baseline',
    env: burrowEnv(join(temp, 'client-baseline-config')),
    inspector: /--no-inspect\b/.test(burrowHelp(bin, 'http')),
    stdoutFile: logFile,
  });
  sampler.track('client-baseline', client.pid);
  clientLogs.set('client-baseline', { file: logFile, offset: statSync(logFile).size });
  log(`${name}: ${url} (edge pid ${edge.pid}, client pid ${client.pid})`);
  return {
    id: 'baseline',
    kind: 'floor',
    label: `tunnel, ${name}`,
    processes: ['edge', 'client'],
    target: { origin: `http://127.0.0.1:${edgePort}`, host: `bench-baseline.localhost:${edgePort}` },
    roles: { edge: 'edge-baseline', client: 'client-baseline' },
    clientName: 'client-baseline',
  };
}

async function setUp(options: Options, temp: string): Promise<Setup> {
  const bin = join(options.burrowDir, 'bin', 'burrow.js');
  const inspectFlag = /--no-inspect\b/.test(burrowHelp(bin, 'http'));
  log(`burrow: ${bin}; "burrow http --no-inspect" ${inspectFlag ? 'exists' : 'does not exist: the client runs with its default'}`);

  const { child: target, port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
  sampler.track('target', target.pid);
  const paths: PathConfig[] = [{ id: 'direct', kind: 'direct', label: 'direct', processes: [], target: { origin: `http://127.0.0.1:${targetPort}`, host: null }, roles: {}, clientName: null }];

  const clientLogs = new Map<string, { file: string; offset: number }>();
  let headlineEdge: Setup['edge'] | null = null;
  for (const capture of options.onoff ? [true, false] : [true]) {
    const edgeName = capture ? 'edge-capture' : 'edge-nocapture';
    const dataDir = join(temp, edgeName);
    const env = edgeEnv(temp, edgeName);
    // FREE, as `burrow admin create-account` makes by default: a ring of 1,000 captures, as in every earlier run.
    const [token] = await createAccounts(dataDir, `bench-${capture ? 'c' : 'n'}`, 1, 'FREE');
    const { child: edge, port: edgePort } = await startEdge(bin, edgeName, dataDir, env, capture);
    if (capture) headlineEdge = { name: edgeName, port: edgePort, dataDir, env };
    const inspects: Array<boolean | null> = !inspectFlag ? [null] : options.onoff ? [true, false] : [true];
    for (const inspect of inspects) {
      const id = `${capture ? 'cap' : 'nocap'}${inspect === null ? '' : inspect ? '-insp' : '-noinsp'}`;
      const clientName = `client-${id}`;
      const subdomain = `bench-${id}`;
      const logFile = join(temp, `${clientName}.log`);
      const { child: client, url } = await startBurrowHttp(children, {
        bin,
        name: clientName,
        targetPort,
        edgePort,
        token: token!,
        subdomain,
        env: burrowEnv(join(temp, `${clientName}-config`)),
        // Neither flag for a build without them: the client runs with its default.
        inspector: inspect === true,
        clientArgs: inspect === false ? ['--no-inspect'] : [],
        stdoutFile: logFile,
      });
      sampler.track(clientName, client.pid);
      clientLogs.set(clientName, { file: logFile, offset: statSync(logFile).size });
      const label = `tunnel, capture ${capture ? 'on' : 'off'}${inspect === null ? '' : `, inspector ${inspect ? 'on' : 'off'}`}`;
      paths.push({
        id,
        kind: 'tunnel',
        label,
        processes: ['edge', 'client'],
        capture,
        inspect,
        target: { origin: `http://127.0.0.1:${edgePort}`, host: `${subdomain}.localhost:${edgePort}` },
        roles: { edge: edgeName, client: clientName },
        clientName,
      });
      log(`${label}: ${url} (edge pid ${edge.pid}, client pid ${client.pid})`);
    }
  }

  if (options.baselineDir !== null) paths.push(await startBaseline(options.baselineDir, temp, targetPort, clientLogs));

  let floorsMissing: string | null = null;
  let sshMissing: string | null = 'the floors were left out (--no-floors)';
  if (options.floors) {
    floorsMissing = ensureNginx(ROOT);
    if (floorsMissing === null) {
      paths.push(nginxFloor(await startNginxTwoHop(children, join(temp, 'nginx'), targetPort), 'nginx2', 'nginx → nginx (two hops)'));
    } else log(`nginx floor skipped: ${floorsMissing}`);
    sshMissing = ensureSsh(ROOT);
    if (sshMissing === null) {
      const ssh = await startSshReverse(children, join(temp, 'ssh'), targetPort);
      sampler.track('sshd', ssh.pids.sshd);
      sampler.track('ssh', ssh.pids.ssh);
      paths.push({
        id: 'ssh',
        kind: 'floor',
        label: `ssh -R (OpenSSH, ${SSH_CIPHER.replace('@openssh.com', '')})`,
        processes: ['sshd', 'ssh'],
        target: { origin: `http://127.0.0.1:${ssh.port}`, host: null },
        roles: { sshd: 'sshd', ssh: 'ssh' },
        clientName: null,
      });
      log(`ssh -R: port ${ssh.port} (sshd session ${ssh.pids.sshd}, ssh ${ssh.pids.ssh})`);
    } else log(`ssh -R row skipped: ${sshMissing}`);
    const { child: first, port: firstPort } = await children.spawnServer('relay-1', RELAY_SCRIPT, [String(targetPort)]);
    const { child: second, port: secondPort } = await children.spawnServer('relay-2', RELAY_SCRIPT, [String(firstPort)]);
    sampler.track('relay-1', first.pid);
    sampler.track('relay-2', second.pid);
    paths.push({
      id: 'relays2',
      kind: 'floor',
      label: 'two bare Node relays',
      processes: ['relay-2', 'relay-1'],
      target: { origin: `http://127.0.0.1:${secondPort}`, host: null },
      roles: { 'relay-2': 'relay-2', 'relay-1': 'relay-1' },
      clientName: null,
    });
    const { child: proxy, port: proxyPort } = await children.spawnServer('proxy', PROXY_SCRIPT, [String(targetPort)]);
    sampler.track('proxy', proxy.pid);
    paths.push({
      id: 'proxy',
      kind: 'floor',
      label: 'minimal uWS + undici proxy (one process)',
      processes: ['proxy'],
      target: { origin: `http://127.0.0.1:${proxyPort}`, host: null },
      roles: { proxy: 'proxy' },
      clientName: null,
    });
  }
  sampler.start();
  return { targetPort, targetPid: target.pid, temp, bin, paths, edge: headlineEdge!, inspectFlag, clientLogs, floorsMissing, sshMissing };
}

const EXCHANGE_LINE = /^[A-Z]+ \S+ (\d{3}|ERR) [\d.]+ms/;
const CANCELLED = /(cancelled by the edge|the public client left before the response \(the public client closed the connection\))$/;

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
    // autocannon drops its in-flight requests when a run stops: the client says so, and that is no failure.
    if (status === 'ERR' && CANCELLED.test(line)) counts.cancelled++;
    else {
      counts.failed++;
      if (counts.sample.length < 5) counts.sample.push(line);
    }
  }
  return counts;
}

// ---------------------------------------------------------------------------------------------------------
// Shared-machine guard.

const runs: RunRecord[] = [];
/** Runs thrown away because other processes loaded the machine meanwhile; kept for the record. */
const discarded: RunRecord[] = [];
let runCounter = 0;
/** Client-log counts of the traffic outside measured runs (warm-up, probe), per phase and client. */
const otherClientLog: Array<{ phase: string; client: string } & ClientLogCounts> = [];
const warmups: WarmupRecord[] = [];
const probes: ProbeRecord[] = [];
const discardedProbes: ProbeRecord[] = [];
let origin = Date.now();

function drainClientLogs(setup: Setup, phase: string): void {
  for (const [client, entry] of setup.clientLogs) {
    const counts = readClientLog(entry);
    otherClientLog.push({ phase, client, ...counts });
    if (counts.failed > 0) log(`  !! ${client} logged ${counts.failed} failed exchanges during ${phase}, e.g. ${counts.sample[0]}`);
  }
}

/** What else used the machine during a window, percent of one core (nulls off Linux). */
interface Disturbance {
  systemCpuPct: number | null;
  otherCpuPct: number | null;
  stealCpuPct: number | null;
  interruptCpuPct: number | null;
}

/** CPU time of the runner's children that have ended and been reaped (cutime + cstime of /proc/self/stat), µs. */
function reapedChildrenCpuUs(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[13]) + Number(fields[14])) / sampler.hz) * 1e6;
  } catch {
    return 0;
  }
}

/** The runner's own CPU (`process.cpuUsage` over `seconds`), percent of one core. */
function percentOfCore(used: NodeJS.CpuUsage, seconds: number): number {
  return ((used.user + used.system) / 1e6 / seconds) * 100;
}

/** The disturbance over a sampler window, given the runner's own CPU over it (percent of one core). */
function disturbance(stats: WindowStats, runnerCpuPct: number): Disturbance {
  const ours = Object.values(stats.procs).reduce((total, proc) => total + (proc.cpuPct ?? 0), runnerCpuPct);
  return {
    systemCpuPct: stats.systemCpuPct,
    otherCpuPct: stats.systemCpuPct === null ? null : Math.max(0, stats.systemCpuPct - ours),
    stealCpuPct: stats.stealCpuPct,
    interruptCpuPct: stats.interruptCpuPct,
  };
}

async function currentDisturbance(ms: number): Promise<Disturbance> {
  const window = sampler.window();
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await sleep(ms);
  const used = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return disturbance(window.end(), percentOfCore(used, seconds));
}

/**
 * After this moment the guard only records: no more waiting for a quiet machine and no reruns, so a run
 * on a busy machine still ends in about the time it was planned for (the records keep who disturbed it).
 */
let guardUntil = Number.POSITIVE_INFINITY;
let guardEndedSaid = false;

function guardActive(): boolean {
  if (Date.now() <= guardUntil) return true;
  if (!guardEndedSaid) {
    guardEndedSaid = true;
    log('  (time budget of the shared-machine guard spent: from here on runs are kept as they come, with their disturbance recorded)');
  }
  return false;
}

function spoiled(options: Options, ...windows: Disturbance[]): string | null {
  if (options.maxOtherCpuPct <= 0 || !guardActive()) return null;
  const other = Math.max(...windows.map((window) => window.otherCpuPct ?? 0));
  const steal = Math.max(...windows.map((window) => window.stealCpuPct ?? 0));
  if (other > options.maxOtherCpuPct) return `other processes used ${formatNumber(other)}% CPU (over ${options.maxOtherCpuPct}%)`;
  if (steal > options.maxOtherCpuPct) return `the hypervisor took ${formatNumber(steal)}% CPU for other guests (steal, over ${options.maxOtherCpuPct}%)`;
  return null;
}

async function waitQuiet(options: Options, maxMs = 10_000, windowMs = 300): Promise<void> {
  if (options.maxOtherCpuPct <= 0 || !guardActive()) return;
  const deadline = Date.now() + maxMs;
  let reason: string | null = null;
  while (Date.now() < deadline) {
    checkAbort();
    reason = spoiled(options, await currentDisturbance(windowMs));
    if (reason === null) return;
  }
  log(`  (the machine did not get quiet within ${maxMs / 1000} s: ${reason}; going on)`);
}

// ---------------------------------------------------------------------------------------------------------
// Phase 1: probes.

/** The probe's scenarios: GET 1 KiB down and POST 1 KiB up, each answer shape. */
function probeScenarios(): Scenario[] {
  const list: Scenario[] = [];
  for (const method of ['GET', 'POST'] as Method[]) for (const shape of SHAPES) list.push({ method, size: SMALL, shape });
  return list;
}

async function runProbes(setup: Setup, options: Options): Promise<void> {
  if (options.probeRequests <= 0 || options.senders.length === 0) return;
  const paths = new Map<string, Target>(setup.paths.map((p) => [p.id, p.target]));
  log(`\nprobes, 1 connection: ${options.probeRounds} round(s) of ${options.probeRequests} sequential requests per path, scenario and sender (${options.senders.join(', ')})`);
  for (let roundNo = 1; roundNo <= options.probeRounds; roundNo++) {
    for (const sender of options.senders) {
      for (const scenario of probeScenarios()) {
        for (let attempt = 0; ; attempt++) {
          checkAbort();
          await waitQuiet(options, 5_000);
          const window = sampler.window();
          const cpu = process.cpuUsage();
          const curlBefore = reapedChildrenCpuUs();
          const started = process.hrtime.bigint();
          const requests = sender === 'curl' ? Math.max(100, Math.round(options.probeRequests / 2)) : options.probeRequests;
          const results = await probe(paths, scenario, { requests, warmup: Math.min(200, requests), block: 100 }, () => aborting !== null, sender);
          const used = process.cpuUsage(cpu);
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          // curl runs as short-lived children of the runner: their CPU is the load generator's, not foreign load.
          const curlUs = reapedChildrenCpuUs() - curlBefore;
          const during = disturbance(window.end(), percentOfCore({ user: used.user + curlUs, system: used.system }, seconds));
          const reason = spoiled(options, during);
          const direct = results.get('direct');
          log(
            `  r${roundNo} ${sender.padEnd(9)} ${scenarioLabel(scenario).padEnd(28)} ` +
              [...results]
                .map(([path, r]) => `${path} ${formatNumber(r.p50)}/${formatNumber(r.p99)}${path !== 'direct' && direct !== undefined ? ` (+${formatNumber(r.p50 - direct.p50)})` : ''}${r.errors > 0 ? ` !!${r.errors} errors` : ''}${r.newConnections > 0 ? ` !!${r.newConnections} new connections` : ''}`)
                .join('; ') +
              (reason === null ? '' : `  !! ${reason}`),
          );
          const keep = reason === null || attempt >= options.retries;
          for (const [path, result] of results) {
            (keep ? probes : discardedProbes).push({
              round: roundNo,
              sender,
              method: scenario.method,
              size: scenario.size,
              shape: scenario.shape,
              path,
              result,
              otherCpuPct: during.otherCpuPct,
              stealCpuPct: during.stealCpuPct,
              discarded: keep ? null : reason,
            });
          }
          if (keep) break;
          log('  discarded that probe; waiting for a quiet machine and probing again');
        }
      }
    }
    drainClientLogs(setup, `probe round ${roundNo}`);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Phase 2: the matrix.

function scenarioName(scenario: Scenario, connections: number): string {
  return `${scenarioLabel(scenario)} @${connections}`;
}

async function measure(setup: Setup, options: Options, roundNo: number, scenario: Scenario, connections: number, path: PathConfig, pairedWith: number | null): Promise<RunRecord> {
  checkAbort();
  const window = sampler.window();
  const cpu = process.cpuUsage();
  const wall = process.hrtime.bigint();
  const startedAtS = (Date.now() - origin) / 1000;
  const load = await runLoad(path.target, scenario, connections, options.durationS);
  const seconds = Number(process.hrtime.bigint() - wall) / 1e9;
  const used = process.cpuUsage(cpu);
  const stats = window.end();
  const procs: Record<string, ProcStats> = { target: stats.procs.target! };
  for (const [role, name] of Object.entries(path.roles)) procs[role] = stats.procs[name]!;
  const runnerCpuPct = percentOfCore(used, seconds);
  const record: RunRecord = {
    seq: ++runCounter,
    round: roundNo,
    scenario: scenarioName(scenario, connections),
    method: scenario.method,
    size: scenario.size,
    shape: scenario.shape,
    connections,
    path: path.id,
    capture: path.capture ?? null,
    inspect: path.inspect ?? null,
    pairedWith,
    startedAtS: Math.round(startedAtS * 10) / 10,
    load,
    procs,
    runnerCpuPct,
    ...disturbance(stats, runnerCpuPct),
    clientLog: null,
    discarded: null,
  };
  if (options.pauseMs > 0) await sleep(options.pauseMs);
  if (path.clientName !== null) record.clientLog = readClientLog(setup.clientLogs.get(path.clientName)!);
  printRun(record, path);
  checkAbort();
  return record;
}

/** Direct, then every path of the group (their order rotated by round); run again when foreign load spoiled it. */
async function measureGroup(setup: Setup, options: Options, roundNo: number, scenario: Scenario, connections: number, paths: PathConfig[], into: RunRecord[] = runs): Promise<void> {
  const direct = setup.paths[0]!;
  await waitQuiet(options, 10_000, 250);
  const order = paths.map((_, i) => paths[(i + roundNo - 1) % paths.length]!);
  for (let attempt = 0; ; attempt++) {
    const directRun = await measure(setup, options, roundNo, scenario, connections, direct, null);
    const group = [directRun];
    for (const path of order) group.push(await measure(setup, options, roundNo, scenario, connections, path, directRun.seq));
    const reason = spoiled(options, ...group);
    if (reason === null || attempt >= options.retries) {
      into.push(...group);
      if (reason !== null) log(`  (kept #${directRun.seq}..#${group[group.length - 1]!.seq} although ${reason}: out of retries)`);
      return;
    }
    for (const run of group) run.discarded = reason;
    discarded.push(...group);
    log(`  discarded #${directRun.seq}..#${group[group.length - 1]!.seq}: ${reason}; waiting for a quiet machine and running the group again`);
    await waitQuiet(options);
  }
}

/** The matrix: sizes × directions × answer shapes, and the connections each size runs at. */
function matrix(): Array<{ scenario: Scenario; connections: number }> {
  const list: Array<{ scenario: Scenario; connections: number }> = [];
  for (const method of ['POST', 'GET'] as Method[]) {
    for (const [size, connections] of [
      [SMALL, 100],
      [64 * KIB, 100],
      [MIB, 10],
    ] as const) {
      for (const shape of SHAPES) list.push({ scenario: { method, size, shape }, connections });
    }
  }
  return list;
}

function isHeadline(scenario: Scenario, connections: number): boolean {
  return scenario.method === 'POST' && scenario.size === SMALL && connections === 100;
}

async function warmUp(setup: Setup, options: Options): Promise<void> {
  if (options.warmupS <= 0) return;
  log(
    `\nwarm-up: ${options.warmupS} s per path, 1 KiB POST and GET @100; then ${formatNumber(RING_FILL_UPLOADS)} uploads of 1 MiB @10 and ${formatNumber(RING_SETTLE_REQUESTS)} POSTs of 1 KiB @100 through each capturing tunnel, lapping its capture ring`,
  );
  for (const path of setup.paths) {
    for (const method of ['POST', 'GET'] as Method[]) {
      checkAbort();
      const load = await runLoad(path.target, { method, size: SMALL, shape: 'length' }, 100, options.warmupS);
      warmups.push({ path: path.id, method, connections: 100, load });
      if (badCount(load) > 0) log(`  warm-up ${path.id} ${method}: errors ${load.errors} timeouts ${load.timeouts} non2xx ${load.non2xx} mismatches ${load.mismatches}`);
    }
  }
  // Each capturing tunnel's ring laps once with 1 MiB uploads (RING_FILL_UPLOADS): the rows then measure
  // captures written over pages the capture file has, as on an edge that has run a while. Then twice with
  // 1 KiB POSTs (RING_SETTLE_REQUESTS), so the first rows do not measure the big captures' pages being freed.
  for (const path of setup.paths) {
    if (path.kind !== 'tunnel' || path.capture !== true) continue;
    checkAbort();
    const started = Date.now();
    const load = await runLoad(path.target, { method: 'POST', size: MIB, shape: 'length' }, 10, 0, RING_FILL_UPLOADS);
    warmups.push({ path: path.id, method: 'POST', connections: 10, load, purpose: 'ring-fill' });
    if (badCount(load) > 0) log(`  ring fill ${path.id}: errors ${load.errors} timeouts ${load.timeouts} non2xx ${load.non2xx} mismatches ${load.mismatches}`);
    const settle = await runLoad(path.target, { method: 'POST', size: SMALL, shape: 'length' }, 100, 0, RING_SETTLE_REQUESTS);
    warmups.push({ path: path.id, method: 'POST', connections: 100, load: settle, purpose: 'ring-settle' });
    if (badCount(settle) > 0) log(`  ring settle ${path.id}: errors ${settle.errors} timeouts ${settle.timeouts} non2xx ${settle.non2xx} mismatches ${settle.mismatches}`);
    log(
      `  ${path.id}: its capture ring lapped with ${formatNumber(load.requests)} uploads of 1 MiB, then ${formatNumber(settle.requests)} POSTs of 1 KiB, in ${formatNumber((Date.now() - started) / 1000, 1)} s`,
    );
  }
  await sleep(Math.max(options.pauseMs, 100));
  drainClientLogs(setup, 'warm-up');
}

async function runMatrix(setup: Setup, options: Options): Promise<void> {
  const headlineTunnel = setup.paths.find((p) => p.kind === 'tunnel' && p.capture === true && p.inspect !== false)!;
  const floors = setup.paths.filter((p) => p.kind === 'floor');
  const onoffTunnels = setup.paths.filter((p) => p.kind === 'tunnel' && p !== headlineTunnel);
  log(`\nthe matrix, autocannon ${options.durationS} s per run; 1 KiB POST @100 in ${options.repeat} round(s)`);
  for (let roundNo = 1; roundNo <= options.repeat; roundNo++) {
    for (const { scenario, connections } of matrix()) {
      const headline = isHeadline(scenario, connections);
      if (roundNo > 1 && !headline) continue;
      // The one-process proxy gathers whole bodies: a floor row for the 1 KiB scenarios only.
      const paths = [headlineTunnel, ...floors.filter((p) => p.id !== 'proxy' || scenario.size === SMALL), ...(headline ? onoffTunnels : [])];
      await measureGroup(setup, options, roundNo, scenario, connections, paths);
    }
  }
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function printRun(record: RunRecord, path: PathConfig): void {
  const l = record.load;
  const cpu = Object.entries(record.procs)
    .map(([role, stats]) => `${role} ${formatNumber(stats.cpuPct === null ? null : ((stats.cpuPct / 100) * 1e6) / Math.max(1, l.reqPerSec))}`)
    .join(' ');
  log(
    `  #${String(record.seq).padStart(3)} ${record.scenario.padEnd(32)} ${path.label.padEnd(40)} ` +
      `${formatNumber(l.reqPerSec).padStart(7)} req/s  p50 ${l.latencyMs.p50} ms  p99 ${l.latencyMs.p99} ms  µs/req: ${cpu}` +
      (record.otherCpuPct !== null && record.otherCpuPct > 20 ? `  !! other processes used ${formatNumber(record.otherCpuPct)}% CPU` : '') +
      (record.stealCpuPct !== null && record.stealCpuPct > 20 ? `  !! steal ${formatNumber(record.stealCpuPct)}%` : '') +
      (badCount(l) > 0 ? `  !! errors ${l.errors} timeouts ${l.timeouts} non2xx ${l.non2xx} mismatches ${l.mismatches}` : '') +
      (record.clientLog !== null && record.clientLog.failed > 0 ? `  !! client logged ${record.clientLog.failed} failed exchanges, e.g. ${record.clientLog.sample[0]}` : ''),
  );
}

// ---------------------------------------------------------------------------------------------------------
// Phases 3 and 4: many tenants, idle tunnels.

/** `ulimit -n`, soft and hard, as this process has it. */
function fdLimits(): { soft: number | null; hard: number | null } {
  const read = (flag: string): number | null => {
    const out = spawnSync('sh', ['-c', `ulimit ${flag}n`], { encoding: 'utf8' }).stdout?.trim() ?? '';
    return out === 'unlimited' ? Number.MAX_SAFE_INTEGER : /^\d+$/.test(out) ? Number(out) : null;
  };
  return { soft: read('-S'), hard: read('-H') };
}

/** Starts a fleet of tunnel clients and resolves with its "done" line; `drops` counts its later drop lines. */
/**
 * The fleet's TunnelClients must speak the measured edge's tunnel protocol: with `--burrow DIR` they are
 * that checkout's (its built dist/bench/e2e/fleet.js), else this one's.
 */
function fleetScript(burrowDir: string): string {
  const theirs = join(burrowDir, 'dist', 'bench', 'e2e', 'fleet.js');
  return burrowDir !== ROOT && existsSync(theirs) ? theirs : FLEET_SCRIPT;
}

async function startFleet(
  name: string,
  plan: { edge: string; targetPort: number; prefix: string; concurrency: number; deadlineMs: number; accounts: Array<{ token: string; tunnels: number }> },
  temp: string,
  wrap: ((command: string, args: string[]) => { command: string; args: string[] }) | null,
  progress: (line: Record<string, unknown>) => void,
  burrowDir: string,
): Promise<{ child: Child; done: FleetDone; drops: () => number }> {
  const file = join(temp, `${name}.json`);
  writeFileSync(file, JSON.stringify(plan));
  const script = fleetScript(burrowDir);
  const spawned = wrap === null ? { command: process.execPath, args: [script, file] } : wrap(process.execPath, [script, file]);
  const child = children.spawn({ name, command: spawned.command, args: spawned.args, stdinPipe: true });
  sampler.track(name, child.pid);
  let drops = 0;
  let pending = '';
  let resolveDone: (done: FleetDone) => void = () => undefined;
  const done = new Promise<FleetDone>((resolveFn) => {
    resolveDone = resolveFn;
  });
  // Read line by line as it comes, so the fleet never blocks on a full pipe.
  child.onOutput((text) => {
    pending += text;
    let newline: number;
    while ((newline = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      if (!line.startsWith('{')) continue;
      try {
        const event = JSON.parse(line) as Record<string, unknown>;
        if (event.event === 'done') resolveDone(event as unknown as FleetDone);
        else if (event.event === 'drop') drops++;
        else if (event.event === 'progress') progress(event);
      } catch {
        // stderr text that happens to start with a brace
      }
    }
  });
  const exited = child.exited.then((exit) => {
    throw new Error(`${name} exited (code ${exit.code}, signal ${exit.signal}) before it was done: ${child.describeOutput()}`);
  });
  const timeout = sleep(plan.deadlineMs + 60_000).then(() => {
    throw new Error(`${name}: no "done" within ${plan.deadlineMs / 1000 + 60} s`);
  });
  const result = await Promise.race([done, exited, timeout]);
  return { child, done: result, drops: () => drops };
}

function accountsFor(tokens: string[], tunnels: number): Array<{ token: string; tunnels: number }> {
  return tokens.map((token, i) => ({ token, tunnels: Math.max(0, Math.min(TUNNELS_PER_ACCOUNT, tunnels - i * TUNNELS_PER_ACCOUNT)) })).filter((a) => a.tunnels > 0);
}

/**
 * N tunnels of a fleet process on the headline edge, 2 connections each, against the same load generator
 * (N autocannon instances × 2 connections) all on one tunnel of the same fleet, and direct.
 */
async function runTenants(setup: Setup, options: Options): Promise<TenantsRecord | null> {
  if (options.tenants <= 0) return null;
  const tunnels = options.tenants;
  const connectionsEach = 2;
  const scenario: Scenario = { method: 'POST', size: SMALL, shape: 'length' };
  const durationS = options.quick ? 2 : 5;
  const record: TenantsRecord = { tunnels, connectionsEach, scenario: scenarioLabel(scenario), durationS, fleet: null, runs: [], drops: 0, error: null };
  log(`\nmany tenants: ${tunnels} tunnels (one process of TunnelClients, no inspector) + 1 for the one-tunnel baseline, on ${setup.edge.name}; ${tunnels} autocannon instances × ${connectionsEach} connections, ${scenarioLabel(scenario)}`);
  // The edge reads accounts from its data directory on each connect: written beside the running edge, as `burrow admin` does.
  const tokens = await createAccounts(setup.edge.dataDir, 'tenant', Math.ceil((tunnels + 1) / TUNNELS_PER_ACCOUNT), 'PRO');
  const fleet = await startFleet(
    'fleet',
    { edge: `http://127.0.0.1:${setup.edge.port}`, targetPort: setup.targetPort, prefix: 'tenant', concurrency: 16, deadlineMs: 60_000, accounts: accountsFor(tokens, tunnels + 1) },
    setup.temp,
    null,
    () => undefined,
    options.burrowDir,
  );
  record.fleet = fleet.done;
  log(`  fleet: ${fleet.done.connected} tunnels up in ${formatNumber(fleet.done.ms)} ms (${fleet.done.failed} failed${fleet.done.errors.length > 0 ? `: ${fleet.done.errors[0]!.message}` : ''})`);
  if (fleet.done.connected < tunnels + 1) {
    record.error = `only ${fleet.done.connected} of ${tunnels + 1} tunnels connected`;
    await fleet.child.stop();
    return record;
  }
  const edgeOrigin = `http://127.0.0.1:${setup.edge.port}`;
  const host = (k: number): string => `tenant-${k}.localhost:${setup.edge.port}`;
  const shapes: Array<{ path: string; tunnels: number; target: (i: number) => Target }> = [
    { path: 'direct', tunnels: 0, target: () => ({ origin: `http://127.0.0.1:${setup.targetPort}`, host: null }) },
    { path: 'one tunnel', tunnels: 1, target: () => ({ origin: edgeOrigin, host: host(0) }) },
    { path: `${tunnels} tunnels`, tunnels, target: (i) => ({ origin: edgeOrigin, host: host(i + 1) }) },
  ];
  // Round 0 warms both tunnel shapes up and is not counted: without it the first tunnel run of the
  // phase met cold code in the fleet and the edge (one tunnel at 4,333 req/s in round 1, 6,609 in round
  // 2 of the same run), and whichever shape came first looked worse.
  const rounds = options.quick ? 1 : 3;
  const warmupS = Math.max(options.warmupS, options.quick ? 1 : 2);
  for (let roundNo = 0; roundNo <= rounds; roundNo++) {
    const order = roundNo === 0 ? [shapes[1]!, shapes[2]!] : roundNo % 2 === 1 ? shapes : [shapes[0]!, shapes[2]!, shapes[1]!];
    const runSeconds = roundNo === 0 ? warmupS : durationS;
    for (const shape of order) {
      checkAbort();
      await waitQuiet(options, 5_000);
      const window = sampler.window();
      const cpu = process.cpuUsage();
      const wall = process.hrtime.bigint();
      const loads: LoadResult[] = await Promise.all(Array.from({ length: tunnels }, (_, i) => runLoad(shape.target(i), scenario, connectionsEach, runSeconds)));
      const seconds = Number(process.hrtime.bigint() - wall) / 1e9;
      const runnerPct = percentOfCore(process.cpuUsage(cpu), seconds);
      const stats = window.end();
      const requests = loads.reduce((total, l) => total + l.requests, 0);
      const reqPerSec = loads.reduce((total, l) => total + l.reqPerSec, 0);
      const us = (pct: number | null | undefined): number | null => (pct === null || pct === undefined || reqPerSec <= 0 ? null : Math.round(((pct / 100) * 1e6) / reqPerSec * 10) / 10);
      const dist = disturbance(stats, runnerPct);
      const run: TenantRun = {
        round: roundNo,
        path: shape.path,
        tunnels: shape.tunnels,
        instances: tunnels,
        connectionsEach,
        reqPerSec,
        requests,
        errors: loads.reduce((t, l) => t + l.errors, 0),
        timeouts: loads.reduce((t, l) => t + l.timeouts, 0),
        non2xx: loads.reduce((t, l) => t + l.non2xx, 0),
        mismatches: loads.reduce((t, l) => t + l.mismatches, 0),
        cpuUsPerRequest: { edge: shape.tunnels === 0 ? null : us(stats.procs[setup.edge.name]?.cpuPct), fleet: shape.tunnels === 0 ? null : us(stats.procs.fleet?.cpuPct), target: us(stats.procs.target?.cpuPct), runner: us(runnerPct) },
        otherCpuPct: dist.otherCpuPct,
        stealCpuPct: dist.stealCpuPct,
      };
      record.runs.push(run);
      const bad = run.errors + run.timeouts + run.non2xx + run.mismatches;
      log(
        `  ${roundNo === 0 ? 'warm-up' : `r${roundNo}`} ${shape.path.padEnd(12)} ${formatNumber(reqPerSec).padStart(7)} req/s over ${tunnels}×${connectionsEach} connections  µs/req edge ${formatNumber(run.cpuUsPerRequest.edge)} fleet ${formatNumber(run.cpuUsPerRequest.fleet)} target ${formatNumber(run.cpuUsPerRequest.target)}` +
          (bad > 0 ? `  !! errors ${run.errors} timeouts ${run.timeouts} non2xx ${run.non2xx} mismatches ${run.mismatches}` : ''),
      );
      if (options.pauseMs > 0) await sleep(options.pauseMs);
    }
  }
  record.drops = fleet.drops();
  await fleet.child.stop();
  return record;
}

/** A fresh edge and a fleet of idle tunnels: connect rate, and what each tunnel costs the edge in memory. */
async function runIdle(setup: Setup, options: Options): Promise<IdleRecord | null> {
  const planned = options.idleTunnels;
  if (planned <= 0) return null;
  const limits = fdLimits();
  // Each tunnel is one socket in the fleet and one in the edge, plus the edge's and Node's own.
  const needed = planned + 1_024;
  let raised = false;
  let children_: number | null = limits.soft;
  let wrap: ((command: string, args: string[]) => { command: string; args: string[] }) | null = null;
  if (limits.soft !== null && limits.soft < needed) {
    const to = limits.hard === null ? needed : Math.min(limits.hard, needed);
    raised = true;
    children_ = to;
    wrap = (command, args) => ({ command: 'sh', args: ['-c', `ulimit -n ${to} && exec "$0" "$@"`, command, ...args] });
  }
  const concurrency = 32;
  const record: IdleRecord = {
    planned,
    deadlineS: options.idleDeadlineS,
    concurrency,
    fdLimit: { soft: limits.soft, hard: limits.hard, children: children_, raised },
    fleet: null,
    edgeRssBeforeMiB: null,
    edgeRssAfterMiB: null,
    edgeAnonBeforeMiB: null,
    edgeAnonAfterMiB: null,
    edgeHwmMiB: null,
    edgeKiBPerTunnel: null,
    fleetRssMiB: null,
    edgeCpuMsPerConnect: null,
    drops: 0,
    heldS: options.quick ? 3 : 10,
    spotCheck: { tried: 0, ok: 0, failures: [] },
    error: null,
  };
  log(
    `\nidle tunnels: ${planned} on a fresh edge (capture on), one fleet process, ${concurrency} connects at a time, at most ${options.idleDeadlineS} s; ` +
      `ulimit -n ${limits.soft}/${limits.hard}${raised ? `, raised to ${children_} for the edge and the fleet` : ' (enough: not raised)'}`,
  );
  const dataDir = join(setup.temp, 'edge-idle');
  const env = edgeEnv(setup.temp, 'edge-idle');
  const tokens = await createAccounts(dataDir, 'idle', Math.ceil(planned / TUNNELS_PER_ACCOUNT), 'PRO');
  const { child: edge, port } = await startEdge(setup.bin, 'edge-idle', dataDir, env, true, wrap);
  await sleep(1_000);
  const rssOf = (pid: number): { rss: number; anon: number; hwm: number } | null => {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kib = (name: string): number => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)![1]) / 1024;
      return { rss: kib('VmRSS'), anon: kib('RssAnon'), hwm: kib('VmHWM') };
    } catch {
      return null;
    }
  };
  const before = rssOf(edge.pid);
  record.edgeRssBeforeMiB = round(before?.rss ?? Number.NaN, 1);
  record.edgeAnonBeforeMiB = round(before?.anon ?? Number.NaN, 1);
  const window = sampler.window();
  let lastProgress = 0;
  let fleet: Awaited<ReturnType<typeof startFleet>> | null = null;
  try {
    fleet = await startFleet(
      'fleet-idle',
      { edge: `http://127.0.0.1:${port}`, targetPort: setup.targetPort, prefix: 'idle', concurrency, deadlineMs: options.idleDeadlineS * 1000, accounts: accountsFor(tokens, planned) },
      setup.temp,
      wrap,
      (event) => {
        const ms = Number(event.ms);
        if (ms - lastProgress >= 10_000) {
          lastProgress = ms;
          log(`  ${formatNumber(ms / 1000)} s: ${event.connected} connected, ${event.failed} failed; edge ${formatNumber(rssOf(edge.pid)?.rss, 1)} MiB, fleet ${event.rssMiB} MiB`);
        }
      },
      options.burrowDir,
    );
    const stats = window.end();
    record.fleet = fleet.done;
    const edgeCpuS = ((stats.procs['edge-idle']?.cpuPct ?? Number.NaN) / 100) * (fleet.done.ms / 1000);
    record.edgeCpuMsPerConnect = fleet.done.connected > 0 ? round((edgeCpuS * 1000) / fleet.done.connected, 2) : null;
    log(`  ${fleet.done.connected} of ${planned} connected in ${formatNumber(fleet.done.ms / 1000, 1)} s (${formatNumber(fleet.done.perSecond)} tunnels/s), ${fleet.done.failed} failed${fleet.done.errors.length > 0 ? `: ${fleet.done.errors.map((e) => `${e.count}× ${e.message}`).join('; ')}` : ''}`);
    await sleep(record.heldS * 1000);
    const after = rssOf(edge.pid);
    record.edgeRssAfterMiB = round(after?.rss ?? Number.NaN, 1);
    record.edgeHwmMiB = round(after?.hwm ?? Number.NaN, 1);
    record.edgeAnonAfterMiB = round(after?.anon ?? Number.NaN, 1);
    record.fleetRssMiB = round(rssOf(fleet.child.pid)?.rss ?? Number.NaN, 1);
    if (after !== null && record.edgeRssBeforeMiB !== null && fleet.done.connected > 0) record.edgeKiBPerTunnel = round(((after.rss - record.edgeRssBeforeMiB) * 1024) / fleet.done.connected, 1);
    record.drops = fleet.drops();
    // They still answer: one GET through a sample of them, spread over the fleet.
    const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1 });
    try {
      const sample = Math.min(100, fleet.done.connected);
      for (let i = 0; i < sample; i++) {
        const k = Math.floor((i * fleet.done.connected) / sample);
        record.spotCheck.tried++;
        try {
          const response = await client.request({ path: '/bench/length/1024', method: 'GET', headers: { host: `idle-${k}.localhost:${port}` } });
          await response.body.text();
          if (response.statusCode === 200) record.spotCheck.ok++;
          else if (record.spotCheck.failures.length < 5) record.spotCheck.failures.push(`idle-${k}: ${response.statusCode}`);
        } catch (error) {
          if (record.spotCheck.failures.length < 5) record.spotCheck.failures.push(`idle-${k}: ${(error as Error).message}`);
        }
      }
    } finally {
      await client.close().catch(() => client.destroy());
    }
    log(
      `  held ${record.heldS} s: edge RSS ${record.edgeRssBeforeMiB} → ${record.edgeRssAfterMiB} MiB (anonymous ${record.edgeAnonBeforeMiB} → ${record.edgeAnonAfterMiB}, HWM ${record.edgeHwmMiB}), ${formatNumber(record.edgeKiBPerTunnel, 1)} KiB per tunnel; fleet ${record.fleetRssMiB} MiB; ` +
        `${record.drops} drops; spot check ${record.spotCheck.ok}/${record.spotCheck.tried} answered`,
    );
  } catch (error) {
    record.error = (error as Error).message.split('\n')[0]!;
    log(`  !! ${record.error}`);
  } finally {
    // The fleet first (its sockets close, the edge forgets the tunnels), then the edge.
    if (fleet !== null) await fleet.child.stop();
    else children.all.find((c) => c.name === 'fleet-idle')?.process.kill('SIGKILL');
    await edge.stop(20_000);
  }
  return record;
}

// ---------------------------------------------------------------------------------------------------------
// Output.

function printSummary(summary: Summary): void {
  if (summary.groups.length > 0) log('\nThe matrix: every path beside direct (medians; CPU µs per request of each process on the path, from /proc):');
  if (summary.groups.length > 0) log(
    textTable(
      ['scenario', 'path', 'n', 'direct req/s', 'req/s', 'of direct', 'paired', 'µs/req on the path', 'target (direct)', 'bad'],
      summary.groups.map((g) => [
        g.scenario,
        g.label,
        g.runs,
        formatNumber(g.direct.reqPerSec),
        formatNumber(g.tunnel.reqPerSec),
        formatNumber(g.ratio, 3),
        formatNumber(g.pairedRatio, 3),
        Object.entries(g.cpuUsPerRequest)
          .filter(([role]) => !['target', 'runner', 'directTarget', 'directRunner', 'path'].includes(role))
          .map(([role, us]) => `${role} ${formatNumber(us)}`)
          .join(' + ') + ` = ${formatNumber(g.cpuUsPerRequest.path)}`,
        `${formatNumber(g.cpuUsPerRequest.target)} (${formatNumber(g.cpuUsPerRequest.directTarget)})`,
        g.errors + g.timeouts + g.non2xx + g.mismatches,
      ]),
    ),
  );
  if (summary.probes.length > 0) {
    log('\nProbes, 1 connection, sequential (µs, medians over rounds):');
    log(
      textTable(
        ['sender', 'scenario', 'path', 'samples', 'p50', 'p99', '+p50', '+p99', 'errors', 'new conns'],
        summary.probes.map((p) => [p.sender, scenarioLabel(p), p.path, p.samples, formatNumber(p.p50Us), formatNumber(p.p99Us), p.addedP50Us === null ? '' : formatNumber(p.addedP50Us), p.addedP99Us === null ? '' : formatNumber(p.addedP99Us), p.errors, p.newConnections]),
      ),
    );
  }
  const open = summary.openloop;
  if (open) {
    log(`\nOpen loop at ${formatNumber(open.rate)} req/s offered to every path (half of ${formatNumber(open.tunnelMaxReqPerSec)}), latency from the schedule (µs, medians over rounds):`);
    log(
      textTable(
        ['path', 'rounds', 'valid', 'achieved', 'p50', 'p99', 'p99.9', 'max', '+p50', '+p99', 'lag p99', 'µs/req on the path', 'sender µs/req', 'bad'],
        open.paths.map((p) => [p.path, p.rounds, p.validRounds, formatNumber(p.achievedRate), formatNumber(p.p50Us), formatNumber(p.p99Us), formatNumber(p.p999Us), formatNumber(p.maxUs), p.addedP50Us === null ? '' : formatNumber(p.addedP50Us), p.addedP99Us === null ? '' : formatNumber(p.addedP99Us), formatNumber(p.dispatchLagP99Us), formatNumber(p.cpuUsPerRequest.path), formatNumber(p.cpuUsPerRequest.runner), p.bad]),
      ),
    );
  }
  if ((summary.https ?? []).length > 0) {
    log('\nHTTPS phase (the TLS tunnel beside direct over plain HTTP; medians):');
    log(textTable(['scenario', 'path', 'n', 'direct req/s', 'req/s', 'of direct', 'µs/req on the path', 'bad'], summary.https!.map((g) => [g.scenario, g.label, g.runs, formatNumber(g.direct.reqPerSec), formatNumber(g.tunnel.reqPerSec), formatNumber(g.ratio, 3), formatNumber(g.cpuUsPerRequest.path), g.errors + g.timeouts + g.non2xx + g.mismatches])));
  }
  const peaks = sampler.peaks();
  log('\nProcesses over the whole run (peak RSS sampled every 200 ms; HWM is the kernel\'s VmHWM):');
  log(textTable(['process', 'peak RSS MiB', 'of it anonymous', 'VmHWM MiB'], Object.entries(peaks).map(([name, p]) => [name, formatNumber(p.peakRssMiB, 1), formatNumber(p.peakAnonMiB, 1), formatNumber(p.hwmMiB, 1)])));
}

// ---------------------------------------------------------------------------------------------------------

/**
 * A child's stderr without the edge's normal log (one line per tunnel connect and disconnect); the first
 * line of a tail that was cut is partial and dropped too.
 */
function stderrProblems(text: string): string {
  const lines = text.split('\n');
  if (text.length >= 60_000) lines.shift();
  return lines
    .filter((line) => !/^tunnel \S+ (connected|disconnected)\b/.test(line))
    .join('\n')
    .slice(-4_000);
}

/**
 * The floor profile's paths: the headline tunnel, the baseline and the floors with two processes (nginx
 * → nginx, ssh -R, two relays), each process with the pid the sampler tracks it under.
 */
function floorContext(setup: Setup, options: Options): Parameters<typeof runFloorProfile>[0] {
  const headline = setup.paths.find((p) => p.kind === 'tunnel' && p.capture === true && p.inspect !== false)!;
  const floors = setup.paths.filter((p) => ['baseline', 'ssh', 'nginx2', 'relays2'].includes(p.id));
  return {
    paths: [headline, ...floors].map((p) => ({ id: p.id, kind: p.kind, label: p.label, target: p.target, processes: Object.entries(p.roles).map(([role, name]) => ({ role, name, pid: sampler.pidOf(name)! })) })),
    scenarios: options.quick ? QUICK_FLOOR_SCENARIOS : FLOOR_SCENARIOS,
    durationS: options.durationS,
    warmupS: Math.max(1, options.warmupS),
    pauseMs: options.pauseMs,
    children,
    bin: setup.bin,
    targetPort: setup.targetPort,
    temp: setup.temp,
    inspectFlag: setup.inspectFlag,
    log,
    checkAbort,
  };
}

/**
 * Phase 5: a bulk transfer each way and one-connection round trips through `burrow tcp` (a fresh edge
 * with --tcp-ports, capture on) and through `ssh -R` to the same local server in this process.
 */
async function runTcp(setup: Setup, options: Options): Promise<TcpRecord | null> {
  if (options.tcpMiB === 0) return null;
  const total = options.tcpMiB * MIB;
  const trips = options.quick ? 500 : 2_000;
  const record: TcpRecord = { mib: options.tcpMiB, trips, paths: [], peakRssMiB: { edge: null, client: null }, sshSkipped: null, error: null };
  log(`\ntcp tunnels: ${options.tcpMiB} MiB each way through one connection, then ${trips} one-byte round trips, burrow tcp beside ssh -R`);
  const local = new TcpLocal(total);
  try {
    const localPort = await local.listen();
    const dataDir = join(setup.temp, 'edge-tcp');
    const env = edgeEnv(setup.temp, 'edge-tcp');
    const [token] = await createAccounts(dataDir, 'tcp', 1, 'PRO');
    const first = await freePort();
    const { child: edge, port } = await startEdge(setup.bin, 'edge-tcp', dataDir, env, true, null, ['--tcp-ports', String(first)]);
    const client = children.spawn({
      name: 'client-tcp',
      command: process.execPath,
      args: [setup.bin, 'tcp', String(localPort), '--edge', `http://localhost:${port}`, '--token', token!, '--remote-port', String(first)],
      env: { ...env, XDG_CONFIG_HOME: join(setup.temp, 'client-tcp-config') },
    });
    await client.waitFor(/Forwarding tcp:\/\/\S+ ->/, 20_000);
    sampler.track('client-tcp', client.pid);
    const burrow = await measureTcpPath('burrow tcp', first, local, total, trips);
    record.peakRssMiB = { edge: peakMiB(edge.pid), client: peakMiB(client.pid) };
    record.paths.push(burrow);
    for (const line of tcpPathLines(burrow, total, `; peak RSS: edge ${record.peakRssMiB.edge} MiB, client ${record.peakRssMiB.client} MiB`)) log(line);
    record.sshSkipped = options.floors ? ensureSsh(ROOT) : 'the floors were left out (--no-floors)';
    if (record.sshSkipped !== null) log(`ssh -R skipped: ${record.sshSkipped}`);
    else {
      const reverse = await startSshReverse(children, join(setup.temp, 'ssh-tcp'), localPort, 'ssh-tcp');
      const ssh = await measureTcpPath('ssh -R', reverse.port, local, total, trips);
      record.paths.push(ssh);
      for (const line of tcpPathLines(ssh, total)) log(line);
    }
  } catch (error) {
    record.error = (error as Error).message;
    log(`tcp phase failed: ${record.error}`);
  } finally {
    local.close();
  }
  return record;
}

// ---------------------------------------------------------------------------------------------------------
// Phases 6 and 7 (issue 25): open loop, HTTPS.

/** The headline tunnel: capture on, inspector on (or not switchable). */
function headlineTunnel(setup: Setup): PathConfig {
  return setup.paths.find((p) => p.kind === 'tunnel' && p.capture === true && p.inspect !== false)!;
}

/** Rounds of the issue-25 phases: --repeat, at most 3. */
function issue25Rounds(options: Options): number {
  return Math.min(3, options.repeat);
}

/**
 * Phase 6: every path offered the same constant rate, half the tunnel's closed-loop maximum (the matrix's
 * median at 1 KiB POST @100 when the matrix ran in this invocation, else one autocannon run @100), by the
 * open-loop sender of bench/e2e/open-loop.ts (autocannon's `overallRate` sends each second's quota in a
 * burst and does not charge a late request its wait: see there). Added p99 = path p99 − direct p99 at the
 * same rate, in the same round; rounds rotate the order of the paths after direct, as the matrix does.
 */
async function runOpenLoopPhase(setup: Setup, options: Options): Promise<OpenLoopRecord> {
  const scenario: Scenario = { method: 'POST', size: SMALL, shape: 'length' };
  const tunnel = headlineTunnel(setup);
  const durationS = 2 * options.durationS;
  const warmupS = Math.min(2, options.durationS / 2);
  const connections = 128;
  const record: OpenLoopRecord = { scenario, rate: 0, tunnelMaxReqPerSec: 0, maxFrom: '', connections, durationS, warmupS, runs: [], sshSkipped: setup.sshMissing, error: null };
  try {
    const matrixRuns = runs.filter((r) => r.path === tunnel.id && r.scenario === scenarioName(scenario, 100));
    if (matrixRuns.length > 0) {
      record.tunnelMaxReqPerSec = Math.round(median(matrixRuns.map((r) => r.load.reqPerSec)));
      record.maxFrom = `the matrix's median of ${matrixRuns.length} run(s), ${scenarioName(scenario, 100)}`;
    } else {
      await waitQuiet(options, 10_000, 250);
      const load = await runLoad(tunnel.target, scenario, 100, options.durationS);
      record.tunnelMaxReqPerSec = Math.round(load.reqPerSec);
      record.maxFrom = `one closed-loop autocannon run, ${scenarioName(scenario, 100)}, ${options.durationS} s`;
      if (badCount(load) > 0) log(`  !! the maximum's run had errors ${load.errors} timeouts ${load.timeouts} non2xx ${load.non2xx} mismatches ${load.mismatches}`);
    }
    record.rate = Math.max(1, Math.round(record.tunnelMaxReqPerSec / 2));
    const direct = setup.paths[0]!;
    // nginx → nginx: two C proxies at the same offered rate, the floor this target is read against.
    const others = [tunnel, ...setup.paths.filter((p) => p.id === 'baseline' || p.id === 'ssh' || p.id === 'nginx2')];
    log(
      `\nopen loop: ${scenarioLabel(scenario)} offered at ${formatNumber(record.rate)} req/s to every path (half the tunnel's ${formatNumber(record.tunnelMaxReqPerSec)}, from ${record.maxFrom}); ` +
        `${warmupS} s warm-up + ${durationS} s per path, ${issue25Rounds(options)} round(s), undici Pool of up to ${connections} connections, latency from the schedule`,
    );
    if (record.sshSkipped !== null) log(`  ssh -R skipped: ${record.sshSkipped}`);
    for (let roundNo = 1; roundNo <= issue25Rounds(options); roundNo++) {
      await waitQuiet(options, 10_000, 250);
      const order = [direct, ...others.map((_, i) => others[(i + roundNo - 1) % others.length]!)];
      for (const path of order) {
        checkAbort();
        const window = sampler.window();
        const cpu = process.cpuUsage();
        const wall = process.hrtime.bigint();
        const result = await runOpenLoop(path.target, { rate: record.rate, durationS, warmupS, connections, scenario });
        const seconds = Number(process.hrtime.bigint() - wall) / 1e9;
        const runnerCpuPct = percentOfCore(process.cpuUsage(cpu), seconds);
        const stats = window.end();
        const procs: Record<string, ProcStats> = { target: stats.procs.target! };
        for (const [role, name] of Object.entries(path.roles)) procs[role] = stats.procs[name]!;
        const during = disturbance(stats, runnerCpuPct);
        record.runs.push({ round: roundNo, path: path.id, result, procs, runnerCpuPct, otherCpuPct: during.otherCpuPct, stealCpuPct: during.stealCpuPct });
        const bad = result.errors + result.timeouts + result.non2xx + result.mismatches;
        const l = result.latencyUs;
        log(
          `  r${roundNo} ${path.label.padEnd(40)} achieved ${formatNumber(result.achievedRate).padStart(6)} req/s  p50 ${formatNumber(l.p50)} p99 ${formatNumber(l.p99)} p99.9 ${formatNumber(l.p999)} max ${formatNumber(l.max)} µs  ` +
            `(uncorrected p99 ${formatNumber(result.serviceUs.p99)}; dispatch lag p99 ${formatNumber(result.dispatchLagUs.p99)} µs; peak in flight ${result.peakInFlight}; sender ${formatNumber(runnerCpuPct)}% CPU)` +
            (result.valid ? '' : `  !! invalid: ${result.invalidReason}`) +
            (bad > 0 ? `  !! errors ${result.errors} timeouts ${result.timeouts} non2xx ${result.non2xx} mismatches ${result.mismatches}` : '') +
            (during.otherCpuPct !== null && during.otherCpuPct > 20 ? `  !! other processes used ${formatNumber(during.otherCpuPct)}% CPU` : ''),
        );
        if (options.pauseMs > 0) await sleep(options.pauseMs);
      }
    }
    drainClientLogs(setup, 'open loop');
  } catch (error) {
    record.error = (error as Error).message.split('\n')[0]!;
    log(`  !! open loop failed: ${record.error}`);
    if (aborting !== null) throw error;
  }
  return record;
}

/**
 * The HTTPS phase's public client addresses: 4 × 25 connections stay within the edge's TLS handshake bound
 * per address (8 at once, 32 waiting; docs/security.md), where 100 from one address would mostly be closed.
 */
const TLS_SOURCE_ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'] as const;

/**
 * Two bare Node relays with TLS on both hops, as the HTTPS phase's nginx pair and TLS tunnel have it: the
 * front terminates HTTPS with the phase's certificate and speaks TLS to the back (trusting its CA), the
 * back terminates that and speaks plain TCP to the target. Sampled as relay-tls-front and relay-tls-back.
 */
async function startTlsRelays(targetPort: number, cert: { cert: string; key: string }, ca: { cert: string }): Promise<{ path: PathConfig; started: Child[] }> {
  const tlsArgs = ['--tls-cert', cert.cert, '--tls-key', cert.key];
  const { child: back, port: backPort } = await children.spawnServer('relay-tls-back', RELAY_SCRIPT, [String(targetPort), ...tlsArgs]);
  const { child: front, port: frontPort } = await children.spawnServer('relay-tls-front', RELAY_SCRIPT, [String(backPort), ...tlsArgs, '--upstream-ca', ca.cert]);
  sampler.track('relay-tls-front', front.pid);
  sampler.track('relay-tls-back', back.pid);
  const label = 'two bare Node relays, TLS on both hops';
  log(`${label}: https://127.0.0.1:${frontPort} (pids ${front.pid}, ${back.pid})`);
  return {
    started: [back, front],
    path: {
      id: 'relays2-tls',
      kind: 'floor',
      label,
      processes: ['relay-tls-front', 'relay-tls-back'],
      // Node's TLS server has no handshake bound per address; the TLS tunnel's four addresses keep the load equal.
      target: { origin: `https://127.0.0.1:${frontPort}`, host: null, sourceAddresses: TLS_SOURCE_ADDRESSES },
      roles: { 'relay-tls-front': 'relay-tls-front', 'relay-tls-back': 'relay-tls-back' },
      clientName: null,
    },
  };
}

/** A started nginx pair as a floor path: its workers sampled under the pair's names, its port logged. */
function nginxFloor(nginx: NginxTwoHop, id: string, label: string): PathConfig {
  const { front, back } = nginx.names;
  sampler.track(front, nginx.workers.front);
  sampler.track(back, nginx.workers.back);
  log(`${label}: ${nginx.scheme}://127.0.0.1:${nginx.port} (workers ${nginx.workers.front}, ${nginx.workers.back})`);
  return {
    id,
    kind: 'floor',
    label,
    processes: [front, back],
    target: { origin: `${nginx.scheme}://127.0.0.1:${nginx.port}`, host: null },
    roles: { [front]: front, [back]: back },
    clientName: null,
  };
}

/**
 * Phase 7: a second edge (capture on) serving HTTPS on its public port and wss on its agent port with a
 * throwaway certificate for localhost and *.localhost (made with openssl, as the tests make theirs), its own
 * `burrow http` client (inspector on) trusting the certificate's CA with --ca; autocannon over https (one
 * TLS session per connection, kept for the run) at 1 KiB POST and GET @100, in groups with direct over
 * plain HTTP, the plain headline tunnel and ssh -R.
 */
async function runHttps(setup: Setup, options: Options): Promise<HttpsRecord> {
  const record: HttpsRecord = { path: 'tls', runs: [], sshSkipped: setup.sshMissing, error: null };
  const started: Child[] = [];
  try {
    const dir = join(setup.temp, 'tls');
    mkdirSync(dir, { recursive: true });
    const ca = makeCa(dir, 'bench-ca');
    const cert = makeServerCert(dir, 'edge', ['localhost', '*.localhost'], ca);
    const edgeName = 'edge-tls';
    const dataDir = join(setup.temp, edgeName);
    const env = edgeEnv(setup.temp, edgeName);
    const [token] = await createAccounts(dataDir, 'bench-tls', 1, 'FREE');
    const { child: edge, port } = await startEdge(setup.bin, edgeName, dataDir, env, true, null, ['--tls-cert', cert.cert, '--tls-key', cert.key]);
    started.push(edge);
    const clientName = 'client-tls';
    const logFile = join(setup.temp, `${clientName}.log`);
    const inspectArgs = setup.inspectFlag ? ['--inspect', '127.0.0.1:0'] : [];
    const client = children.spawn({
      name: clientName,
      command: process.execPath,
      args: [setup.bin, 'http', String(setup.targetPort), '--edge', `https://localhost:${port}`, '--ca', ca.cert, '--token', token!, '--subdomain', 'bench-tls', ...inspectArgs],
      env: { ...env, XDG_CONFIG_HOME: join(setup.temp, `${clientName}-config`) },
      stdoutFile: logFile,
    });
    started.push(client);
    const forwarding = await client.waitFor(/Forwarding (https?:\/\/\S+)/, 20_000);
    sampler.track(clientName, client.pid);
    setup.clientLogs.set(clientName, { file: logFile, offset: statSync(logFile).size });
    const tls: PathConfig = {
      id: record.path,
      kind: 'tunnel',
      label: 'tunnel over HTTPS + wss, capture on, inspector on',
      processes: ['edge', 'client'],
      capture: true,
      inspect: setup.inspectFlag ? true : null,
      target: { origin: `https://127.0.0.1:${port}`, host: `bench-tls.localhost:${port}`, sourceAddresses: TLS_SOURCE_ADDRESSES },
      roles: { edge: edgeName, client: clientName },
      clientName,
    };
    setup.paths.push(tls);
    log(`\nhttps: ${forwarding[1]} (edge pid ${edge.pid}, client pid ${client.pid}); ${issue25Rounds(options)} round(s), beside direct over plain HTTP${record.sshSkipped === null ? ' and ssh -R' : ''}`);
    if (record.sshSkipped !== null) log(`  ssh -R skipped: ${record.sshSkipped}`);
    const plain = headlineTunnel(setup);
    // The C floor with both hops encrypted, as the TLS tunnel's are: what a TLS proxy pair can do here.
    const floors: PathConfig[] = [];
    if (options.floors && setup.floorsMissing === null) {
      const nginx = await startNginxTwoHop(children, join(setup.temp, 'nginx-tls'), setup.targetPort, { cert: cert.cert, key: cert.key, ca: ca.cert }, 'nginx-tls');
      started.push(...nginx.masters);
      const floor = nginxFloor(nginx, 'nginx2-tls', 'nginx → nginx, TLS on both hops');
      setup.paths.push(floor);
      floors.push(floor);
    }
    // The Node floor with both hops encrypted: what `node:tls` itself costs, with nothing of Burrow's.
    if (options.floors) {
      const relays = await startTlsRelays(setup.targetPort, cert, ca);
      started.push(...relays.started);
      setup.paths.push(relays.path);
      floors.push(relays.path);
    }
    log('  autocannon to the TLS edge from 4 loopback addresses (127.0.0.2-5) × 25 connections: the edge admits 8 TLS handshakes at once per client address and 32 waiting (docs/security.md)');
    const paths = [tls, plain, ...floors, ...setup.paths.filter((p) => p.id === 'ssh')];
    for (const method of ['POST', 'GET'] as Method[]) {
      for (const floor of floors) {
        const warm = await runLoad(floor.target, { method, size: SMALL, shape: 'length' }, 100, Math.max(options.warmupS, 0.5));
        warmups.push({ path: floor.id, method, connections: 100, load: warm });
        if (badCount(warm) > 0) log(`  warm-up ${floor.id} ${method}: errors ${warm.errors} timeouts ${warm.timeouts} non2xx ${warm.non2xx} mismatches ${warm.mismatches}`);
      }
      const load = await runLoad(tls.target, { method, size: SMALL, shape: 'length' }, 100, Math.max(options.warmupS, 0.5));
      warmups.push({ path: tls.id, method, connections: 100, load });
      if (badCount(load) > 0) log(`  warm-up ${tls.id} ${method}: errors ${load.errors} timeouts ${load.timeouts} non2xx ${load.non2xx} mismatches ${load.mismatches}`);
    }
    drainClientLogs(setup, 'https warm-up');
    for (let roundNo = 1; roundNo <= issue25Rounds(options); roundNo++) {
      for (const method of ['POST', 'GET'] as Method[]) await measureGroup(setup, options, roundNo, { method, size: SMALL, shape: 'length' }, 100, paths, record.runs);
    }
  } catch (error) {
    record.error = (error as Error).message.split('\n')[0]!;
    log(`  !! https phase failed: ${record.error}`);
    if (aborting !== null) throw error;
  } finally {
    // Client first (its tunnel closes), then the edge: the later phases run without them.
    drainClientLogs(setup, 'https');
    setup.clientLogs.delete('client-tls');
    for (const child of started.reverse()) await child.stop();
  }
  return record;
}

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
    stopOpenLoop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const startedAt = new Date();
  origin = startedAt.getTime();
  guardUntil = origin + (options.quick ? 3 : 9) * 60_000;
  const machine = machineInfo();
  const source = sourceInfo(options.burrowDir);
  const bench = options.burrowDir === ROOT ? source : sourceInfo(ROOT);
  log(`Burrow end-to-end benchmark, ${startedAt.toISOString()}: ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}`);
  log(`source: ${source.dir} at ${source.commit?.slice(0, 12) ?? 'unknown commit'}${source.dirtyFiles.length > 0 ? ` with ${source.dirtyFiles.length} uncommitted file(s)` : ''}`);
  log(
    `plan: ${options.durationS} s per run, ${options.repeat} round(s) of 1 KiB POST @100, probes ${options.probeRounds} × ${options.probeRequests} (${options.senders.join(', ')}), ` +
      `${options.tenants} tenants, ${options.idleTunnels} idle tunnels${options.quick ? ' (--quick)' : ''}`,
  );

  const temp = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
  // Filled in by the phases (closures: a holder keeps TypeScript from narrowing them to null).
  const state: { setup: Setup | null; tenants: TenantsRecord | null; idle: IdleRecord | null; tcp: TcpRecord | null; openloop: OpenLoopRecord | null; https: HttpsRecord | null; profile: FloorProfileRecord | null } = {
    setup: null,
    tenants: null,
    idle: null,
    tcp: null,
    openloop: null,
    https: null,
    profile: null,
  };
  let failure: Error | null = null;
  const phases: Record<string, number> = {};
  const phase = async (name: string, work: () => Promise<void>): Promise<void> => {
    const started = Date.now();
    await work();
    phases[name] = Math.round((Date.now() - started) / 100) / 10;
  };
  try {
    await phase('set-up', async () => {
      state.setup = await setUp(options, temp);
    });
    const ready = state.setup!;
    const wanted = (name: Phase): boolean => options.phases.includes(name);
    // The warm-up laps the capture rings too, which the matrix's and the profile's big bodies need.
    if (wanted('probes') || wanted('matrix') || wanted('profile')) await phase('warm-up', () => warmUp(ready, options));
    if (wanted('probes')) await phase('probes', () => runProbes(ready, options));
    if (wanted('matrix')) await phase('matrix', () => runMatrix(ready, options));
    // -- floor profile (issue 25) --
    if (wanted('profile')) {
      await phase('profile', async () => {
        state.profile = await runFloorProfile(floorContext(ready, options));
      });
    }
    // -- end floor profile --
    if (wanted('openloop')) {
      await phase('openloop', async () => {
        state.openloop = await runOpenLoopPhase(ready, options);
      });
    }
    if (wanted('https')) {
      await phase('https', async () => {
        state.https = await runHttps(ready, options);
      });
    }
    if (wanted('tenants')) {
      await phase('tenants', async () => {
        state.tenants = await runTenants(ready, options);
      });
    }
    if (wanted('idle')) {
      await phase('idle', async () => {
        state.idle = await runIdle(ready, options);
      });
    }
    if (wanted('tcp')) {
      await phase('tcp', async () => {
        state.tcp = await runTcp(ready, options);
      });
    }
  } catch (error) {
    failure = error as Error;
    process.stderr.write(`bench: ${failure.stack ?? failure.message}\n`);
  }
  const ready = state.setup;
  const { tenants, idle, tcp, openloop, https, profile: floorProfile } = state;

  sampler.sampleAll();
  sampler.stop();
  const peaks = sampler.peaks();
  const series = sampler.series(origin);
  const crashedBeforeStop = children.crashed().map((child) => child.name);
  const exits = await children.stopAll(5_000);
  const processes: Record<string, { pid: number; peakRssMiB: number | null; peakAnonMiB: number | null; hwmMiB: number | null; exit: (ExitInfo & { killed: boolean }) | null; crashed: boolean; stderrTail: string }> = {};
  for (const child of children.all) {
    const exit = exits.get(child.name) ?? null;
    processes[child.name] = {
      pid: child.pid,
      peakRssMiB: peaks[child.name] === undefined ? null : round(peaks[child.name]!.peakRssMiB, 1),
      peakAnonMiB: peaks[child.name] === undefined ? null : round(peaks[child.name]!.peakAnonMiB, 1),
      hwmMiB: peaks[child.name] === undefined ? null : round(peaks[child.name]!.hwmMiB, 1),
      exit,
      crashed: crashedBeforeStop.includes(child.name),
      // Tunnel connect and disconnect lines are the edge's normal log, not a problem.
      stderrTail: stderrProblems(child.stderr),
    };
    const unclean = exit !== null && (exit.killed || (exit.code !== 0 && exit.signal !== 'SIGTERM'));
    if (unclean && failure === null) log(`note: ${child.name} did not stop cleanly on SIGTERM (code ${exit.code}, signal ${exit.signal}${exit.killed ? ', needed SIGKILL' : ''})`);
  }

  const paths: PathInfo[] = ready === null ? [] : ready.paths.map(({ id, kind, label, processes: roles, capture, inspect }) => ({ id, kind, label, processes: roles, ...(capture === undefined ? {} : { capture }), ...(inspect === undefined ? {} : { inspect }) }));
  const summary = summarize(runs, probes, paths, { openloop, https, floorProfile });
  if (runs.length > 0 || probes.length > 0 || openloop !== null || https !== null || floorProfile !== null) printSummary(summary);
  if (floorProfile !== null) for (const line of floorProfileLines(floorProfile)) log(line);

  const finishedAt = new Date();
  const results = {
    kind: 'burrow-e2e-bench',
    version: 2,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    phasesS: phases,
    machine,
    source,
    bench: { dir: bench.dir, commit: bench.commit },
    options: { ...options, burrowDir: options.burrowDir, outDir: relative(ROOT, options.outDir) || '.' },
    inspectFlag: ready?.inspectFlag ?? null,
    floorsMissing: ready?.floorsMissing ?? null,
    captureQuota: { raisedTo: BENCH_CAPTURE_QUOTA, atDefault: [...new Set(edgesAtDefaultQuota)] },
    headline: { method: 'POST', size: SMALL, connections: 100 },
    paths,
    error: failure === null ? null : failure.message,
    aborted: aborting,
    summary,
    runs,
    warmups,
    otherClientLog,
    probes,
    discarded,
    discardedProbes,
    openloop,
    https,
    tenants,
    idle,
    tcp,
    floorProfile,
    processes,
    series,
  };
  mkdirSync(options.outDir, { recursive: true });
  const file = join(options.outDir, `e2e-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(results, null, 1)}\n`);
  log(`\nresults: ${relative(process.cwd(), file) || file} (phases, s: ${Object.entries(phases).map(([name, s]) => `${name} ${s}`).join(', ')}; total ${formatNumber((finishedAt.getTime() - startedAt.getTime()) / 1000)} s)`);

  if (options.keep) log(`kept temp dir: ${temp}`);
  else rmSync(temp, { recursive: true, force: true });

  if (failure === null || runs.length > 0 || probes.length > 0 || openloop !== null || https !== null || floorProfile !== null) {
    // Issues 13's and 25's acceptance lists, checked by the same code that writes bench/RESULTS.md.
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
