/** What one benchmark run records, as written to bench/out/e2e-*.json. */
import type { LoadResult } from './load.js';
import type { Method, Shape } from './payloads.js';
import type { ProbeResult, Sender } from './probe.js';
import type { ProcStats } from './sampler.js';

/**
 * A path requests take: `direct`, a tunnel configuration (edge capture on/off, client inspector on/off) or
 * a floor (two nginx, two bare relays, the minimal one-process proxy). `processes` are the processes on
 * the path, besides the target, by role: what the per-request CPU is read from.
 */
export interface PathInfo {
  id: string;
  kind: 'direct' | 'tunnel' | 'floor';
  label: string;
  processes: string[];
  /** Tunnels only. */
  capture?: boolean;
  /** Tunnels only; null when `burrow http` had no inspector switch. */
  inspect?: boolean | null;
}

/** The older name: a tunnel configuration. */
export interface TunnelInfo {
  id: string;
  capture: boolean;
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
  /** e.g. "POST 1 KiB up, length @100": method, size, shape and connections. */
  scenario: string;
  method: Method;
  size: number;
  shape: Shape;
  connections: number;
  /** 'direct' or a path id. */
  path: string;
  capture: boolean | null;
  inspect: boolean | null;
  /** For a run through a hop, the seq of the direct run of its group (run just before the others). */
  pairedWith: number | null;
  startedAtS: number;
  load: LoadResult;
  /** By role: `target`, and the path's processes (`edge`, `client`, `nginx-front`, ...). */
  procs: Record<string, ProcStats>;
  runnerCpuPct: number;
  /**
   * Over the run, percent of one core: what all processes on the machine used, the part of it no process
   * of this benchmark used, what the hypervisor gave other guests (steal), and interrupt work (mostly the
   * benchmark's own loopback traffic).
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
  /**
   * What a warm-up beyond the per-path one was for: lapping a capturing tunnel's ring with 1 MiB uploads
   * (`ring-fill`), then with small requests (`ring-settle`). Absent in the per-path warm-ups, and in every
   * warm-up of a file written before the field (there the ring fill is the one at 10 connections).
   */
  purpose?: 'ring-fill' | 'ring-settle';
}

export interface ProbeRecord {
  round: number;
  sender: Sender;
  method: Method;
  size: number;
  shape: Shape;
  path: string;
  result: ProbeResult;
  /** CPU other processes used while the probe ran, and steal, percent of one core. */
  otherCpuPct: number | null;
  stealCpuPct: number | null;
  discarded: string | null;
}

/** One load run of the many-tenant phase: the same load generator, spread over one or many tunnels (or direct). */
export interface TenantRun {
  /** 0: the warm-up round, shown but left out of the medians. */
  round: number;
  /** 'direct', 'one tunnel' or 'N tunnels'. */
  path: string;
  tunnels: number;
  /** autocannon instances (one per tunnel) × connections each. */
  instances: number;
  connectionsEach: number;
  reqPerSec: number;
  requests: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  /** CPU µs per request by role (edge, fleet = all tunnel clients in one process, target, runner). */
  cpuUsPerRequest: Record<string, number | null>;
  otherCpuPct: number | null;
  stealCpuPct: number | null;
}

export interface FleetDone {
  planned: number;
  connected: number;
  failed: number;
  notTried: number;
  ms: number;
  perSecond: number | null;
  rssMiB: number;
  errors: Array<{ message: string; count: number }>;
}

export interface TenantsRecord {
  tunnels: number;
  connectionsEach: number;
  scenario: string;
  durationS: number;
  fleet: FleetDone | null;
  runs: TenantRun[];
  /** Tunnels that dropped or reconnected during the phase. */
  drops: number;
  error: string | null;
}

export interface IdleRecord {
  planned: number;
  deadlineS: number;
  concurrency: number;
  /** `ulimit -n` of the runner (soft / hard), and what the fleet and the edge were given. */
  fdLimit: { soft: number | null; hard: number | null; children: number | null; raised: boolean };
  fleet: FleetDone | null;
  edgeRssBeforeMiB: number | null;
  edgeRssAfterMiB: number | null;
  /** The anonymous part of the edge's RSS (no file pages of its LMDB maps). */
  edgeAnonBeforeMiB: number | null;
  edgeAnonAfterMiB: number | null;
  edgeHwmMiB: number | null;
  /** (after − before) ÷ connected tunnels, KiB. */
  edgeKiBPerTunnel: number | null;
  fleetRssMiB: number | null;
  /** Edge CPU over the connect phase, ms per tunnel. */
  edgeCpuMsPerConnect: number | null;
  /** Tunnels that dropped or reconnected while held idle. */
  drops: number;
  heldS: number;
  /** A GET through a sample of the idle tunnels afterwards: they still answer. */
  spotCheck: { tried: number; ok: number; failures: string[] };
  error: string | null;
}

/** One open-loop run (bench/e2e/open-loop.ts) of one path at the phase's offered rate. */
export interface OpenLoopRun {
  round: number;
  path: string;
  result: import('./open-loop.js').OpenLoopResult;
  /** By role, over warm-up and window (the rate is the same over both): `target` and the path's processes. */
  procs: Record<string, ProcStats>;
  /** The sender (undici Pool in the runner), percent of one core. */
  runnerCpuPct: number;
  otherCpuPct: number | null;
  stealCpuPct: number | null;
}

/** The open-loop phase: every path offered the same constant rate, half the tunnel's measured maximum. */
export interface OpenLoopRecord {
  scenario: { method: Method; size: number; shape: Shape };
  /** Offered req/s to every path. */
  rate: number;
  /** The tunnel's closed-loop maximum the rate is half of, and where it came from. */
  tunnelMaxReqPerSec: number;
  maxFrom: string;
  connections: number;
  durationS: number;
  warmupS: number;
  runs: OpenLoopRun[];
  sshSkipped: string | null;
  error: string | null;
}

/** The HTTPS phase: a TLS edge (HTTPS public side, wss to the client) beside direct over plain HTTP. */
export interface HttpsRecord {
  /** The TLS tunnel's path id (its PathInfo is in the results' paths). */
  path: string;
  runs: RunRecord[];
  sshSkipped: string | null;
  error: string | null;
}
