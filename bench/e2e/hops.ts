/**
 * The floor of any two-hop design in Node on this machine: the benchmark's target measured directly,
 * through one and two bare TCP relay processes (bench/e2e/relay.ts: `net.Socket.pipe` both ways, no HTTP,
 * no framing) and through a minimal one-hop HTTP proxy made of Burrow's stack (bench/e2e/proxy.ts: uWS in
 * front, undici behind, nothing else), with the same latency probe and autocannon as the tunnel, and the
 * CPU time each path's processes spend per request. A tunnel puts two processes (edge, client) on the
 * path: the two-relay rows are what they cost before doing any work of their own, the proxy row what
 * parsing HTTP on both sides with this stack costs in one process.
 * Used by `npm run bench` (a section of its results) and by `npm run bench:hops` on its own.
 */
import { fileURLToPath } from 'node:url';
import { runLoad, type Method, type Target } from './load.js';
import { probe, type ProbeResult } from './probe.js';
import type { Child, Children } from './processes.js';
import { clockTicks, readProc } from './sampler.js';
import { median } from './stats.js';
import { formatNumber, textTable } from './table.js';

const RELAY_SCRIPT = fileURLToPath(new URL('./relay.js', import.meta.url));
const PROXY_SCRIPT = fileURLToPath(new URL('./proxy.js', import.meta.url));

export const HOP_PATHS = ['direct', 'one relay', 'one-hop proxy', 'two relays'] as const;
export type HopPath = (typeof HOP_PATHS)[number];

export interface HopsPlan {
  /** Probe requests per path and method, after `warmup` unmeasured ones, in blocks of `block`. */
  requests: number;
  warmup: number;
  block: number;
  /** autocannon, 1 KiB POST at `connections`: seconds per run, rounds over the three paths. */
  durationS: number;
  rounds: number;
  connections: number;
}

export interface HopsResult {
  plan: HopsPlan;
  /** Per method, per path. */
  probe: Record<string, Record<string, ProbeResult>>;
  /** req/s of every run, per path, in round order. */
  load: Record<string, number[]>;
  /** Median req/s per path, and that ÷ direct's median. */
  medianReqPerSec: Record<string, number>;
  ratio: Record<string, number | null>;
  /** Errors, timeouts, non-2xx and wrong bodies over all load runs, per path. */
  bad: Record<string, number>;
  /**
   * Median over the load runs of the CPU time (user + system, from /proc) per completed request: of the
   * processes between autocannon and the target (`hops`: none for direct, both relays for two relays),
   * and of the target. null off Linux.
   */
  cpuUsPerRequest: Record<string, { hops: number | null; target: number | null }>;
}

/** CPU ticks (user + system) of some processes, or null when one cannot be read. */
function ticksOf(pids: number[]): number | null {
  let total = 0;
  for (const pid of pids) {
    const sample = readProc(pid);
    if (sample === null) return null;
    total += sample.ticks;
  }
  return total;
}

/** Starts the relays and the proxy in front of `target` (as children of `children`) and measures. */
export async function measureHops(children: Children, target: { port: number; pid: number }, plan: HopsPlan, aborted: () => boolean): Promise<HopsResult> {
  const { child: first, port: firstPort } = await children.spawnServer('relay-1', RELAY_SCRIPT, [String(target.port)]);
  const { child: second, port: secondPort } = await children.spawnServer('relay-2', RELAY_SCRIPT, [String(firstPort)]);
  const { child: proxy, port: proxyPort } = await children.spawnServer('proxy', PROXY_SCRIPT, [String(target.port)]);
  const paths = new Map<HopPath, Target>([
    ['direct', { origin: `http://127.0.0.1:${target.port}`, host: null }],
    ['one relay', { origin: `http://127.0.0.1:${firstPort}`, host: null }],
    ['one-hop proxy', { origin: `http://127.0.0.1:${proxyPort}`, host: null }],
    ['two relays', { origin: `http://127.0.0.1:${secondPort}`, host: null }],
  ]);
  const onPath: Record<HopPath, Child[]> = { direct: [], 'one relay': [first], 'one-hop proxy': [proxy], 'two relays': [first, second] };
  const usPerTick = 1e6 / clockTicks();
  const probes: Record<string, Record<string, ProbeResult>> = {};
  for (const method of ['GET', 'POST'] as Method[]) {
    if (aborted()) break;
    probes[method] = Object.fromEntries(await probe(paths, method, plan, aborted));
  }
  const load: Record<string, number[]> = Object.fromEntries(HOP_PATHS.map((path) => [path, []]));
  const bad: Record<string, number> = Object.fromEntries(HOP_PATHS.map((path) => [path, 0]));
  const hopsCpu: Record<string, number[]> = Object.fromEntries(HOP_PATHS.map((path) => [path, []]));
  const targetCpu: Record<string, number[]> = Object.fromEntries(HOP_PATHS.map((path) => [path, []]));
  for (const path of ['two relays', 'one-hop proxy'] as const) {
    if (!aborted()) await runLoad(paths.get(path)!, 'POST', plan.connections, 1); // warm the longest paths
  }
  for (let round = 0; round < plan.rounds && !aborted(); round++) {
    for (const [path, origin] of paths) {
      if (aborted()) break;
      const pids = onPath[path].map((child) => child.pid);
      const hopsBefore = ticksOf(pids);
      const targetBefore = ticksOf([target.pid]);
      const result = await runLoad(origin, 'POST', plan.connections, plan.durationS);
      const hopsAfter = ticksOf(pids);
      const targetAfter = ticksOf([target.pid]);
      load[path]!.push(result.reqPerSec);
      bad[path]! += result.errors + result.timeouts + result.non2xx + result.mismatches;
      if (result.requests > 0 && hopsBefore !== null && hopsAfter !== null) hopsCpu[path]!.push(((hopsAfter - hopsBefore) * usPerTick) / result.requests);
      if (result.requests > 0 && targetBefore !== null && targetAfter !== null) targetCpu[path]!.push(((targetAfter - targetBefore) * usPerTick) / result.requests);
    }
  }
  await proxy.stop();
  await second.stop();
  await first.stop();
  const medianReqPerSec: Record<string, number> = {};
  for (const path of HOP_PATHS) medianReqPerSec[path] = load[path]!.length > 0 ? median(load[path]!) : Number.NaN;
  const ratio: Record<string, number | null> = {};
  for (const path of HOP_PATHS) ratio[path] = path === 'direct' || !(medianReqPerSec.direct! > 0) ? null : medianReqPerSec[path]! / medianReqPerSec.direct!;
  const cpuUsPerRequest: Record<string, { hops: number | null; target: number | null }> = {};
  for (const path of HOP_PATHS) {
    cpuUsPerRequest[path] = {
      hops: hopsCpu[path]!.length > 0 ? median(hopsCpu[path]!) : null,
      target: targetCpu[path]!.length > 0 ? median(targetCpu[path]!) : null,
    };
  }
  return { plan, probe: probes, load, medianReqPerSec, ratio, bad, cpuUsPerRequest };
}

/** The two tables of a hops measurement, as text. */
export function hopsTables(result: HopsResult): string {
  const rows: (string | number)[][] = [];
  for (const [method, byPath] of Object.entries(result.probe)) {
    const direct = byPath.direct;
    for (const path of HOP_PATHS) {
      const r = byPath[path];
      if (r === undefined) continue;
      rows.push([
        method === 'POST' ? 'POST 1 KiB' : method,
        path,
        r.samples,
        formatNumber(r.p50),
        formatNumber(r.p99),
        formatNumber(r.p999),
        path === 'direct' || direct === undefined ? '' : `+${formatNumber(r.p50 - direct.p50)}`,
        r.errors,
      ]);
    }
  }
  const probeTable = textTable(['Method', 'Path', 'Samples', 'p50 µs', 'p99 µs', 'p99.9 µs', '+p50 µs', 'Errors'], rows);
  const loadTable = textTable(
    ['Path', 'Runs', 'Median req/s', 'Ratio', 'CPU µs/req on the path / target', 'Bad'],
    HOP_PATHS.map((path) => {
      const cpu = result.cpuUsPerRequest[path]!;
      return [
        path,
        result.load[path]!.length,
        formatNumber(result.medianReqPerSec[path]),
        result.ratio[path] === null ? '' : formatNumber(result.ratio[path], 3),
        `${path === 'direct' ? '–' : formatNumber(cpu.hops)} / ${formatNumber(cpu.target)}`,
        result.bad[path]!,
      ];
    }),
  );
  return `${probeTable}\n\nautocannon, 1 KiB POST, ${result.plan.connections} connections, ${result.plan.durationS} s per run, ${result.plan.rounds} round(s) of every path:\n\n${loadTable}`;
}
