/** What one benchmark run records, as written to bench/out/e2e-*.json. */
import type { LoadResult, Method } from './load.js';
import type { ProbeResult } from './probe.js';
import type { ProcStats } from './sampler.js';

/** A tunnel configuration: which edge (capture on/off) and which client (inspector on/off). */
export interface TunnelInfo {
  id: string;
  capture: boolean;
  /** null when `burrow http` had no inspector switch. */
  inspect: boolean | null;
  label: string;
}

export interface ClientLogCounts {
  /** Exchanges the client logged. */
  lines: number;
  /** "ERR ... cancelled by the edge": the public side went away, as autocannon does to in-flight requests when a run stops. */
  cancelled: number;
  /** Every other exchange that did not end 2xx. */
  failed: number;
  sample: string[];
}

export interface RunRecord {
  seq: number;
  round: number;
  scenario: string;
  method: Method;
  connections: number;
  /** 'direct' or a tunnel config id. */
  path: string;
  capture: boolean | null;
  inspect: boolean | null;
  /** For a tunnel run, the seq of the direct run just before it. */
  pairedWith: number | null;
  startedAtS: number;
  load: LoadResult;
  procs: Record<string, ProcStats>;
  runnerCpuPct: number;
  /**
   * Over the run, percent of one core: what all processes on the machine used, the part of it no process
   * of this benchmark used, what the hypervisor gave other guests (steal), and interrupt work (mostly the
   * benchmark's own loopback traffic). Files written before steal was split out lack the last two, and
   * their "other" included both.
   */
  systemCpuPct: number | null;
  otherCpuPct: number | null;
  stealCpuPct: number | null;
  interruptCpuPct: number | null;
  /** What the client logged for this run (read after the pause, so the run's own end is included). */
  clientLog: ClientLogCounts | null;
  /** Why this run was thrown away and run again (foreign CPU load), or null for a run that counts. */
  discarded: string | null;
}

export interface WarmupRecord {
  path: string;
  method: Method;
  connections: number;
  load: LoadResult;
}

export interface ProbeRecord {
  round: number;
  method: Method;
  path: string;
  result: ProbeResult;
  /** CPU other processes used while the probe ran, and steal, percent of one core. */
  otherCpuPct: number | null;
  stealCpuPct: number | null;
  discarded: string | null;
}
