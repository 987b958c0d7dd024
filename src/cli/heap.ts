/**
 * V8's old-generation growth for `burrow edge`.
 *
 * The edge keeps a small live heap (10-20 MB) while large bodies stream through it as Buffers, whose
 * memory V8 counts toward the same limit. With V8's default growth the limit stayed just above the live
 * heap, so 1 MiB uploads started a full mark-compact every third or fourth request: 27 major GCs per
 * 100 uploads and 11.4 ms of edge CPU per upload; with the limit at four times what is live after each
 * collection, none, and 4.4 ms (bench/RESULTS.md, tuning log). The price is memory: garbage, Buffers
 * included, waits longer, so under 1 MiB bodies the edge's RSS rose from ~265 to ~380 MiB; at rest and with
 * small requests it stays where it was. `burrow http` keeps V8's default (a laptop's memory matters
 * more there, and its gain was small: 7.0 -> 6.3 ms per upload).
 * Unlike `--initial-old-space-size`, which also works but is refused in NODE_OPTIONS and read only at
 * start-up, this flag can be set from inside the process, so `npx burrow edge`, `npm start` and a
 * systemd unit all get it without a wrapper.
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
