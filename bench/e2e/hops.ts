/**
 * The floor of any two-hop design in Node on this machine: the benchmark's target measured directly and
 * through one and two bare TCP relay processes (bench/e2e/relay.ts: `net.Socket.pipe` both ways, no HTTP,
 * no framing), with the same latency probe and autocannon as the tunnel. A tunnel puts two processes
 * (edge, client) on the path; the two-relay rows are what they cost before doing any work of their own.
 * Used by `npm run bench` (a section of its results) and by `npm run bench:hops` on its own.
 */
import { fileURLToPath } from 'node:url';
import { runLoad, type Method, type Target } from './load.js';
import { probe, type ProbeResult } from './probe.js';
import type { Children } from './processes.js';
import { median } from './stats.js';
import { formatNumber, textTable } from './table.js';

const RELAY_SCRIPT = fileURLToPath(new URL('./relay.js', import.meta.url));

export const HOP_PATHS = ['direct', 'one relay', 'two relays'] as const;
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
}

/** Starts the two relays in front of `targetPort` (as children of `children`) and measures. */
export async function measureHops(children: Children, targetPort: number, plan: HopsPlan, aborted: () => boolean): Promise<HopsResult> {
  const { child: first, port: firstPort } = await children.spawnServer('relay-1', RELAY_SCRIPT, [String(targetPort)]);
  const { child: second, port: secondPort } = await children.spawnServer('relay-2', RELAY_SCRIPT, [String(firstPort)]);
  const paths = new Map<HopPath, Target>([
    ['direct', { origin: `http://127.0.0.1:${targetPort}`, host: null }],
    ['one relay', { origin: `http://127.0.0.1:${firstPort}`, host: null }],
    ['two relays', { origin: `http://127.0.0.1:${secondPort}`, host: null }],
  ]);
  const probes: Record<string, Record<string, ProbeResult>> = {};
  for (const method of ['GET', 'POST'] as Method[]) {
    if (aborted()) break;
    probes[method] = Object.fromEntries(await probe(paths, method, plan, aborted));
  }
  const load: Record<string, number[]> = Object.fromEntries(HOP_PATHS.map((path) => [path, []]));
  const bad: Record<string, number> = Object.fromEntries(HOP_PATHS.map((path) => [path, 0]));
  if (!aborted()) await runLoad(paths.get('two relays')!, 'POST', plan.connections, 1); // warm the longest path
  for (let round = 0; round < plan.rounds && !aborted(); round++) {
    for (const [path, target] of paths) {
      if (aborted()) break;
      const result = await runLoad(target, 'POST', plan.connections, plan.durationS);
      load[path]!.push(result.reqPerSec);
      bad[path]! += result.errors + result.timeouts + result.non2xx + result.mismatches;
    }
  }
  await second.stop();
  await first.stop();
  const medianReqPerSec: Record<string, number> = {};
  for (const path of HOP_PATHS) medianReqPerSec[path] = load[path]!.length > 0 ? median(load[path]!) : Number.NaN;
  const ratio: Record<string, number | null> = {};
  for (const path of HOP_PATHS) ratio[path] = path === 'direct' || !(medianReqPerSec.direct! > 0) ? null : medianReqPerSec[path]! / medianReqPerSec.direct!;
  return { plan, probe: probes, load, medianReqPerSec, ratio, bad };
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
    ['Path', 'Runs', 'Median req/s', 'Ratio', 'Bad'],
    HOP_PATHS.map((path) => [path, result.load[path]!.length, formatNumber(result.medianReqPerSec[path]), result.ratio[path] === null ? '' : formatNumber(result.ratio[path], 3), result.bad[path]!]),
  );
  return `${probeTable}\n\nautocannon, 1 KiB POST, ${result.plan.connections} connections, ${result.plan.durationS} s per run, ${result.plan.rounds} round(s) of every path:\n\n${loadTable}`;
}
