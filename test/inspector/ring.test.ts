/**
 * The ring's bounds: never more than maxExchanges entries nor maxBytes bytes, oldest out first, lookups
 * by id, newest-first pages; and the same through a real tunnel.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { bodyLength, wholeBody } from '../../src/capture-buffer.js';
import type { Exchange } from '../../src/client/exchange.js';
import { ARENA_MIN_BODY, ENTRY_OVERHEAD, ExchangeRing, sizeOf } from '../../src/inspector/ring.js';
import { inspect, startStack } from './fixture.js';

let counter = 0;

function exchange(bodyBytes = 0, id = `req_${(counter++).toString(16).padStart(20, '0')}`): Exchange {
  return {
    id,
    method: 'POST',
    path: '/x',
    port: 3000,
    requestHeaders: ['content-type', 'application/json'],
    requestBody: bodyBytes > 0 ? Buffer.alloc(bodyBytes, 1) : null,
    requestBodySize: bodyBytes,
    requestTruncated: false,
    status: 200,
    responseHeaders: [],
    responseBody: null,
    responseBodySize: 0,
    responseTruncated: false,
    startedAt: Date.now(),
    latencyMs: 1,
    error: null,
    replayOf: null,
  };
}

describe('ExchangeRing', () => {
  test('keeps at most maxExchanges, evicting the oldest', () => {
    const ring = new ExchangeRing({ maxExchanges: 3, maxBytes: 1_000_000 });
    const added = Array.from({ length: 5 }, () => exchange());
    for (const item of added) ring.add(item);
    assert.equal(ring.size, 3);
    assert.deepEqual(
      ring.list(10).map((entry) => entry.exchange.id),
      added.slice(2).reverse().map((item) => item.id),
    );
    assert.equal(ring.get(added[0]!.id), undefined);
    assert.equal(ring.get(added[1]!.id), undefined);
    assert.equal(ring.get(added[4]!.id)?.exchange.id, added[4]!.id);
    assert.equal(ring.newest()?.exchange.id, added[4]!.id);
  });

  test('keeps at most maxBytes, counting bodies, headers and a fixed overhead', () => {
    const one = sizeOf(exchange(1000));
    assert.equal(one, ENTRY_OVERHEAD + 'POST'.length + '/x'.length + 'content-type'.length + 'application/json'.length + 1000);
    const ring = new ExchangeRing({ maxExchanges: 100, maxBytes: one * 3 + 10 });
    const added = Array.from({ length: 10 }, () => exchange(1000));
    for (const item of added) ring.add(item);
    assert.equal(ring.size, 3);
    assert.ok(ring.bytes <= ring.maxBytes);
    assert.deepEqual(
      ring.list(10).map((entry) => entry.exchange.id),
      added.slice(7).reverse().map((item) => item.id),
    );
  });

  test('an exchange larger than the whole bound keeps its head, without bodies, marked truncated', () => {
    const ring = new ExchangeRing({ maxExchanges: 10, maxBytes: 4096 });
    ring.add(exchange(100));
    const big = ring.add(exchange(10_000));
    assert.equal(big.exchange.requestBody, null);
    assert.equal(big.exchange.requestTruncated, true);
    assert.equal(big.exchange.requestBodySize, 10_000);
    assert.ok(ring.bytes <= 4096);
  });

  test('a small view of a large buffer is copied, so the large one can go', () => {
    const ring = new ExchangeRing();
    const backing = Buffer.alloc(256 * 1024);
    const item = exchange();
    item.requestBody = backing.subarray(10, 20);
    const kept = ring.add(item).exchange;
    assert.equal((kept.requestBody as Buffer).byteLength, 10);
    assert.ok((kept.requestBody as Buffer).buffer.byteLength < 64 * 1024);
    const whole = exchange();
    whole.responseBody = Buffer.alloc(100);
    const before = whole.responseBody;
    assert.equal(ring.add(whole).exchange.responseBody, before, 'a body that owns its buffer is kept as is');
  });

  test('a body kept in chunks is counted by its bytes, and only its chunks that are small views of large buffers are copied', () => {
    const ring = new ExchangeRing();
    const owned = Buffer.alloc(2_000, 0x61);
    const view = Buffer.alloc(256 * 1024, 0x62).subarray(0, 10);
    const item = exchange();
    item.requestBody = [owned, view];
    const entry = ring.add(item);
    const chunks = entry.exchange.requestBody as readonly Buffer[];
    assert.equal(chunks[0], owned, 'kept as is');
    assert.ok(chunks[1]!.buffer.byteLength < 64 * 1024, 'copied out of the large buffer');
    assert.equal(bodyLength(entry.exchange.requestBody), 2_010);
    assert.deepEqual(wholeBody(entry.exchange.requestBody), Buffer.concat([owned, view]));
    assert.ok(entry.size >= 2_010 && entry.size < 2_010 + 1_024);
  });

  test('bodies of ARENA_MIN_BODY bytes or more are copied into one arena, whole; smaller ones are kept as they came', () => {
    const ring = new ExchangeRing({ maxBytes: 1024 * 1024 });
    const first = exchange();
    const chunks = [Buffer.alloc(3_000, 0x61), Buffer.alloc(3_000, 0x62)];
    first.requestBody = chunks;
    first.responseBody = Buffer.alloc(ARENA_MIN_BODY, 0x63);
    const second = exchange();
    const small = Buffer.alloc(ARENA_MIN_BODY - 1, 0x64);
    second.requestBody = small;
    second.responseBody = Buffer.alloc(50_000, 0x65);
    const firstKept = ring.add(first).exchange;
    const secondKept = ring.add(second).exchange;
    const kept = [firstKept.requestBody, firstKept.responseBody, secondKept.responseBody] as Buffer[];
    for (const body of kept) assert.ok(body instanceof Buffer && body.buffer === kept[0]!.buffer, 'one arena');
    assert.equal(kept[0]!.buffer.byteLength, 1024 * 1024, 'the arena is the byte bound');
    assert.deepEqual(firstKept.requestBody, Buffer.concat(chunks));
    assert.deepEqual(firstKept.responseBody, Buffer.alloc(ARENA_MIN_BODY, 0x63));
    assert.deepEqual(secondKept.responseBody, Buffer.alloc(50_000, 0x65));
    assert.equal(secondKept.requestBody, small, 'a small body is kept as it came');
  });

  test('property: however bodies of every size come and go (and ids come back), every kept body still holds its own bytes', () => {
    const maxBytes = 64 * 1024;
    const body = (size: number, fill: number): Buffer | null => (size === 0 ? null : Buffer.alloc(size, fill));
    const step = fc.record({
      request: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3_000 }), fc.integer({ min: ARENA_MIN_BODY, max: maxBytes / 2 })),
      response: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3_000 }), fc.integer({ min: ARENA_MIN_BODY, max: maxBytes / 2 })),
      again: fc.option(fc.nat(), { nil: undefined, freq: 2 }),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 120 }), fc.integer({ min: 2, max: 30 }), (steps, maxExchanges) => {
        const ring = new ExchangeRing({ maxExchanges, maxBytes });
        const ids: string[] = [];
        // Every exchange added, with what its bodies held: one that left the ring shows them or none.
        const added: { item: Exchange; request: Buffer | null; response: Buffer | null }[] = [];
        // What each id's bodies must hold: its fill byte and sizes, as last recorded.
        const expected = new Map<string, { fill: number; request: number; response: number }>();
        steps.forEach((each, index) => {
          const id = each.again !== undefined && ids.length > 0 ? ids[each.again % ids.length]! : `req_${index.toString(16).padStart(20, '0')}`;
          if (!ids.includes(id)) ids.push(id);
          const fill = index % 251;
          const item = exchange(0, id);
          item.requestBody = body(each.request, fill);
          item.responseBody = body(each.response, 255 - fill);
          // An exchange larger than the whole bound is kept without its bodies.
          const bodiesKept = sizeOf(item) <= maxBytes;
          // What a reader holds: the ring's exchange, not the one given (kept-exchange.ts).
          const kept = ring.add(item).exchange;
          expected.set(id, { fill, request: bodiesKept ? each.request : 0, response: bodiesKept ? each.response : 0 });
          added.push({ item: kept, request: body(each.request, fill), response: body(each.response, 255 - fill) });
          for (const past of added) {
            const request = wholeBody(past.item.requestBody);
            const response = wholeBody(past.item.responseBody);
            assert.ok(request === null || request.equals(past.request!), `${past.item.id}: its own request bytes or none`);
            assert.ok(response === null || response.equals(past.response!), `${past.item.id}: its own response bytes or none`);
          }
          assert.ok(ring.size <= maxExchanges && ring.bytes <= maxBytes);
          assert.equal(ring.newest()?.exchange.id, id, 'the newest is kept');
          for (const entry of ring.newestFirst()) {
            const want = expected.get(entry.exchange.id)!;
            const request = wholeBody(entry.exchange.requestBody);
            const response = wholeBody(entry.exchange.responseBody);
            assert.deepEqual(request, body(want.request, want.fill), `${entry.exchange.id}'s request body`);
            assert.deepEqual(response, body(want.response, 255 - want.fill), `${entry.exchange.id}'s response body`);
          }
        });
      }),
      { numRuns: 3000 },
    );
  });

  test('list pages with a before cursor; an unknown cursor gives nothing', () => {
    const ring = new ExchangeRing({ maxExchanges: 5 });
    const added = Array.from({ length: 7 }, () => exchange());
    for (const item of added) ring.add(item);
    const ids = added.map((item) => item.id).reverse();
    assert.deepEqual(ring.list(2).map((entry) => entry.exchange.id), ids.slice(0, 2));
    assert.deepEqual(ring.list(2, ids[1]).map((entry) => entry.exchange.id), ids.slice(2, 4));
    assert.deepEqual(ring.list(10, ids[3]).map((entry) => entry.exchange.id), [ids[4]]);
    assert.deepEqual(ring.list(10, ids[4]), []);
    assert.deepEqual(ring.list(10, ids[6]), [], 'evicted');
  });

  test('the same id recorded again replaces its entry', () => {
    const ring = new ExchangeRing({ maxExchanges: 5 });
    const first = exchange(10, 'req_same');
    const other = exchange();
    ring.add(first);
    ring.add(other);
    const again = exchange(20, 'req_same');
    ring.add(again);
    assert.equal(ring.size, 2);
    assert.equal(ring.get('req_same')?.exchange.requestBodySize, 20);
    assert.deepEqual(ring.list(5).map((entry) => entry.exchange.id), [again.id, other.id]);
    assert.equal(ring.bytes, sizeOf(again) + sizeOf(other));
  });

  test('bounds hold and the index agrees with the list, whatever the sequence (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 400, max: 5000 }),
        fc.array(fc.record({ size: fc.integer({ min: 0, max: 3000 }), reuse: fc.integer({ min: 0, max: 12 }) }), { maxLength: 60 }),
        (maxExchanges, maxBytes, steps) => {
          const ring = new ExchangeRing({ maxExchanges, maxBytes });
          for (const step of steps) {
            ring.add(exchange(step.size, step.reuse < 3 ? `req_reused${step.reuse}` : undefined));
            assert.ok(ring.size <= maxExchanges);
            assert.ok(ring.bytes <= maxBytes);
            const listed = ring.list(1000);
            assert.equal(listed.length, ring.size);
            assert.equal(listed.reduce((sum, entry) => sum + entry.size, 0), ring.bytes);
            for (let i = 1; i < listed.length; i++) assert.ok(listed[i - 1]!.seq > listed[i]!.seq);
            for (const entry of listed) assert.equal(ring.get(entry.exchange.id), entry);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  test('bad bounds are refused', () => {
    assert.throws(() => new ExchangeRing({ maxExchanges: 0 }), RangeError);
    assert.throws(() => new ExchangeRing({ maxBytes: 10 }), RangeError);
  });
});

describe('ring bounds through a real tunnel', () => {
  test('the inspector keeps the newest maxExchanges exchanges', async () => {
    const stack = await startStack({ maxExchanges: 5 });
    try {
      for (let i = 0; i < 8; i++) await stack.send('GET', `/count/${i}`);
      const list = (await inspect(stack.inspector, 'GET', '/api/requests?limit=100&summary=1')).json.requests;
      assert.deepEqual(
        list.map((item: { path: string }) => item.path),
        ['/count/7', '/count/6', '/count/5', '/count/4', '/count/3'],
      );
      const status = (await inspect(stack.inspector, 'GET', '/api/status')).json;
      assert.equal(status.recorded, 5);
      assert.equal(status.requests, 8);
    } finally {
      await stack.close();
    }
  });

  test('the inspector keeps no more than maxBytes, oldest out first, each kept body its own', async () => {
    // A body of its own per request: the arena is reused from its start, and a body written over
    // another's would show here.
    const body = (i: number): string => String.fromCharCode(0x61 + i).repeat(10_000);
    const stack = await startStack({ maxBytes: 45_000 });
    try {
      // Each exchange holds ~20 KB: the body going in and the echo coming back.
      for (let i = 0; i < 6; i++) await stack.send('POST', `/bytes/${i}`, { body: body(i), headers: { 'content-type': 'text/plain' } });
      const list = (await inspect(stack.inspector, 'GET', '/api/requests?limit=100')).json.requests;
      assert.deepEqual(
        list.map((item: { path: string }) => item.path),
        ['/bytes/5', '/bytes/4'],
      );
      for (const [index, item] of list.entries()) {
        assert.equal(item.request.body, body(5 - index));
        assert.equal((JSON.parse(item.response.body) as { body: string }).body, body(5 - index), 'the echo, as JSON');
      }
      const status = (await inspect(stack.inspector, 'GET', '/api/status')).json;
      assert.ok(status.recorded_bytes <= 45_000);
    } finally {
      await stack.close();
    }
  });

  test('bodies beyond the client recordLimit are cut and marked truncated, the traffic is not', async () => {
    const stack = await startStack({}, 1001);
    try {
      const body = 'é'.repeat(1500);
      const response = await stack.send('POST', '/big', { body, headers: { 'content-type': 'text/plain; charset=utf-8' } });
      assert.equal(response.status, 200);
      assert.equal(JSON.parse(response.text).body, body);
      const [item] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
      assert.equal(item.request.truncated, true);
      assert.equal(item.request.body_size, 3000);
      assert.equal(item.request.body_encoding, 'utf8', 'a cut in the middle of a character is still text');
      assert.equal(item.request.body, 'é'.repeat(500));
    } finally {
      await stack.close();
    }
  });
});

describe('history behind the oldest entry', () => {
  test('addOldest puts entries behind the oldest, in the order given, and never evicts for them', () => {
    const ring = new ExchangeRing({ maxExchanges: 4 });
    ring.add(historyExchange('req_live1'));
    assert.ok(ring.addOldest(historyExchange('req_old1')));
    assert.ok(ring.addOldest(historyExchange('req_old2')));
    assert.equal(ring.addOldest(historyExchange('req_live1')), undefined, 'an id already here is skipped');
    ring.add(historyExchange('req_live2'));
    assert.deepEqual(ring.list(10).map((entry) => entry.exchange.id), ['req_live2', 'req_live1', 'req_old1', 'req_old2']);
    assert.equal(ring.addOldest(historyExchange('req_old3')), undefined, 'full: history makes no room for itself');
    assert.deepEqual(ring.list(2, 'req_live1').map((entry) => entry.exchange.id), ['req_old1', 'req_old2']);
    ring.add(historyExchange('req_live3'));
    assert.deepEqual(ring.list(10).map((entry) => entry.exchange.id), ['req_live3', 'req_live2', 'req_live1', 'req_old1'], 'live traffic evicts the oldest history first');
  });

  test('resized recounts an entry whose detail arrived', () => {
    const ring = new ExchangeRing({ maxExchanges: 10 });
    const entry = ring.addOldest(historyExchange('req_h'))!;
    const before = ring.bytes;
    entry.exchange.requestBody = Buffer.alloc(1000);
    ring.resized(entry);
    assert.equal(ring.bytes, before + 1000);
    assert.equal(entry.size, before + 1000);
  });

  for (const order of ['oldest first', 'newest first']) {
    test(`details that arrive for history entries (${order}) never take the ring past maxBytes, oldest out first`, () => {
      const ring = new ExchangeRing({ maxExchanges: 10, maxBytes: 45_000 });
      // The edge lists newest first; each goes behind the previous one.
      const entries = ['req_h5', 'req_h4', 'req_h3', 'req_h2', 'req_h1', 'req_h0'].map((id) => ring.addOldest(historyExchange(id))!);
      for (const entry of order === 'oldest first' ? entries.reverse() : entries) {
        entry.exchange.requestBody = Buffer.alloc(10_000);
        entry.exchange.responseBody = Buffer.alloc(10_000);
        ring.resized(entry);
        assert.ok(ring.bytes <= 45_000, `${ring.bytes} bytes after ${entry.exchange.id}`);
      }
      assert.deepEqual(ring.list(10).map((entry) => entry.exchange.id).slice(0, 2), ['req_h5', 'req_h4']);
    });
  }
});

/** An exchange loaded from the edge's history (no body, marked with its source). */
function historyExchange(id: string): Exchange {
  return { ...exchange(0, id), method: 'GET', path: '/', requestHeaders: [], source: 'edge' };
}
