/**
 * The summary of a run's records: per scenario and path, medians over the repeats and the ratios against
 * direct; per probe (sender, scenario, path), medians over the rounds. Pure: the runner calls it at the
 * end and `node dist/bench/e2e.js --resummarize FILE` recomputes it for an existing results file.
 *
 * Direct figures are the median of every direct run of the same scenario (one opens each group of runs):
 * one direct run slowed by something else on the machine then cannot skew a ratio. The median of the
 * pairwise ratios (a path's run ÷ the direct run of its group) is kept beside it as `pairedRatio`.
 */
import { KIB, MIB, scenarioLabel, SMALL, type Method, type Shape } from './payloads.js';
import type { HttpsRecord, OpenLoopRecord, PathInfo, ProbeRecord, RunRecord } from './records.js';
import type { Sender } from './probe.js';
import { median } from './stats.js';
import { summarizeFloorProfile, type FloorComparison, type FloorProfileRecord } from './floor-profile.js';
import { formatNumber } from './table.js';

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

export interface OpenLoopPathSummary {
  path: string;
  rounds: number;
  /** Rounds whose run held the offered rate (achieved ≥ 97 %). */
  validRounds: number;
  offeredRate: number;
  achievedRate: number;
  /** Medians over the rounds, µs, latency charged from the schedule. */
  p50Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
  /** Median over rounds of (this path's p99 − direct's p99 in the same round); null for direct. */
  addedP99Us: number | null;
  addedP50Us: number | null;
  dispatchLagP99Us: number;
  /** CPU µs per request by role, `path` = the path's own processes, `runner` = the sender. */
  cpuUsPerRequest: Record<string, number>;
  bad: number;
}

export interface OpenLoopSummary {
  rate: number;
  tunnelMaxReqPerSec: number;
  maxFrom: string;
  paths: OpenLoopPathSummary[];
}

/** One row of issue 25's acceptance table. */
export interface AcceptanceRow {
  target: string;
  /** Burrow's figure (the headline tunnel: capture and inspector on). */
  measured: string;
  /** `ssh -R`'s figure in the same run ('–' when it was not measured or is not compared). */
  ssh: string;
  pass: boolean | null;
}

export interface Summary {
  groups: GroupSummary[];
  probes: ProbeSummary[];
  /** Issue 25's floor profile, each path's processes summed per request; null when the phase did not run. */
  floorProfile?: FloorComparison[] | null;
  /** Issue 25's open-loop phase; null when it did not run. */
  openloop?: OpenLoopSummary | null;
  /** The HTTPS phase's groups (direct over plain HTTP, the TLS tunnel, the plain tunnel, ssh -R). */
  https?: GroupSummary[];
  /** Issue 25's targets this summary can decide (tenants, idle tunnels and errors come from issue 13's checks). */
  acceptance25?: AcceptanceRow[];
}

/** Issue 25's targets (bench/RESULTS.md, one run). */
export const TARGETS_25 = {
  smallRatio: 0.5,
  cpuVsSsh: 1.5,
  ratio64KiB: 0.45,
  ratio1MiB: 0.4,
  addedP50Us: 200,
  addedP50OverSshUs: 100,
  p99Us: 1000,
  openLoopAddedP99Us: 2000,
  httpsRatio: 0.4,
};

/**
 * The HTTPS phase's floors, both hops encrypted as the TLS tunnel's are, named beside its rows when the
 * run has them: the C pair, and Node's own TLS with nothing of Burrow's (bench/e2e/relay.ts).
 */
const HTTPS_FLOORS = [
  { id: 'nginx2-tls', label: 'nginx → nginx, TLS on both hops' },
  { id: 'relays2-tls', label: 'two bare Node relays, TLS on both hops' },
] as const;

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

/** The extra phases' records, as the results file has them (absent in older files). */
export interface ExtraRecords {
  openloop?: OpenLoopRecord | null;
  https?: HttpsRecord | null;
  floorProfile?: FloorProfileRecord | null;
}

export function summarize(runs: readonly RunRecord[], probes: readonly ProbeRecord[], paths: readonly PathInfo[], extra: ExtraRecords = {}): Summary {
  const groups = summarizeGroups(runs, paths);
  const probeSummaries = summarizeProbes(probes);
  const openloop = extra.openloop ? summarizeOpenLoop(extra.openloop, paths) : null;
  const https = extra.https ? summarizeGroups(extra.https.runs, paths) : [];
  const summary: Summary = { groups, probes: probeSummaries, openloop, https, floorProfile: summarizeFloorProfile(extra.floorProfile ?? null) };
  summary.acceptance25 = acceptance25(summary, paths, extra.https?.path ?? null);
  return summary;
}

function summarizeGroups(runs: readonly RunRecord[], paths: readonly PathInfo[]): GroupSummary[] {
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
  return groups;
}

function summarizeProbes(probes: readonly ProbeRecord[]): ProbeSummary[] {
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
  return probeSummaries;
}

function summarizeOpenLoop(record: OpenLoopRecord, paths: readonly PathInfo[]): OpenLoopSummary {
  const list: OpenLoopPathSummary[] = [];
  const directOf = (round: number): OpenLoopRecord['runs'][number] | undefined => record.runs.find((r) => r.round === round && r.path === 'direct');
  for (const [path, pathRuns] of groupBy(record.runs, (run) => run.path)) {
    const info = paths.find((p) => p.id === path);
    const roles = info?.processes ?? [];
    const perRequestOf = (pct: number | null | undefined, rate: number): number => (pct === null || pct === undefined || rate <= 0 ? Number.NaN : ((pct / 100) * 1e6) / rate);
    const cpu: Record<string, number> = {};
    for (const role of ['target', ...roles]) cpu[role] = median(pathRuns.map((r) => perRequestOf(r.procs[role]?.cpuPct, r.result.offeredRate)));
    cpu.path = roles.length === 0 ? Number.NaN : median(pathRuns.map((r) => roles.reduce((total, role) => total + perRequestOf(r.procs[role]?.cpuPct, r.result.offeredRate), 0)));
    cpu.runner = median(pathRuns.map((r) => perRequestOf(r.runnerCpuPct, r.result.offeredRate)));
    const added = (pick: (r: OpenLoopRecord['runs'][number]) => number): number | null =>
      path === 'direct'
        ? null
        : median(
            pathRuns.map((r) => {
              const direct = directOf(r.round);
              return direct === undefined ? Number.NaN : pick(r) - pick(direct);
            }),
          );
    list.push({
      path,
      rounds: pathRuns.length,
      validRounds: pathRuns.filter((r) => r.result.valid).length,
      offeredRate: median(pathRuns.map((r) => r.result.offeredRate)),
      achievedRate: median(pathRuns.map((r) => r.result.achievedRate)),
      p50Us: median(pathRuns.map((r) => r.result.latencyUs.p50)),
      p99Us: median(pathRuns.map((r) => r.result.latencyUs.p99)),
      p999Us: median(pathRuns.map((r) => r.result.latencyUs.p999)),
      maxUs: median(pathRuns.map((r) => r.result.latencyUs.max)),
      addedP50Us: added((r) => r.result.latencyUs.p50),
      addedP99Us: added((r) => r.result.latencyUs.p99),
      dispatchLagP99Us: median(pathRuns.map((r) => r.result.dispatchLagUs.p99)),
      cpuUsPerRequest: cpu,
      bad: pathRuns.reduce((total, r) => total + r.result.errors + r.result.timeouts + r.result.non2xx + r.result.mismatches, 0),
    });
  }
  return { rate: record.rate, tunnelMaxReqPerSec: record.tunnelMaxReqPerSec, maxFrom: record.maxFrom, paths: list };
}

const n = (value: number | null | undefined, digits = 0): string => formatNumber(value ?? Number.NaN, digits);

/**
 * Issue 25's targets from the summary: the headline tunnel (capture and inspector on) beside `ssh -R` in the
 * same run. A target with a part that was not measured is "not measured" (pass null), unless the part
 * that was measured already fails it.
 */
function acceptance25(summary: Summary, paths: readonly PathInfo[], tlsPath: string | null): AcceptanceRow[] {
  const rows: AcceptanceRow[] = [];
  const T = TARGETS_25;
  const tunnel = paths.find((p) => p.kind === 'tunnel' && p.capture === true && p.inspect !== false && p.id !== tlsPath)?.id;
  const group = (list: readonly GroupSummary[], method: Method, size: number, shape: Shape, path: string | undefined): GroupSummary | undefined =>
    list.find((g) => g.method === method && g.size === size && g.shape === shape && g.path === path);
  const notMeasured = (target: string, why = 'not measured'): AcceptanceRow => ({ target, measured: why, ssh: '–', pass: null });
  const both = (own: boolean, vsSsh: boolean | null): boolean | null => (!own ? false : vsSsh);
  const small: Array<[Method, Shape]> = [
    ['POST', 'length'],
    ['POST', 'chunked'],
    ['GET', 'length'],
    ['GET', 'chunked'],
  ];
  for (const [method, shape] of small) {
    const label = `${scenarioLabel({ method, size: SMALL, shape })} @100`;
    const target = `${label}: ≥ ${T.smallRatio} of direct and ≥ ssh -R's ratio`;
    const g = group(summary.groups, method, SMALL, shape, tunnel);
    const ssh = group(summary.groups, method, SMALL, shape, 'ssh');
    if (g === undefined) rows.push(notMeasured(target));
    else rows.push({ target, measured: `${n(g.ratio, 3)} (${n(g.tunnel.reqPerSec)} vs ${n(g.direct.reqPerSec)} req/s)`, ssh: ssh ? n(ssh.ratio, 3) : 'not measured', pass: both(g.ratio >= T.smallRatio, ssh ? g.ratio >= ssh.ratio : null) });
  }
  for (const [method, shape] of small) {
    const label = `${scenarioLabel({ method, size: SMALL, shape })} @100`;
    const target = `${label}: CPU µs/req on the path (edge + client) ≤ ${T.cpuVsSsh} × ssh -R's (sshd + ssh)`;
    const g = group(summary.groups, method, SMALL, shape, tunnel);
    const ssh = group(summary.groups, method, SMALL, shape, 'ssh');
    if (g === undefined) rows.push(notMeasured(target));
    else {
      const mine = g.cpuUsPerRequest.path;
      const theirs = ssh?.cpuUsPerRequest.path;
      rows.push({
        target,
        measured: `${n(mine)} µs${theirs !== undefined && Number.isFinite(theirs) ? ` (${n(mine! / theirs, 2)} ×)` : ''}`,
        ssh: theirs === undefined ? 'not measured' : `${n(theirs)} µs`,
        pass: theirs === undefined || !Number.isFinite(theirs) || !Number.isFinite(mine) ? null : mine! <= T.cpuVsSsh * theirs,
      });
    }
  }
  for (const [size, floor] of [
    [64 * KIB, T.ratio64KiB],
    [MIB, T.ratio1MiB],
  ] as const) {
    for (const method of ['POST', 'GET'] as Method[]) {
      for (const shape of ['length', 'chunked'] as Shape[]) {
        const g = group(summary.groups, method, size, shape, tunnel);
        const ssh = group(summary.groups, method, size, shape, 'ssh');
        // Where the target sits against two C proxies in the same group (their profile: "Floor profile").
        const nginx = group(summary.groups, method, size, shape, 'nginx2');
        const nginxText = nginx === undefined ? '' : `; floor in the same run: nginx → nginx ${n(nginx.ratio, 3)} (CPU ${n(nginx.cpuUsPerRequest.path)} µs/req)`;
        const target = `${scenarioLabel({ method, size, shape })}${g ? ` @${g.connections}` : ''}: ≥ ${floor} of direct`;
        if (g === undefined) rows.push(notMeasured(target));
        else rows.push({ target, measured: `${n(g.ratio, 3)} (CPU ${n(g.cpuUsPerRequest.path)} µs/req)${nginxText}`, ssh: ssh ? `${n(ssh.ratio, 3)} (CPU ${n(ssh.cpuUsPerRequest.path)} µs/req)` : 'not measured', pass: g.ratio >= floor });
      }
    }
  }
  for (const sender of ['undici', 'node-http', 'curl'] as Sender[]) {
    for (const [method, shape] of small) {
      const comparison = sender === 'curl' ? ' (not a target; for comparison)' : '';
      const target = `1 connection, ${sender}${comparison}, ${scenarioLabel({ method, size: SMALL, shape })}: added p50 ≤ max(${T.addedP50Us} µs, ssh -R's + ${T.addedP50OverSshUs} µs), p99 ≤ ${T.p99Us / 1000} ms`;
      const probe = summary.probes.find((p) => p.sender === sender && p.method === method && p.size === SMALL && p.shape === shape && p.path === tunnel);
      const ssh = summary.probes.find((p) => p.sender === sender && p.method === method && p.size === SMALL && p.shape === shape && p.path === 'ssh');
      if (probe === undefined || probe.addedP50Us === null) {
        if (sender !== 'curl') rows.push(notMeasured(target));
        continue;
      }
      const limit = Math.max(T.addedP50Us, ssh?.addedP50Us === null || ssh?.addedP50Us === undefined ? Number.NEGATIVE_INFINITY : ssh.addedP50Us + T.addedP50OverSshUs);
      rows.push({
        target,
        measured: `+p50 ${n(probe.addedP50Us)} µs (limit ${n(limit)}), p99 ${n(probe.p99Us)} µs`,
        ssh: ssh ? `+p50 ${n(ssh.addedP50Us)} µs, p99 ${n(ssh.p99Us)} µs` : 'not measured',
        pass: sender === 'curl' ? null : probe.addedP50Us <= limit && probe.p99Us <= T.p99Us,
      });
    }
  }
  const openTarget = `open loop, ${scenarioLabel({ method: 'POST', size: SMALL, shape: 'length' })}, offered half the tunnel's maximum: added p99 ≤ ${T.openLoopAddedP99Us / 1000} ms (corrected for coordinated omission)`;
  const open = summary.openloop;
  const openTunnel = open?.paths.find((p) => p.path === tunnel);
  if (!open || openTunnel === undefined) rows.push(notMeasured(openTarget));
  else {
    const ssh = open.paths.find((p) => p.path === 'ssh');
    const nginx = open.paths.find((p) => p.path === 'nginx2');
    const floor = nginx === undefined ? '' : `; floor in the same run: nginx → nginx +p99 ${n(nginx.addedP99Us)} µs (achieved ${n(nginx.achievedRate)})`;
    // Direct not held at the rate: the sender (or the machine) failed, not the path, and nothing is decided.
    // The tunnel not held: its latency only grows from there, so over the limit is a failure all the same.
    const directHeld = (open.paths.find((p) => p.path === 'direct')?.validRounds ?? 0) > 0;
    const tunnelHeld = openTunnel.validRounds === openTunnel.rounds;
    const added = openTunnel.addedP99Us;
    rows.push({
      target: openTarget,
      measured: `+p99 ${n(added)} µs at ${n(open.rate)} req/s (p99 ${n(openTunnel.p99Us)} µs; achieved ${n(openTunnel.achievedRate)})${tunnelHeld ? '' : '; the tunnel did not hold the rate'}${directHeld ? '' : '; direct did not hold the rate: undecided'}${floor}`,
      ssh: ssh ? `+p99 ${n(ssh.addedP99Us)} µs (achieved ${n(ssh.achievedRate)})` : 'not measured',
      pass: !directHeld || added === null || !Number.isFinite(added) ? null : added > T.openLoopAddedP99Us ? false : tunnelHeld ? true : null,
    });
  }
  for (const method of ['POST', 'GET'] as Method[]) {
    const target = `HTTPS public side + wss to the client (both Burrow), ${scenarioLabel({ method, size: SMALL, shape: 'length' })} @100: ≥ ${T.httpsRatio} of direct over plain HTTP`;
    const g = group(summary.https ?? [], method, SMALL, 'length', tlsPath ?? undefined);
    const ssh = group(summary.https ?? [], method, SMALL, 'length', 'ssh');
    const floors = HTTPS_FLOORS.flatMap(({ id, label }) => {
      const floor = group(summary.https ?? [], method, SMALL, 'length', id);
      return floor === undefined ? [] : [`${label} ${n(floor.ratio, 3)} (CPU ${n(floor.cpuUsPerRequest.path)} µs/req)`];
    });
    const floor = floors.length === 0 ? '' : `; ${floors.length === 1 ? 'floor' : 'floors'} in the same run: ${floors.join(', ')}`;
    if (g === undefined) rows.push(notMeasured(target));
    else rows.push({ target, measured: `${n(g.ratio, 3)} (${n(g.tunnel.reqPerSec)} vs ${n(g.direct.reqPerSec)} req/s; CPU ${n(g.cpuUsPerRequest.path)} µs/req)${floor}`, ssh: ssh ? `${n(ssh.ratio, 3)} (CPU ${n(ssh.cpuUsPerRequest.path)} µs/req)` : 'not measured', pass: g.ratio >= T.httpsRatio });
  }
  return rows;
}
