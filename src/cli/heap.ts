/**
 * V8's old-generation growth for the commands that carry traffic: `burrow edge` and `burrow http`.
 *
 * Both keep a small live heap (10-20 MB) while large bodies stream through them as Buffers, whose memory
 * V8 counts toward the same limit. With V8's default growth the limit stayed just above the live heap,
 * so 1 MiB bodies started a full mark-compact every third to fifth request: on the edge, 27 major GCs
 * per 100 uploads of 1 MiB and 11.4 ms of CPU per upload; with the limit at four times what is live
 * after each collection, none, and 4.4 ms. The client: 41 major GCs per 200 downloads of 1 MiB and
 * 8.7 ms per download, then 9 and 5.9 ms (bench/RESULTS.md, tuning log). The price is memory while big
 * bodies flow, since garbage (Buffers included) waits longer: the client's RSS 178 -> 193 MiB in that
 * run, the edge's anonymous memory peak 107 -> 164 MiB over the whole benchmark. Idle, V8's memory
 * reducer gave the client's heap back (31 -> 14 MB within 25 s); the edge's stayed at its 54 MB.
 * Unlike `--initial-old-space-size`, which also works but is refused in NODE_OPTIONS and read only at
 * start-up, this flag can be set from inside the process, so `npx burrow`, `npm start` and a systemd
 * unit all get it without a wrapper.
 */
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_FLAG = '--heap-growing-percent';
export const HEAP_GROWING_PERCENT = 300;

/**
 * The flag to set, or null when the user chose their own growth on node's command line (theirs wins;
 * NODE_OPTIONS cannot carry it).
 */
export function heapGrowingFlag(execArgv: readonly string[]): string | null {
  const chosen = (arg: string): boolean => arg.startsWith(HEAP_GROWING_FLAG) || arg.startsWith('--heap_growing_percent');
  return execArgv.some(chosen) ? null : `${HEAP_GROWING_FLAG}=${HEAP_GROWING_PERCENT}`;
}

/** Sets the growth for this process unless the user set one. */
export function tuneHeapForTraffic(): void {
  const flag = heapGrowingFlag(process.execArgv);
  if (flag !== null) setFlagsFromString(flag);
}
