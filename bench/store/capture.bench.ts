/**
 * Micro-benchmark of capture writes (tinybench) on real LMDB in a temp dir: how many captures per second
 * the edge can commit, each with 1 KiB request and response bodies, in the batch sizes a loop turn
 * produces (1 under light load, 10 and 100 under heavy load), stored as the edge stores them (the OPEN
 * and RESPONSE frames as they crossed the tunnel), with the capture environment's default
 * (no fsync per commit) and with --capture-fsync. Also what awaiting lmdb's asynchronous put costs,
 * the path the edge no longer takes.
 *
 * Run: npx tsc -p . && node dist/bench/store/capture.bench.js [--time MS]
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { mkdtempSync } from 'node:fs';
import { Bench } from 'tinybench';
import { encode } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { CaptureStore, type RingHandle, type StoredCapture } from '../../src/store/captures.js';
import { printBenchTable } from '../micro-table.js';

const { values } = parseArgs({ options: { time: { type: 'string', default: '1000' } } });
const time = Number(values.time);

const body = Buffer.alloc(1024, 0x61);
const headers = ['content-type', 'application/json', 'user-agent', 'webhook-sender/1.0', 'x-signature', 'sha256=0123456789abcdef'];

const requestHeaders = [
  'host', 'bench-river.localhost:8080', 'user-agent', 'Stripe/1.0', 'content-type', 'application/json',
  'content-length', '1024', 'accept', '*/*', 'stripe-signature', 't=1,v1=5257a869e7ecebeda32affa62cdca3fa',
  'x-forwarded-for', '203.0.113.9', 'x-forwarded-proto', 'https', 'x-forwarded-host', 'bench-river.localhost:8080',
];
// The frames as they crossed the tunnel: what the edge stores for a webhook with 1 KiB each way.
const openFrame = encode([FrameType.OPEN, 1, 'req_x', 'POST', '/webhooks/stripe', requestHeaders, '203.0.113.9', body, true, false]);
const responseFrame = encode([FrameType.RESPONSE, 1, 200, 'OK', headers, body, true]);

function capture(ring: RingHandle, seq: number, id: string): StoredCapture {
  return {
    id,
    seq,
    subdomain: ring.subdomain,
    accountId: ring.accountId,
    tokenId: 'tok_0123abcd',
    clientAddress: '203.0.113.9',
    method: 'POST',
    path: '/webhooks/stripe',
    status: 200,
    receivedAt: Date.now(),
    durationMs: 1,
    error: null,
    replayOf: null,
    requestBodySize: body.length,
    requestTruncated: false,
    responseBodySize: body.length,
    responseTruncated: false,
    open: openFrame,
    requestHeaders: null,
    requestBody: null,
    response: responseFrame,
    responseHeaders: null,
    responseBody: null,
  };
}

const dirs: string[] = [];
function open(fsync: boolean): { store: CaptureStore; ring: RingHandle } {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-capture-bench-'));
  dirs.push(dir);
  const store = CaptureStore.open(dir, { fsync });
  return { store, ring: store.ring('usr_bench', 'bench-river', 10_000) };
}

function writer(target: { store: CaptureStore; ring: RingHandle }, batchSize: number): () => void {
  return () => {
    const batch = [];
    for (let i = 0; i < batchSize; i++) {
      const { seq, id } = target.ring.next();
      const record = capture(target.ring, seq, id);
      batch.push({ ring: target.ring, seq, storedCapture: () => record });
    }
    target.store.writeAll(batch);
  };
}

const fast = open(false);
const durable = open(true);
const bench = new Bench({ time, warmupTime: Math.min(200, time / 5) });
for (const size of [1, 10, 100]) bench.add(`commit a turn of ${size} (no fsync, default)`, writer(fast, size));
for (const size of [1, 100]) bench.add(`commit a turn of ${size} (--capture-fsync)`, writer(durable, size));
// What the edge did before: one asynchronous put per capture, awaited before the response's last byte.
const root = (fast.store as unknown as { root: { openDB(options: object): { put(key: number, value: unknown): Promise<boolean> } } }).root;
const slots = root.openDB({ name: 'bench-async', encoding: 'msgpack' });
let key = 0;
bench.add('await one async put (not used)', async () => {
  const { seq, id } = fast.ring.next();
  await slots.put(key++ % 1000, capture(fast.ring, seq, id));
});

await bench.run();
printBenchTable('capture writes', bench, 'A row is one loop turn; captures/s = ops/s x batch size.');
const perCapture = bench.tasks.map((task) => {
  const size = Number(/turn of (\d+)/.exec(task.name)?.[1] ?? 1);
  return { name: task.name, 'µs/capture': (task.result.state === 'completed' ? (task.result.period * 1000) / size : NaN).toFixed(1), 'captures/s': task.result.state === 'completed' ? Math.round((1000 / task.result.period) * size).toLocaleString('en-US') : '' };
});
console.table(perCapture);

await fast.store.close();
await durable.store.close();
for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
