/**
 * What a capture costs the store when a ring holds captures of mixed sizes (issue 25): the real
 * CaptureStore, one capture a commit (a lone upload among webhooks pays its commit alone), with big
 * records in the blocks file (src/store/capture-blocks.ts, as `CaptureStore.open` makes it) against the
 * same store with every record whole in LMDB (a store made on the environment directly, as before the
 * blocks file), each in its own fresh directory.
 *
 * Each store's ring first takes a lap of 1 MiB captures (the file grows: not measured), then a lap more
 * (measured: a ring of one size), then `--mixes` times a block each of small, mid and big captures
 * in turn (the benchmark's matrix mixes its rows so). CPU µs a capture, user + system, from
 * `process.cpuUsage`.
 *
 * Not a test and not in `npm run bench`: the figures are in bench/RESULTS.md's tuning log ("big capture
 * records in blocks of their own").
 * Run: npx tsc -p . && node dist/bench/store/capture-mixed-sizes.js [--ring 1000] [--mixes 2] [--dir DIR]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { open } from 'lmdb';
import { encode } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { CAPTURE_PAGE_BYTES, CaptureStore, type RingHandle, type StoredCapture } from '../../src/store/captures.js';

const { values } = parseArgs({
  options: {
    ring: { type: 'string', default: '1000' },
    mixes: { type: 'string', default: '2' },
    dir: { type: 'string', default: tmpdir() },
  },
});
const capacity = Number(values.ring);
const mixes = Number(values.mixes);

const SIZES = { small: 2_400, mid: 64 * 1024, big: 1024 * 1024 } as const;
type Size = keyof typeof SIZES;
const bodies = Object.fromEntries(Object.entries(SIZES).map(([name, size]) => [name, Buffer.alloc(size, 0x62)])) as Record<Size, Buffer>;

function capture(ring: RingHandle, size: Size): { seq: number; stored: StoredCapture } {
  const { seq, id } = ring.next();
  const body = bodies[size];
  return {
    seq,
    stored: {
      id, seq, subdomain: ring.subdomain, accountId: ring.accountId, tokenId: 'tok_00000000', clientAddress: '127.0.0.1',
      method: 'POST', path: '/hook', status: 200, receivedAt: Date.now(), durationMs: 1, error: null, replayOf: null,
      requestBodySize: body.byteLength, requestTruncated: false, responseBodySize: 0, responseTruncated: false,
      open: encode([FrameType.OPEN, 1, id, 'POST', '/hook', ['content-type', 'application/json'], '127.0.0.1', null, false, false]),
      requestHeaders: null, requestBody: body, response: null, responseHeaders: [], responseBody: null,
    },
  };
}

interface Layout {
  name: string;
  store: CaptureStore;
  ring: RingHandle;
  dir: string;
}

function layout(name: string, blocks: boolean): Layout {
  const dir = mkdtempSync(join(values.dir, `burrow-capture-mixed-${name}-`));
  const store = blocks
    ? CaptureStore.open(dir)
    : new CaptureStore(open({ path: dir, noSubdir: false, maxDbs: 8, compression: false, noSync: true, pageSize: CAPTURE_PAGE_BYTES }));
  return { name, store, ring: store.ring('usr_bench', 'mixed', capacity, Infinity), dir };
}

function block(layout: Layout, size: Size, count: number): number {
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const { seq, stored } = capture(layout.ring, size);
    layout.store.writeAll([{ ring: layout.ring, seq, storedCapture: () => stored }]);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

const layouts = [layout('lmdb', false), layout('blocks', true)];
try {
  const rows: [string, ...number[]][] = [];
  const row = (label: string, size: Size, count: number): void => {
    rows.push([`${label}: ${size}`, ...layouts.map((each) => block(each, size, count))]);
  };
  for (const each of layouts) block(each, 'big', capacity);
  row('one size, lapped', 'big', capacity);
  for (let mix = 1; mix <= mixes; mix++) {
    row(`mixed ${mix}`, 'small', Math.round(capacity * 1.5));
    row(`mixed ${mix}`, 'mid', capacity);
    row(`mixed ${mix}`, 'big', capacity);
  }
  process.stdout.write(`ring of ${capacity}, one capture a commit: CPU µs a capture\n\n| captures | ${layouts.map((each) => each.name).join(' | ')} |\n| :--- |${layouts.map(() => ' ---: |').join('')}\n`);
  for (const [label, ...figures] of rows) process.stdout.write(`| ${label} | ${figures.map((figure) => figure.toFixed(0)).join(' | ')} |\n`);
} finally {
  for (const each of layouts) {
    await each.store.close();
    rmSync(each.dir, { recursive: true, force: true });
  }
}
