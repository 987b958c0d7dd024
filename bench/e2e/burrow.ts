/**
 * A Burrow tunnel for a benchmark, set up through a checkout's own CLI (its `bin/burrow.js`, which may be
 * another build than this one): an account made with `burrow admin create-account`, an edge on 127.0.0.1
 * and a `burrow http` client, each a child in the runner's `Children`. Each start resolves once the
 * process is ready (the edge listening, the tunnel forwarding).
 */
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Child, Children } from './processes.js';

/**
 * The capture quota every benchmark edge gets (`burrow edge --plans`, docs/deploy.md "Plans and quotas"),
 * beyond what any ring of a run can hold (a FREE ring's 1,000 slots, a PRO ring's 10,000, of two bodies
 * of at most --capture-body each). At the plans' defaults (FREE 100 MiB) an account fills its quota in
 * the 1 MiB phases and its new captures are skipped: a "capture on" row then measured the skip (measured:
 * 1,100 of 1,288 POSTs of 1 MiB skipped in 5 s, and each run after that 93% of them).
 */
export const BENCH_CAPTURE_QUOTA = '64GiB';

/** Each checkout's edge: whether it takes --plans (a build before it does not), by bin. */
const takesPlans = new Map<string, boolean>();
let plansFile: string | null = null;

/**
 * `--plans FILE` for `bin`'s edge, raising both plans' capture quota, or nothing for a build without the
 * flag (its big bodies' captures are skipped once its account's quota fills; `edgesAtDefaultQuota` says so).
 */
function plansArgs(bin: string): string[] {
  let takes = takesPlans.get(bin);
  if (takes === undefined) {
    const help = spawnSync(process.execPath, [bin, 'edge', '--help'], { encoding: 'utf8', timeout: 20_000 });
    takes = /--plans FILE/.test(`${help.stdout ?? ''}`);
    takesPlans.set(bin, takes);
  }
  if (!takes) return [];
  if (plansFile === null) {
    plansFile = join(tmpdir(), `burrow-bench-plans-${process.pid}.yml`);
    writeFileSync(plansFile, `FREE:\n  capture_bytes: ${BENCH_CAPTURE_QUOTA}\nPRO:\n  capture_bytes: ${BENCH_CAPTURE_QUOTA}\n`);
    const file = plansFile;
    process.once('exit', () => rmSync(file, { force: true }));
  }
  return ['--plans', plansFile];
}

/**
 * Uploads of 1 MiB that lap a benchmark tunnel's capture ring once (the FREE plan's 1,000 slots, the
 * accounts the benchmarks make) before anything is measured. A fresh data directory's capture file grows
 * while its ring fills, and each page it grows by costs the kernel a new block and page (on the AMD EPYC
 * host of 2026-11-29: 1,320 µs of CPU per 1 MiB capture in the first lap of 1,000 LMDB slots, 206 in
 * the laps after). An edge that has run a while writes captures over pages its file already has, so that
 * is what the rows measure; the first lap is this warm-up's.
 */
export const RING_FILL_UPLOADS = 1_100;

/**
 * POSTs of 1 KiB sent through the same tunnel after its ring filled with 1 MiB captures, lapping the ring
 * twice more before anything is measured. A small capture written over a 1 MiB one frees the big one's
 * overflow pages, and while those frees go into LMDB's free list every commit costs more (lmdb-js's
 * freelist merge): measured at one connection on the AMD EPYC host of 2026-11-29, the edge spent 560-620
 * µs a request for the first 2,000 requests after such a fill and 370-420 after, against 360-440 after
 * a fill of small captures (bench/RESULTS.md, tuning log). Without this, the first rows after the warm-up
 * (the one-connection probes) measured that passage.
 */
export const RING_SETTLE_REQUESTS = 2 * RING_FILL_UPLOADS;

/** The names of the edges started with their plans' default capture quota (builds without --plans). */
export const edgesAtDefaultQuota: string[] = [];

/**
 * The environment of a Burrow process: the runner's, with its own config directory and without the
 * runner's BURROW_TOKEN and BURROW_EDGE, so a developer's login never reaches a benchmark's edge or client.
 */
export function burrowEnv(configDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: configDir };
  delete env.BURROW_TOKEN;
  delete env.BURROW_EDGE;
  return env;
}

export interface AccountOptions {
  /** The checkout's bin/burrow.js. */
  bin: string;
  /** The data directory of the edge that will serve the account (written before the edge starts). */
  dataDir: string;
  email: string;
  /** Left out: the CLI's default (FREE). */
  plan?: 'FREE' | 'PRO';
  env: NodeJS.ProcessEnv;
}

/**
 * Makes an account with the checkout's own `burrow admin create-account`, so the data directory is in that
 * build's store format; returns its token.
 */
export function createBenchAccount(options: AccountOptions): string {
  const { bin, dataDir, email, plan, env } = options;
  const args = [bin, 'admin', 'create-account', '--email', email, ...(plan === undefined ? [] : ['--plan', plan]), '--data', dataDir, '--json'];
  const created = spawnSync(process.execPath, args, { encoding: 'utf8', env, timeout: 30_000 });
  if (created.status !== 0) throw new Error(`create-account for ${email} failed: ${created.stderr}`);
  return (JSON.parse(created.stdout) as { token: { token: string } }).token.token;
}

export interface EdgeOptions {
  bin: string;
  /** The child's name in `Children` (and in error messages). */
  name: string;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  /** Node flags before the script (a profiler, a tracing flag). */
  nodeArgs?: string[];
  /** More `burrow edge` arguments, after the common ones. */
  edgeArgs?: string[];
  /** The public port; 0 (the default) lets the edge pick one, read from what it prints. */
  port?: number;
  stdoutFile?: string;
  /** Rewrites the command line before it runs (e2e's idle phase raises the file limit with `sh -c ulimit`). */
  wrap?: (command: string, args: string[]) => { command: string; args: string[] };
}

/** Starts `burrow edge` on 127.0.0.1 and waits until it listens; the child and its public port. */
export async function startBurrowEdge(children: Children, options: EdgeOptions): Promise<{ child: Child; port: number }> {
  const { bin, name, dataDir, env, nodeArgs = [], edgeArgs = [], port = 0, stdoutFile, wrap } = options;
  const plans = edgeArgs.includes('--no-capture') ? [] : plansArgs(bin);
  if (plans.length === 0 && !edgeArgs.includes('--no-capture')) edgesAtDefaultQuota.push(name);
  const args = [...nodeArgs, bin, 'edge', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir, '--rate-limit', '1000000', ...plans, ...edgeArgs];
  const spawned = wrap === undefined ? { command: process.execPath, args } : wrap(process.execPath, args);
  const child = children.spawn({ name, command: spawned.command, args: spawned.args, env, stdoutFile });
  const listening = await ready(child, /listening on https?:\/\/localhost:(\d+)/, 30_000);
  return { child, port: Number(listening[1]) };
}

export interface HttpClientOptions {
  bin: string;
  name: string;
  targetPort: number;
  edgePort: number;
  token: string;
  subdomain: string;
  env: NodeJS.ProcessEnv;
  /**
   * Whether to turn the inspector on with `--inspect 127.0.0.1:0` (port 0: each inspector on a free
   * loopback port, so two clients never fight over 4040); default true, false for a build whose
   * `burrow http` has no such flag. A `--no-inspect` among `clientArgs` wins.
   */
  inspector?: boolean;
  nodeArgs?: string[];
  /** More `burrow http` arguments, after the common ones. */
  clientArgs?: string[];
  /** The client logs a line per request: a file, since a pipe the runner reads would slow it down. */
  stdoutFile: string;
}

/** Starts `burrow http` against an edge on localhost and waits until the tunnel forwards; the child and its public URL. */
export async function startBurrowHttp(children: Children, options: HttpClientOptions): Promise<{ child: Child; url: string }> {
  const { bin, name, targetPort, edgePort, token, subdomain, env, inspector = true, nodeArgs = [], clientArgs = [], stdoutFile } = options;
  const inspect = inspector && !clientArgs.includes('--no-inspect') ? ['--inspect', '127.0.0.1:0'] : [];
  const child = children.spawn({
    name,
    command: process.execPath,
    args: [...nodeArgs, bin, 'http', String(targetPort), '--edge', `http://localhost:${edgePort}`, '--token', token, '--subdomain', subdomain, ...inspect, ...clientArgs],
    env,
    stdoutFile,
  });
  const forwarding = await ready(child, /Forwarding (http:\/\/\S+)/, 20_000);
  return { child, url: forwarding[1]! };
}

/**
 * Waits for `pattern` in the child's output; a child that does not get there is stopped before the error
 * goes up, since a caller may carry on without it (the floor profile does) and must not share the
 * machine with a hung process.
 */
async function ready(child: Child, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  try {
    return await child.waitFor(pattern, timeoutMs);
  } catch (error) {
    await child.stop();
    throw error;
  }
}
