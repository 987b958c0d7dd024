/**
 * The summary of a run's records: per scenario and path, medians over the repeats and the ratios against
 * direct; per probe (sender, scenario, path), medians over the rounds. Pure: the runner calls it at the
 * end and `node dist/bench/e2e.js --resummarize FILE` recomputes it for an existing results file.
 *
 * Direct figures are the median of every direct run of the same scenario (one opens each group of runs):
 * one direct run slowed by something else on the machine then cannot skew a ratio. The median of the
 * pairwise ratios (a path's run ÷ the direct run of its group) is kept beside it as `pairedRatio`.
 */
import type { Method, Shape } from './payloads.js';
import type { PathInfo, ProbeRecord, RunRecord } from './records.js';
import type { Sender } from './probe.js';
import { median } from './stats.js';
import { summarizeFloorProfile, type FloorComparison, type FloorProfileRecord } from './floor-profile.js';

interface PathFigures {
  reqPerSec: number;
  bytesPerSec: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}

export interface GroupSummary {
  scenario: string;
  method: Method;
  size: number;
  shape: Shape;
  connections: number;
  path: string;
  kind: PathInfo['kind'];
  label: string;
  capture: boolean | null;
  inspect: boolean | null;
  runs: number;
  directRuns: number;
  direct: PathFigures;
  tunnel: PathFigures;
  /** Median req/s through the path ÷ median direct req/s of the scenario. */
  ratio: number;
  pairedRatio: number;
  addedP50Ms: number;
  addedMeanMs: number;
  addedP99Ms: number;
  edgePeakRssMiB: number;
  /**
   * CPU time per completed request, µs (medians): by role (`edge`, `client`, `nginx-front`, `relay-1`,
   * ..., `target`, `runner` = autocannon), `path` = the sum of the path's own processes, and the direct
   * runs' target and runner for comparison.
   */
  cpuUsPerRequest: Record<string, number>;
  otherCpuPctMax: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
}

export interface ProbeSummary {
  sender: Sender;
  method: Method;
  size: number;
  shape: Shape;
  path: string;
  rounds: number;
  samples: number;
  errors: number;
  newConnections: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  meanUs: number;
  /** Median over rounds of (this path's p50 − direct p50) from the same round, sender and scenario. */
  addedP50Us: number | null;
  addedP99Us: number | null;
}

export interface Summary {
  groups: GroupSummary[];
  probes: ProbeSummary[];
  /** Issue 25's floor profile, each path's processes summed per request; null when the phase did not run. */
  floorProfile?: FloorComparison[] | null;
}

/** CPU µs one process spent per completed request during a run. */
export function perRequest(run: RunRecord, cpuPct: number | null | undefined): number {
  if (cpuPct === null || cpuPct === undefined || run.load.reqPerSec <= 0) return Number.NaN;
  return ((cpuPct / 100) * 1e6) / run.load.reqPerSec;
}

function figures(list: readonly RunRecord[]): PathFigures {
  return {
    reqPerSec: median(list.map((r) => r.load.reqPerSec)),
    bytesPerSec: median(list.map((r) => r.load.bytesPerSec ?? Number.NaN)),
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

export function summarize(runs: readonly RunRecord[], probes: readonly ProbeRecord[], paths: readonly PathInfo[], floorProfile: FloorProfileRecord | null = null): Summary {
  const bySeq = new Map(runs.map((run) => [run.seq, run]));
  const directByScenario = groupBy(
    runs.filter((run) => run.path === 'direct'),
    (run) => run.scenario,
  );
  const groups: GroupSummary[] = [];
  for (const pathRuns of groupBy(runs.filter((run) => run.path !== 'direct'), (run) => `${run.scenario}\n${run.path}`).values()) {
    const first = pathRuns[0]!;
    const info = paths.find((p) => p.id === first.path);
    const directRuns = directByScenario.get(first.scenario) ?? [];
    const pairs = pathRuns.flatMap((t) => {
      const direct = t.pairedWith === null ? undefined : bySeq.get(t.pairedWith);
      return direct === undefined ? [] : [[t, direct] as const];
    });
    const med = (list: readonly RunRecord[], pick: (run: RunRecord) => number | null | undefined): number => median(list.map((run) => pick(run) ?? Number.NaN));
    const max = (values: Array<number | null | undefined>): number => Math.max(...values.map((v) => v ?? Number.NaN).filter(Number.isFinite));
    const sum = (pick: (r: RunRecord) => number): number => pathRuns.reduce((total, r) => total + pick(r), 0) + directRuns.reduce((total, r) => total + pick(r), 0);
    const direct = figures(directRuns);
    const tunnel = figures(pathRuns);
    const roles = new Set<string>();
    for (const run of pathRuns) for (const role of Object.keys(run.procs)) roles.add(role);
    const cpu: Record<string, number> = {};
    for (const role of roles) cpu[role] = med(pathRuns, (r) => perRequest(r, r.procs[role]?.cpuPct));
    cpu.path = med(pathRuns, (r) =>
      Object.entries(r.procs)
        .filter(([role]) => role !== 'target')
        .reduce((total, [, stats]) => total + perRequest(r, stats.cpuPct), 0),
    );
    cpu.runner = med(pathRuns, (r) => perRequest(r, r.runnerCpuPct));
    cpu.directTarget = med(directRuns, (r) => perRequest(r, r.procs.target?.cpuPct));
    cpu.directRunner = med(directRuns, (r) => perRequest(r, r.runnerCpuPct));
    groups.push({
      scenario: first.scenario,
      method: first.method,
      size: first.size,
      shape: first.shape,
      connections: first.connections,
      path: first.path,
      kind: info?.kind ?? 'tunnel',
      label: info?.label ?? first.path,
      capture: info?.capture ?? first.capture ?? null,
      inspect: info?.inspect ?? first.inspect ?? null,
      runs: pathRuns.length,
      directRuns: directRuns.length,
      direct,
      tunnel,
      ratio: tunnel.reqPerSec / direct.reqPerSec,
      pairedRatio: median(pairs.map(([t, d]) => t.load.reqPerSec / d.load.reqPerSec)),
      addedP50Ms: tunnel.p50Ms - direct.p50Ms,
      addedMeanMs: tunnel.meanMs - direct.meanMs,
      addedP99Ms: tunnel.p99Ms - direct.p99Ms,
      edgePeakRssMiB: max(pathRuns.map((t) => t.procs.edge?.peakRssMiB)),
      cpuUsPerRequest: cpu,
      otherCpuPctMax: max([...pathRuns, ...directRuns].map((r) => r.otherCpuPct)),
      errors: sum((r) => r.load.errors),
      timeouts: sum((r) => r.load.timeouts),
      non2xx: sum((r) => r.load.non2xx),
      mismatches: sum((r) => r.load.mismatches),
    });
  }

  const probeSummaries: ProbeSummary[] = [];
  const probeKey = (r: ProbeRecord): string => `${r.sender} ${r.method} ${r.size} ${r.shape}`;
  for (const records of groupBy(probes, (record) => `${probeKey(record)} ${record.path}`).values()) {
    const { sender, method, size, shape, path } = records[0]!;
    const directOf = (r: ProbeRecord): ProbeRecord | undefined => probes.find((p) => p.round === r.round && probeKey(p) === probeKey(r) && p.path === 'direct');
    const added = (pick: (result: ProbeRecord['result']) => number): number | null =>
      path === 'direct'
        ? null
        : median(
            records.map((r) => {
              const direct = directOf(r);
              return direct === undefined ? Number.NaN : pick(r.result) - pick(direct.result);
            }),
          );
    probeSummaries.push({
      sender,
      method,
      size,
      shape,
      path,
      rounds: records.length,
      samples: records.reduce((total, r) => total + r.result.samples, 0),
      errors: records.reduce((total, r) => total + r.result.errors, 0),
      newConnections: records.reduce((total, r) => total + (r.result.newConnections ?? 0), 0),
      p50Us: median(records.map((r) => r.result.p50)),
      p99Us: median(records.map((r) => r.result.p99)),
      p999Us: median(records.map((r) => r.result.p999)),
      meanUs: median(records.map((r) => r.result.mean)),
      addedP50Us: added((result) => result.p50),
      addedP99Us: added((result) => result.p99),
    });
  }
  return { groups, probes: probeSummaries, floorProfile: summarizeFloorProfile(floorProfile) };
}
