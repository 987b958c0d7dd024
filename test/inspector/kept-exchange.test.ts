/**
 * The inspector's packed exchanges (src/inspector/kept-exchange.ts): every field reads back as it was
 * given, header lists and the client's address can be set afterwards, the ring's byte count is the same
 * as for the exchange given, and what cannot be packed is kept as it came.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { Exchange } from '../../src/client/exchange.js';
import { KeptExchange, keptExchange } from '../../src/inspector/kept-exchange.js';
import { sizeOf } from '../../src/inspector/ring.js';

function exchange(overrides: Partial<Exchange> = {}): Exchange {
  return {
    id: 'req_00000000000000000001',
    method: 'POST',
    path: '/hooks/github?x=1',
    port: 3000,
    requestHeaders: ['Host', 'a.example', 'Content-Type', 'application/json', 'X-Empty', ''],
    requestBody: Buffer.from('{"a":1}'),
    requestBodySize: 7,
    requestTruncated: false,
    status: 201,
    responseHeaders: ['content-length', '2', 'date', 'Sat, 28 Nov 2026 15:00:00 GMT'],
    responseBody: Buffer.from('ok'),
    responseBodySize: 2,
    responseTruncated: false,
    startedAt: 1_795_000_000_123,
    latencyMs: 1.25,
    error: null,
    replayOf: null,
    clientAddress: '203.0.113.7',
    ...overrides,
  };
}

/** Every field an exchange's readers use, as plain data. */
function fields(item: Exchange): Record<string, unknown> {
  return {
    id: item.id,
    method: item.method,
    path: item.path,
    port: item.port,
    requestHeaders: item.requestHeaders,
    requestBody: item.requestBody,
    requestBodySize: item.requestBodySize,
    requestTruncated: item.requestTruncated,
    status: item.status,
    responseHeaders: item.responseHeaders,
    responseBody: item.responseBody,
    responseBodySize: item.responseBodySize,
    responseTruncated: item.responseTruncated,
    startedAt: item.startedAt,
    latencyMs: item.latencyMs,
    error: item.error,
    replayOf: item.replayOf,
    clientAddress: item.clientAddress,
    websocket: item.websocket,
    connection: item.connection,
    source: item.source,
    eventId: item.eventId,
    tunnel: item.tunnel,
  };
}

describe('keptExchange', () => {
  test('an HTTP exchange is packed, and every field reads back as given', () => {
    const given = exchange({ replayOf: 'req_00000000000000000000', eventId: 'evt_1', tunnel: 'api', source: 'live', error: 'local server closed the connection' });
    const kept = keptExchange(given);
    assert.ok(kept instanceof KeptExchange);
    assert.deepEqual(fields(kept), fields(given));
    assert.equal(sizeOf(kept), sizeOf(given), 'the ring counts it as the exchange given');
  });

  test('empty header lists, no client address and empty values read back as given', () => {
    for (const given of [
      exchange({ requestHeaders: [], responseHeaders: [] }),
      exchange({ requestHeaders: [], clientAddress: undefined }),
      exchange({ responseHeaders: [], clientAddress: '' }),
      exchange({ requestHeaders: ['', ''], responseHeaders: ['x', ''] }),
    ]) {
      const kept = keptExchange(given);
      assert.ok(kept instanceof KeptExchange);
      assert.deepEqual(fields(kept), fields(given));
      assert.equal(sizeOf(kept), sizeOf(given));
    }
  });

  test('header lists read as fresh arrays: changing one leaves the kept exchange as it was', () => {
    const kept = keptExchange(exchange());
    kept.requestHeaders.push('X-More', '1');
    kept.responseHeaders.length = 0;
    assert.deepEqual(kept.requestHeaders, exchange().requestHeaders);
    assert.deepEqual(kept.responseHeaders, exchange().responseHeaders);
  });

  test('header lists and the client address set afterwards (an edge detail) replace the packed ones, and the size follows', () => {
    const kept = keptExchange(exchange({ requestHeaders: [], responseHeaders: [], clientAddress: undefined }));
    const detail = exchange();
    kept.requestHeaders = detail.requestHeaders;
    kept.responseHeaders = detail.responseHeaders;
    kept.clientAddress = detail.clientAddress;
    assert.deepEqual(fields(kept), fields(detail));
    assert.equal(sizeOf(kept), sizeOf(detail));
    detail.requestHeaders.push('X-Later', '1');
    assert.equal(kept.requestHeaders.length, 6, 'the list set is copied, not shared');
  });

  test('what cannot be packed is kept as it came: a line feed in a string, a WebSocket, a connection, a list that is not pairs', () => {
    for (const given of [
      exchange({ requestHeaders: ['X-Folded', 'a\nb'] }),
      exchange({ responseHeaders: ['x\n', 'y'] }),
      exchange({ path: '/a\nb' }),
      exchange({ clientAddress: '\n' }),
      exchange({ websocket: { openedAt: 1, closedAt: null, closeCode: null, closeReason: '', messagesIn: 0, messagesOut: 0, messages: [] } }),
      exchange({ connection: 'tcp' }),
      exchange({ requestHeaders: [''] }),
    ]) {
      assert.equal(keptExchange(given), given);
    }
  });

  test('property: any strings without a line feed read back as given; any with one leave the exchange as it came', () => {
    const text = fc.string({ unit: fc.integer({ min: 0, max: 0xff }).map((code) => String.fromCharCode(code)), maxLength: 12 });
    const list = fc.array(fc.tuple(text, text), { maxLength: 6 }).map((pairs) => pairs.flat());
    fc.assert(
      fc.property(text, text, text, fc.option(text, { nil: undefined }), list, list, (id, method, path, clientAddress, requestHeaders, responseHeaders) => {
        const given = exchange({ id, method, path, clientAddress, requestHeaders, responseHeaders });
        const kept = keptExchange(given);
        const lineFeed = [id, method, path, clientAddress ?? '', ...requestHeaders, ...responseHeaders].some((item) => item.includes('\n'));
        if (lineFeed) assert.equal(kept, given);
        else {
          assert.ok(kept instanceof KeptExchange);
          assert.deepEqual(fields(kept), fields(given));
          assert.equal(sizeOf(kept), sizeOf(given));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
