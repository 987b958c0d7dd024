/**
 * Results-file records for the summary's tests (bench/e2e/summary.ts): a load result at a given rate and
 * a matrix run of it, with the fields no test varies held fixed.
 */
import type { LoadResult } from '../../bench/e2e/load.js';
import { scenarioLabel, type Scenario } from '../../bench/e2e/payloads.js';
import type { RunRecord } from '../../bench/e2e/records.js';
import type { ProcStats } from '../../bench/e2e/sampler.js';

/** Four seconds at `reqPerSec`, every answer a 200, latencies fixed. */
export function loadAt(reqPerSec: number): LoadResult {
  const latencyMs = { p50: 1, p90: 2, p99: 3, p999: 4, mean: 1, max: 5 };
  return { reqPerSec, requests: reqPerSec * 4, durationS: 4, bytesPerSec: 0, latencyMs, errors: 0, timeouts: 0, non2xx: 0, mismatches: 0, bodiesChecked: true, resets: 0, statusCodes: { '200': reqPerSec * 4 } };
}

export interface RunSpec {
  seq: number;
  scenario: Scenario;
  path: string;
  reqPerSec: number;
  /** The direct run of its group; null for the direct run itself. */
  pairedWith: number | null;
  /** Each process's share of a core over the run, by name (the path's CPU per request comes from these). */
  procs: Record<string, ProcStats>;
  /** A Burrow tunnel (capture and inspector on), not a floor or direct. */
  tunnel?: boolean;
}

/** One matrix run at 100 connections in round 1, on a quiet machine. */
export function runRecord({ seq, scenario, path, reqPerSec, pairedWith, procs, tunnel = false }: RunSpec): RunRecord {
  return {
    seq,
    round: 1,
    scenario: `${scenarioLabel(scenario)} @100`,
    ...scenario,
    connections: 100,
    path,
    capture: tunnel ? true : null,
    inspect: tunnel ? true : null,
    pairedWith,
    startedAtS: seq,
    load: loadAt(reqPerSec),
    procs,
    runnerCpuPct: 20,
    systemCpuPct: 200,
    otherCpuPct: 0,
    stealCpuPct: 0,
    interruptCpuPct: 10,
    clientLog: null,
    discarded: null,
  };
}

/** `cpuPct` of a core each, by process name. */
export function procsAt(cpuPct: number, names: readonly string[]): Record<string, ProcStats> {
  return Object.fromEntries(names.map((name) => [name, { peakRssMiB: null, cpuPct }]));
}
