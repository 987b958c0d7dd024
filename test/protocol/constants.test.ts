/**
 * Every wire constant of tunnel protocol 2, pinned by value. These numbers are a contract with clients
 * written in other languages (docs/protocol.md): a change to any of them must fail here first. A new
 * frame type or code gets a new number and a new row.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CLOSE_CODE_BASE,
  CONNECT_PATH,
  DEFAULT_SETTINGS,
  FINAL_GOAWAY_CODES,
  FrameType,
  GoAwayCode,
  MAX_FRAME_TYPE,
  MAX_WINDOW,
  NoticeCode,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  ResetCode,
  RETIRED_FRAME_TYPES,
} from '../../src/protocol/constants.js';

test('protocol version, header and path', () => {
  assert.equal(PROTOCOL_VERSION, 2);
  assert.equal(PROTOCOL_HEADER, 'burrow-protocol');
  assert.equal(CONNECT_PATH, '/api/v1/connect');
});

test('frame types', () => {
  assert.deepEqual(
    { ...FrameType },
    {
      READY: 1,
      OPEN: 2,
      DATA: 3,
      RESPONSE: 4,
      WINDOW: 5,
      RESET: 6,
      GOAWAY: 7,
      INFO: 12,
      TRAILERS: 13,
      BIND: 14,
      BOUND: 15,
      UNBOUND: 16,
      ACCEPT: 17,
      NOTICE: 18,
    },
  );
  assert.equal(MAX_FRAME_TYPE, 18);
  assert.equal(MAX_FRAME_TYPE, Math.max(...Object.values(FrameType)));
});

test("protocol 1's WebSocket frame types are retired, never reused", () => {
  assert.deepEqual({ ...RETIRED_FRAME_TYPES }, { 8: 'WS_OPEN', 9: 'WS_RESPONSE', 10: 'WS_MESSAGE', 11: 'WS_CLOSE' });
  for (const type of Object.keys(RETIRED_FRAME_TYPES)) assert.ok(!(Object.values(FrameType) as number[]).includes(Number(type)), type);
});

test('frame types are distinct, and with the retired ones contiguous from 1', () => {
  const values = [...Object.values(FrameType), ...Object.keys(RETIRED_FRAME_TYPES).map(Number)].sort((a, b) => a - b);
  assert.deepEqual(values, Array.from({ length: MAX_FRAME_TYPE }, (_, i) => i + 1));
});

test('RESET codes', () => {
  assert.deepEqual(
    { ...ResetCode },
    {
      CANCEL: 1,
      LOCAL_UNREACHABLE: 2,
      LOCAL_ERROR: 3,
      PROTOCOL_ERROR: 4,
      FLOW_CONTROL_ERROR: 5,
      REFUSED: 6,
    },
  );
});

test('GOAWAY codes', () => {
  assert.deepEqual(
    { ...GoAwayCode },
    {
      SHUTDOWN: 1,
      CLOSED_BY_API: 2,
      TOKEN_REVOKED: 3,
      REPLACED: 4,
      PROTOCOL_ERROR: 5,
      CLIENT_CLOSING: 6,
      TIMEOUT: 7,
      STORE_UNREACHABLE: 8,
    },
  );
});

test('NOTICE codes', () => {
  assert.deepEqual({ ...NoticeCode }, { STORE_UNAVAILABLE: 1, STORE_AVAILABLE: 2 });
});

test('WebSocket close codes are 4000 + the GOAWAY code', () => {
  assert.equal(CLOSE_CODE_BASE, 4000);
  const table: [keyof typeof GoAwayCode, number][] = [
    ['SHUTDOWN', 4001],
    ['CLOSED_BY_API', 4002],
    ['TOKEN_REVOKED', 4003],
    ['REPLACED', 4004],
    ['PROTOCOL_ERROR', 4005],
    ['CLIENT_CLOSING', 4006],
    ['TIMEOUT', 4007],
    ['STORE_UNREACHABLE', 4008],
  ];
  for (const [name, close] of table) assert.equal(CLOSE_CODE_BASE + GoAwayCode[name], close, name);
});

test('final GOAWAY codes: the client does not reconnect after these', () => {
  assert.deepEqual([...FINAL_GOAWAY_CODES].sort((a, b) => a - b), [2, 3, 4, 6]);
  for (const code of [1, 5, 7, 8]) assert.equal(FINAL_GOAWAY_CODES.has(code), false, `code ${code} is not final`);
});

test('the maximum window is 2^31 - 1', () => {
  assert.equal(MAX_WINDOW, 2_147_483_647);
  assert.equal(MAX_WINDOW, 2 ** 31 - 1);
});

test('default settings announced in READY', () => {
  assert.deepEqual(
    { ...DEFAULT_SETTINGS },
    {
      maxFrameBody: 65_536,
      streamWindow: 1_048_576,
      connectionWindow: 16_777_216,
      maxStreams: 1024,
      maxMessage: 131_072,
      maxTunnels: 64,
    },
  );
  assert.ok(Object.isFrozen(DEFAULT_SETTINGS));
});

test('default settings are consistent with each other', () => {
  // A full body chunk fits a stream's window, and a message fits a full chunk plus its envelope.
  assert.ok(DEFAULT_SETTINGS.maxFrameBody <= DEFAULT_SETTINGS.streamWindow);
  assert.ok(DEFAULT_SETTINGS.streamWindow <= DEFAULT_SETTINGS.connectionWindow);
  assert.ok(DEFAULT_SETTINGS.connectionWindow <= MAX_WINDOW);
  assert.ok(DEFAULT_SETTINGS.maxMessage > DEFAULT_SETTINGS.maxFrameBody);
});
