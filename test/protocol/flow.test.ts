/**
 * The pure parts of the protocol around the codec: credit arithmetic (flow.ts) and the hop-by-hop header
 * rule (headers.ts), names of any case.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ProtocolError } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, MAX_WINDOW } from '../../src/protocol/constants.js';
import { ReceiveWindow, SendCredit } from '../../src/protocol/flow.js';
import { connectionNamed, dropHopByHop, HOP_BY_HOP, removeNamed } from '../../src/protocol/headers.js';

describe('SendCredit', () => {
  test('take never exceeds the credit', () => {
    const credit = new SendCredit(100);
    assert.equal(credit.available, 100);
    assert.equal(credit.take(30), 30);
    assert.equal(credit.available, 70);
    assert.equal(credit.take(500), 70);
    assert.equal(credit.available, 0);
    assert.equal(credit.take(1), 0);
    assert.equal(credit.available, 0);
  });

  test('take of nothing, or of a nonsense amount, takes nothing', () => {
    const credit = new SendCredit(100);
    for (const wanted of [0, -1, -100, Number.NaN]) {
      assert.equal(credit.take(wanted), 0, `take(${wanted})`);
      assert.equal(credit.available, 100);
    }
  });

  test('grant adds credit, up to MAX_WINDOW exactly', () => {
    const credit = new SendCredit(0);
    credit.grant(10);
    assert.equal(credit.available, 10);
    credit.grant(MAX_WINDOW - 10);
    assert.equal(credit.available, MAX_WINDOW);
  });

  test('a grant past MAX_WINDOW is a protocol error and changes nothing', () => {
    const credit = new SendCredit(MAX_WINDOW - 5);
    assert.throws(() => credit.grant(6), ProtocolError);
    assert.equal(credit.available, MAX_WINDOW - 5);
    assert.throws(() => new SendCredit(0).grant(0xffffffff), ProtocolError);
    credit.grant(5);
    assert.equal(credit.available, MAX_WINDOW);
    assert.throws(() => credit.grant(1), /exceeds the maximum window/);
  });

  test('non-positive or non-integer grants are protocol errors', () => {
    const credit = new SendCredit(100);
    for (const bad of [0, -1, -MAX_WINDOW, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => credit.grant(bad), ProtocolError, `grant(${bad})`);
      assert.equal(credit.available, 100);
    }
  });

  test('property: available stays within 0..MAX_WINDOW and take never hands out more than was there', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: MAX_WINDOW }),
        fc.array(fc.oneof(fc.record({ take: fc.integer({ min: -10, max: 2 ** 32 }) }), fc.record({ grant: fc.integer({ min: -10, max: 2 ** 32 }) })), { maxLength: 50 }),
        (initial, operations) => {
          const credit = new SendCredit(initial);
          let expected = initial;
          for (const operation of operations) {
            if ('take' in operation) {
              const taken = credit.take(operation.take);
              assert.ok(taken >= 0 && taken <= expected && taken <= Math.max(0, operation.take));
              expected -= taken;
            } else if (operation.grant > 0 && expected + operation.grant <= MAX_WINDOW) {
              credit.grant(operation.grant);
              expected += operation.grant;
            } else {
              assert.throws(() => credit.grant(operation.grant), ProtocolError);
            }
            assert.equal(credit.available, expected);
            assert.ok(expected >= 0 && expected <= MAX_WINDOW);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('ReceiveWindow', () => {
  test('a receiver detects a sender exceeding its credit', () => {
    const window = new ReceiveWindow(100);
    assert.equal(window.receive(60), true);
    assert.equal(window.receive(41), false, 'one byte more than the 40 left');
    assert.equal(window.receive(40), true, 'a refused receive changes nothing');
    assert.equal(window.receive(1), false);
    assert.equal(window.receive(0), true);
  });

  test('grants are batched: one WINDOW per quarter window written out', () => {
    const window = new ReceiveWindow(1000);
    assert.ok(window.receive(1000));
    assert.equal(window.consume(100), 0);
    assert.equal(window.consume(149), 0);
    assert.equal(window.consume(1), 250, 'the quarter is reached: everything consumed so far is granted');
    assert.equal(window.consume(249), 0);
    assert.equal(window.consume(300), 549, 'a batch may be larger than a quarter');
    assert.equal(window.consume(0), 0);
    assert.equal(window.consume(-5), 0);
    // 799 bytes of credit went back: the sender may send them again, and no more.
    assert.ok(window.receive(799));
    assert.equal(window.receive(1), false);
  });

  test('tiny windows grant every byte', () => {
    for (const size of [1, 2, 3]) {
      const window = new ReceiveWindow(size);
      assert.ok(window.receive(size));
      assert.equal(window.consume(1), 1, `size ${size}`);
    }
  });

  test('the default windows batch at 256 KiB and 4 MiB', () => {
    const stream = new ReceiveWindow(DEFAULT_SETTINGS.streamWindow);
    assert.ok(stream.receive(DEFAULT_SETTINGS.streamWindow));
    assert.equal(stream.consume(262_143), 0);
    assert.equal(stream.consume(1), 262_144);
    const connection = new ReceiveWindow(DEFAULT_SETTINGS.connectionWindow);
    assert.ok(connection.receive(4 * 1024 * 1024));
    assert.equal(connection.consume(4 * 1024 * 1024 - 1), 0);
    assert.equal(connection.consume(1), 4 * 1024 * 1024);
  });

  test('property: an honest sender and receiver never disagree and never stall', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4096 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 30 }),
        (size, total, writes) => {
          const sender = new SendCredit(size);
          const receiver = new ReceiveWindow(size);
          let sent = 0;
          let buffered = 0;
          let written = 0;
          let turn = 0;
          // The sender sends what credit allows; the receiver writes out a varying amount and grants.
          while (written < total) {
            const chunk = sender.take(total - sent);
            if (chunk > 0) {
              assert.ok(receiver.receive(chunk), 'the receiver accepts everything the credit allowed');
              sent += chunk;
              buffered += chunk;
            }
            const out = Math.min(buffered, writes[turn++ % writes.length]!);
            buffered -= out;
            written += out;
            const grant = receiver.consume(out);
            if (grant > 0) sender.grant(grant);
            // Liveness: with nothing in flight the sender must hold credit (no deadlock).
            if (buffered === 0 && written < total) assert.ok(sender.available > 0 || chunk > 0 || out > 0, 'stalled');
            assert.ok(turn < 1_000_000);
          }
          assert.equal(sent, total);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('hop-by-hop headers', () => {
  test('the hop-by-hop set (RFC 9110 section 7.6.1 and the usual extras)', () => {
    assert.deepEqual(
      [...HOP_BY_HOP].sort(),
      ['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'],
    );
  });

  test('hop-by-hop headers are dropped, the rest kept in order with duplicates', () => {
    const headers = [
      'content-type', 'text/html',
      'connection', 'keep-alive',
      'keep-alive', 'timeout=5',
      'transfer-encoding', 'chunked',
      'set-cookie', 'a=1',
      'te', 'trailers',
      'trailer', 'x-checksum',
      'upgrade', 'h2c',
      'proxy-connection', 'keep-alive',
      'proxy-authenticate', 'Basic',
      'proxy-authorization', 'Basic eA==',
      'set-cookie', 'b=2',
    ];
    assert.deepEqual(dropHopByHop(headers), ['content-type', 'text/html', 'set-cookie', 'a=1', 'set-cookie', 'b=2']);
  });

  test('names of any case: Connection, TE and what Connection names go, case kept on the rest', () => {
    const headers = ['Content-Type', 'text/html', 'Connection', 'Keep-Alive, X-Secret', 'X-SECRET', 's', 'TE', 'trailers', 'Set-Cookie', 'a=1'];
    assert.deepEqual(dropHopByHop(headers), ['Content-Type', 'text/html', 'Set-Cookie', 'a=1']);
    assert.deepEqual(dropHopByHop(['Connection', 'Upgrade', 'Upgrade', 'websocket', 'X-A', '1'], ['connection', 'upgrade']), ['Connection', 'Upgrade', 'Upgrade', 'websocket', 'X-A', '1']);
    const list = ['B', '1', 'a', '2'];
    removeNamed(list, ['b']);
    assert.deepEqual(list, ['a', '2']);
  });

  test('headers named in Connection are dropped too', () => {
    const headers = ['x-keep', '1', 'connection', 'close, X-Secret ,x-other', 'x-secret', 's', 'x-other', 'o', 'connection', 'x-third', 'x-third', 't'];
    assert.deepEqual(dropHopByHop(headers), ['x-keep', '1']);
  });

  test('a list without hop-by-hop headers comes back as is, without a copy', () => {
    const headers = ['content-type', 'text/plain', 'x-connection-id', '7'];
    assert.equal(dropHopByHop(headers), headers);
    const empty: string[] = [];
    assert.equal(dropHopByHop(empty), empty);
  });

  test('connectionNamed: lower-cased, trimmed, without close, empties and hop-by-hop names', () => {
    assert.deepEqual(connectionNamed('close'), []);
    assert.deepEqual(connectionNamed(' Keep-Alive , Upgrade'), []);
    assert.deepEqual(connectionNamed('X-Foo, ,x-bar,,CLOSE,  X-Baz  '), ['x-foo', 'x-bar', 'x-baz']);
    assert.deepEqual(connectionNamed(''), []);
    // One token (the fast path): the same rules.
    assert.deepEqual(connectionNamed('keep-alive'), []);
    assert.deepEqual(connectionNamed(' X-One '), ['x-one']);
    assert.deepEqual(connectionNamed(' CLOSE'), []);
  });

  test('removeNamed works in place', () => {
    const headers = ['a', '1', 'b', '2', 'a', '3', 'c', '4'];
    removeNamed(headers, ['a', 'c']);
    assert.deepEqual(headers, ['b', '2']);
    removeNamed(headers, []);
    assert.deepEqual(headers, ['b', '2']);
  });
});


test('takeFrameCredit takes the smallest of wanted, maxFrame, stream and connection credit from both', async () => {
  const { SendCredit, takeFrameCredit, takeWholeCredit } = await import('../../src/protocol/flow.js');
  const stream = new SendCredit(100);
  const connection = new SendCredit(60);
  assert.equal(takeFrameCredit(500, 40, stream, connection), 40);
  assert.equal(takeFrameCredit(500, 40, stream, connection), 20);
  assert.equal(takeFrameCredit(500, 40, stream, connection), 0);
  assert.deepEqual([stream.available, connection.available], [40, 0]);
  connection.grant(100);
  assert.equal(takeWholeCredit(41, 64, stream, connection), false);
  assert.equal(takeWholeCredit(40, 39, stream, connection), false);
  assert.equal(takeWholeCredit(40, 64, stream, connection), true);
  assert.deepEqual([stream.available, connection.available], [0, 60]);
});
