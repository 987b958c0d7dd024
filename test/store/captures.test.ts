/**
 * The capture ring buffer on real LMDB in a temp dir: slots, ids, listing, the sweep, reopening.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { encode } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { captureId, CaptureStore, decodeStoredCapture, encodeStoredCapture, expandCapture, parseCaptureId, type RingHandle, type StoredCapture } from '../../src/store/captures.js';
import { tempDir } from '../helpers.js';

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function freshStore(): { store: CaptureStore; dir: string } {
  const dir = tempDir('burrow-captures-');
  dirs.push(dir);
  return { store: CaptureStore.open(dir), dir };
}

function record(ring: RingHandle, seq: number, id: string, receivedAt: number, path: string): StoredCapture {
  return {
    id,
    seq,
    subdomain: ring.subdomain,
    accountId: ring.accountId,
    tokenId: 'tok_00000000',
    clientAddress: '127.0.0.1',
    method: 'POST',
    path,
    status: 200,
    receivedAt,
    durationMs: 1,
    error: null,
    replayOf: null,
    requestBodySize: 2,
    requestTruncated: false,
    responseBodySize: 0,
    responseTruncated: false,
    open: encode([FrameType.OPEN, 1, id, 'POST', path, ['content-type', 'application/json'], '127.0.0.1', Buffer.from('{}'), true, false]),
    requestHeaders: null,
    requestBody: null,
    response: null,
    responseHeaders: [],
    responseBody: null,
  };
}

/** Writes `count` captures through the ring, `stepMs` apart from `start`; returns their ids. */
function fill(store: CaptureStore, ring: RingHandle, count: number, start: number, stepMs = 1): string[] {
  const ids: string[] = [];
  const batch = [];
  for (let i = 0; i < count; i++) {
    const { seq, id } = ring.next();
    ids.push(id);
    const capture = record(ring, seq, id, start + i * stepMs, `/n/${i}`);
    batch.push({ ring, seq, storedCapture: () => capture });
  }
  store.writeAll(batch);
  return ids;
}

test('request ids name their ring and sequence, and nothing else parses', () => {
  assert.equal(captureId(1, 41), 'req_00000001000000000029');
  assert.deepEqual(parseCaptureId(captureId(0xabcdef, 2 ** 40)), { ringId: 0xabcdef, seq: 2 ** 40 });
  for (const bad of ['req_1', 'req_000000010000000000zz', 'tok_0000000100000000002a', '']) assert.equal(parseCaptureId(bad), null);
});

test('a ring keeps the newest `capacity` captures; overwritten ids are gone', () => {
  const { store } = freshStore();
  const ring = store.ring('usr_a', 'river-one', 4);
  const ids = fill(store, ring, 7, Date.now());
  const listed = store.list('usr_a', 'river-one', { limit: 100, retentionMs: 60_000 })!;
  assert.deepEqual(listed.map((entry) => entry.path), ['/n/6', '/n/5', '/n/4', '/n/3']);
  assert.equal(store.get('usr_a', ids[0]!, 60_000), null);
  const newest = store.get('usr_a', ids[6]!, 60_000)!;
  assert.equal(newest.path, '/n/6');
  // The head and body come back out of the stored OPEN frame.
  assert.deepEqual(newest.requestHeaders, ['content-type', 'application/json']);
  assert.equal(Buffer.from(newest.requestBody!).toString(), '{}');
});

test('each account has its own ring per subdomain; another account sees nothing', () => {
  const { store } = freshStore();
  const mine = store.ring('usr_a', 'shared-name', 10);
  const theirs = store.ring('usr_b', 'shared-name', 10);
  assert.notEqual(mine.ringId, theirs.ringId);
  const [id] = fill(store, mine, 1, Date.now());
  assert.equal(store.list('usr_b', 'shared-name', { limit: 10, retentionMs: 60_000 })!.length, 0);
  assert.equal(store.get('usr_b', id!, 60_000), null);
  assert.equal(store.list('usr_c', 'shared-name', { limit: 10, retentionMs: 60_000 }), null);
});

test('the time window hides old captures on read and the sweep removes them', async () => {
  const { store } = freshStore();
  const ring = store.ring('usr_a', 'old-river', 100);
  const now = Date.now();
  const ids = fill(store, ring, 5, now - 10_000, 1_000); // 10 s to 6 s old
  const fresh = fill(store, ring, 2, now);
  assert.equal(store.list('usr_a', 'old-river', { limit: 100, retentionMs: 5_000, now })!.length, 2);
  assert.equal(store.get('usr_a', ids[0]!, 5_000, now), null);
  // With a generous window they are still there, until the sweep runs.
  assert.ok(store.get('usr_a', ids[0]!, 60_000, now));
  const removed = await store.sweep(() => 5_000, now);
  assert.equal(removed, 5);
  assert.equal(store.get('usr_a', ids[0]!, 60_000, now), null);
  assert.ok(store.get('usr_a', fresh[1]!, 60_000, now));
  assert.equal(await store.sweep(() => 5_000, now), 0);
});

test('before= pages by sequence, even past captures that expired', () => {
  const { store } = freshStore();
  const ring = store.ring('usr_a', 'pages', 100);
  const ids = fill(store, ring, 6, Date.now());
  const seq = store.seqInRing('usr_a', 'pages', ids[3]!)!;
  const page = store.list('usr_a', 'pages', { limit: 2, beforeSeq: seq, retentionMs: 60_000 })!;
  assert.deepEqual(page.map((entry) => entry.id), [ids[2], ids[1]]);
  assert.equal(store.seqInRing('usr_a', 'other', ids[3]!), null);
});

test('reopening keeps the captures and continues the sequence (no id is reused)', async () => {
  const { store, dir } = freshStore();
  const ring = store.ring('usr_a', 'durable', 50);
  const ids = fill(store, ring, 3, Date.now());
  await store.close();
  const reopened = CaptureStore.open(dir);
  assert.equal(reopened.list('usr_a', 'durable', { limit: 10, retentionMs: 60_000 })!.length, 3);
  const again = reopened.ring('usr_a', 'durable', 50);
  const next = again.next();
  assert.ok(!ids.includes(next.id));
  assert.equal(next.seq, 3);
  await reopened.close();
});

test('the stored format round-trips every field and section, null sections included', () => {
  const full: StoredCapture = {
    id: 'req_00000001000000000007',
    seq: 7,
    subdomain: 'quiet-river-42',
    accountId: 'usr_0123456789abcdef',
    tokenId: 'tok_0123abcd',
    clientAddress: '2001:db8::1',
    method: 'PATCH',
    path: '/a/b?c=d',
    status: 504,
    receivedAt: 1_795_000_000_123,
    durationMs: 30_001,
    error: 'LOCAL_TIMEOUT',
    replayOf: 'req_00000001000000000001',
    requestBodySize: 5_000,
    requestTruncated: true,
    responseBodySize: 0,
    responseTruncated: false,
    open: null,
    requestHeaders: ['x-a', '1', 'x-a', '2'],
    requestBody: Buffer.from('partial body'),
    response: encode([FrameType.RESPONSE, 3, 200, 'OK', ['content-type', 'text/plain'], Buffer.from('hello'), true]),
    responseHeaders: null,
    responseBody: null,
  };
  const decoded = decodeStoredCapture(encodeStoredCapture(full));
  assert.deepEqual({ ...decoded, requestBody: Buffer.from(decoded.requestBody!), response: Buffer.from(decoded.response!) }, {
    ...full,
    requestBody: Buffer.from(full.requestBody!),
    response: Buffer.from(full.response!),
  });
  const expanded = expandCapture(decoded);
  assert.deepEqual(expanded.responseHeaders, ['content-type', 'text/plain']);
  assert.equal(Buffer.from(expanded.responseBody!).toString(), 'hello');
  assert.deepEqual(expanded.requestHeaders, ['x-a', '1', 'x-a', '2']);
  assert.equal(Buffer.from(expanded.requestBody!).toString(), 'partial body');
});

test('after a crash the ring head is recovered from the slots: nothing listed is lost, no id is reused', async () => {
  const dir = tempDir('burrow-captures-');
  dirs.push(dir);
  // A separate process writes seven captures (a hole where a request was in flight) and dies without
  // closing (the head is written lazily).
  const script = `
    const { CaptureStore } = await import(${JSON.stringify(new URL('../../src/store/captures.js', import.meta.url).href)});
    const { encode } = await import(${JSON.stringify(new URL('../../src/protocol/codec.js', import.meta.url).href)});
    const store = CaptureStore.open(${JSON.stringify(dir)});
    const ring = store.ring('usr_a', 'crashy', 100);
    const batch = [];
    for (let i = 0; i < 8; i++) {
      const { seq, id } = ring.next();
      if (i === 5) continue; // a request in flight when the process died: allocated, never written
      const open = encode([2, 1, id, 'GET', '/c/' + i, [], '127.0.0.1', null, true]);
      const record = { id, seq, subdomain: 'crashy', accountId: 'usr_a', tokenId: 't', clientAddress: '127.0.0.1', method: 'GET',
        path: '/c/' + i, status: 200, receivedAt: Date.now(), durationMs: 1, error: null, replayOf: null, requestBodySize: 0,
        requestTruncated: false, responseBodySize: 0, responseTruncated: false, open, requestHeaders: null, requestBody: null,
        response: null, responseHeaders: [], responseBody: null };
      batch.push({ ring, seq, storedCapture: () => record });
    }
    store.writeAll(batch);
    process.kill(process.pid, 'SIGKILL');
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' });
  const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
  assert.equal(signal, 'SIGKILL');

  const store = CaptureStore.open(dir);
  const listed = store.list('usr_a', 'crashy', { limit: 100, retentionMs: 60_000 })!;
  assert.deepEqual(listed.map((entry) => entry.path), ['/c/7', '/c/6', '/c/4', '/c/3', '/c/2', '/c/1', '/c/0']);
  const ring = store.ring('usr_a', 'crashy', 100);
  assert.equal(ring.next().seq, 8);
  await store.close();
});

test('search: newest first, bounded by captures and by body bytes read, and says where to go on', () => {
  const { store } = freshStore();
  const ring = store.ring('usr_s', 'search-one', 16);
  const ids = fill(store, ring, 10, Date.now());
  const options = { limit: 50, retentionMs: 60_000, maxScanned: 1000, maxBodyBytes: 1 << 20 };
  // The body '{}' is inside the stored OPEN frame: found there, case-insensitively for the path.
  const inBody = store.search('usr_s', 'search-one', '{}', options)!;
  assert.deepEqual(inBody.matches.map((m) => m.id), [...ids].reverse());
  assert.equal(inBody.resumeBefore, null);
  assert.deepEqual(store.search('usr_s', 'search-one', '/N/3', options)!.matches.map((m) => m.path), ['/n/3']);
  assert.deepEqual(store.search('usr_s', 'search-one', 'APPLICATION/JSON', { ...options, limit: 2 })!, {
    matches: store.search('usr_s', 'search-one', 'application/json', { ...options, limit: 2 })!.matches,
    scanned: 2,
    resumeBefore: ids[8],
  });
  // Each capture reads 2 body bytes: past 5, the search stops after the third and goes on from there.
  const byBytes = store.search('usr_s', 'search-one', 'z', { ...options, maxBodyBytes: 5 })!;
  assert.deepEqual(byBytes, { matches: [], scanned: 3, resumeBefore: ids[7] });
  const byCount = store.search('usr_s', 'search-one', 'z', { ...options, maxScanned: 4, beforeSeq: parseCaptureId(ids[7]!)!.seq })!;
  assert.deepEqual(byCount, { matches: [], scanned: 4, resumeBefore: ids[3] });
  assert.equal(store.search('usr_s', 'never-had', 'z', options), null);
});
