/**
 * The summary of a run's records: per scenario and tunnel configuration, medians over the repeats and the
 * ratios against direct; per probe path, medians over the rounds. Pure: the runner calls it at the end and
 * `node dist/bench/e2e.js --resummarize FILE` recomputes it for an existing results file.
 *
 * Direct figures are the median of every direct run of the same scenario (the runner makes one before each
 * tunnel run, so four or more per scenario): one direct run slowed by something else on the machine then
 * cannot skew a ratio. The median of the pairwise ratios (tunnel ÷ the direct run just before it) is kept
 * beside it as `pairedRatio`.
 */
import type { LoadResult, Method } from './load.js';
import type { ProbeRecord, RunRecord, TunnelInfo } from './records.js';
import { median } from './stats.js';

interface PathFigures {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}

export interface GroupSummary {
  scenario: string;
  method: Method;
  connections: number;
  path: string;
  label: string;
  capture: boolean;
  inspect: boolean | null;
  /** Tunnel runs in this group. */
  runs: number;
  /** Direct runs of the scenario the direct figures come from. */
  directRuns: number;
  direct: PathFigures;
  tunnel: PathFigures;
  /** Median tunnel req/s ÷ median direct req/s of the scenario. */
  ratio: number;
  /** Median over repeats of tunnel req/s ÷ the direct run just before it. */
  pairedRatio: number;
  addedP50Ms: number;
  addedMeanMs: number;
  addedP99Ms: number;
  edgePeakRssMiB: number;
  edgeCpuPct: number;
  clientPeakRssMiB: number;
  clientCpuPct: number;
  targetCpuPct: number;
  runnerCpuPct: number;
  /** CPU time per completed request, µs (medians): where the tunnel's cost goes. */
  cpuUsPerRequest: { edge: number; client: number; target: number; runner: number; directTarget: number; directRunner: number };
  /** Highest CPU other processes on the machine used during these tunnel runs and the scenario's direct runs. */
  otherCpuPctMax: number;
  /** Sums over these tunnel runs and the direct runs paired with them. */
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
}

export interface ProbeSummary {
  method: Method;
  path: string;
  rounds: number;
  samples: number;
  errors: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  meanUs: number;
  /** Median over rounds of (this path's p50 − direct p50) from the same round. */
  addedP50Us: number | null;
}

export interface Summary {
  groups: GroupSummary[];
  probes: ProbeSummary[];
}

/** CPU µs one process spent per completed request during a run. */
export function perRequest(run: RunRecord, cpuPct: number | null | undefined): number {
  if (cpuPct === null || cpuPct === undefined || run.load.reqPerSec <= 0) return Number.NaN;
  return ((cpuPct / 100) * 1e6) / run.load.reqPerSec;
}

function figures(list: readonly RunRecord[]): PathFigures {
  return {
    reqPerSec: median(list.map((r) => r.load.reqPerSec)),
    p50Ms: median(list.map((r) => r.load.latencyMs.p50)),
    p99Ms: median(list.map((r) => r.load.latencyMs.p99)),
    meanMs: median(list.map((r) => r.load.latencyMs.mean)),
  };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const name = key(item);
    const list = groups.get(name);
    if (list === undefined) groups.set(name, [item]);
    else list.push(item);
  }
  return groups;
}

export function summarize(runs: readonly RunRecord[], probes: readonly ProbeRecord[], tunnels: readonly TunnelInfo[]): Summary {
  const bySeq = new Map(runs.map((run) => [run.seq, run]));
  const directByScenario = groupBy(
    runs.filter((run) => run.path === 'direct'),
    (run) => `${run.method} ${run.connections}`,
  );
  const groups: GroupSummary[] = [];
  for (const tunnelRuns of groupBy(runs.filter((run) => run.path !== 'direct'), (run) => `${run.method} ${run.connections} ${run.path}`).values()) {
    const first = tunnelRuns[0]!;
    const config = tunnels.find((t) => t.id === first.path);
    const directRuns = directByScenario.get(`${first.method} ${first.connections}`) ?? [];
    const pairs = tunnelRuns.flatMap((t) => {
      const direct = t.pairedWith === null ? undefined : bySeq.get(t.pairedWith);
      return direct === undefined ? [] : [[t, direct] as const];
    });
    const med = (list: readonly RunRecord[], pick: (run: RunRecord) => number | null | undefined): number => median(list.map((run) => pick(run) ?? Number.NaN));
    const max = (values: Array<number | null | undefined>): number => Math.max(...values.map((v) => v ?? Number.NaN).filter(Number.isFinite));
    const sum = (pick: (l: LoadResult) => number): number => pairs.reduce((total, [t, d]) => total + pick(t.load) + pick(d.load), 0);
    const direct = figures(directRuns);
    const tunnel = figures(tunnelRuns);
    groups.push({
      scenario: first.scenario,
      method: first.method,
      connections: first.connections,
      path: first.path,
      label: config?.label ?? first.path,
      capture: config?.capture ?? first.capture ?? false,
      inspect: config?.inspect ?? first.inspect,
      runs: tunnelRuns.length,
      directRuns: directRuns.length,
      direct,
      tunnel,
      ratio: tunnel.reqPerSec / direct.reqPerSec,
      pairedRatio: median(pairs.map(([t, d]) => t.load.reqPerSec / d.load.reqPerSec)),
      addedP50Ms: tunnel.p50Ms - direct.p50Ms,
      addedMeanMs: tunnel.meanMs - direct.meanMs,
      addedP99Ms: tunnel.p99Ms - direct.p99Ms,
      edgePeakRssMiB: max(tunnelRuns.map((t) => t.procs.edge?.peakRssMiB)),
      edgeCpuPct: med(tunnelRuns, (r) => r.procs.edge?.cpuPct),
      clientPeakRssMiB: max(tunnelRuns.map((t) => t.procs.client?.peakRssMiB)),
      clientCpuPct: med(tunnelRuns, (r) => r.procs.client?.cpuPct),
      targetCpuPct: med(tunnelRuns, (r) => r.procs.target?.cpuPct),
      runnerCpuPct: med(tunnelRuns, (r) => r.runnerCpuPct),
      cpuUsPerRequest: {
        edge: med(tunnelRuns, (r) => perRequest(r, r.procs.edge?.cpuPct)),
        client: med(tunnelRuns, (r) => perRequest(r, r.procs.client?.cpuPct)),
        target: med(tunnelRuns, (r) => perRequest(r, r.procs.target?.cpuPct)),
        runner: med(tunnelRuns, (r) => perRequest(r, r.runnerCpuPct)),
        directTarget: med(directRuns, (r) => perRequest(r, r.procs.target?.cpuPct)),
        directRunner: med(directRuns, (r) => perRequest(r, r.runnerCpuPct)),
      },
      otherCpuPctMax: max([...tunnelRuns, ...directRuns].map((r) => r.otherCpuPct)),
      errors: sum((l) => l.errors),
      timeouts: sum((l) => l.timeouts),
      non2xx: sum((l) => l.non2xx),
      mismatches: sum((l) => l.mismatches),
    });
  }

  const probeSummaries: ProbeSummary[] = [];
  for (const records of groupBy(probes, (record) => `${record.method} ${record.path}`).values()) {
    const { method, path } = records[0]!;
    const added =
      path === 'direct'
        ? null
        : median(
            records.map((r) => {
              const direct = probes.find((p) => p.round === r.round && p.method === method && p.path === 'direct');
              return direct === undefined ? Number.NaN : r.result.p50 - direct.result.p50;
            }),
          );
    probeSummaries.push({
      method,
      path,
      rounds: records.length,
      samples: records.reduce((total, r) => total + r.result.samples, 0),
      errors: records.reduce((total, r) => total + r.result.errors, 0),
      p50Us: median(records.map((r) => r.result.p50)),
      p99Us: median(records.map((r) => r.result.p99)),
      p999Us: median(records.map((r) => r.result.p999)),
      meanUs: median(records.map((r) => r.result.mean)),
      addedP50Us: added,
    });
  }
  return { groups, probes: probeSummaries };
}
