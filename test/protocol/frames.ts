/**
 * Test material shared by the protocol tests: one or more valid sample frames of every type, and the
 * frame layouts of docs/protocol.md written out again as an independent table, so the codec is checked
 * against the documented wire format rather than against itself.
 */
import { DEFAULT_SETTINGS, FrameType, MAX_WINDOW } from '../../src/protocol/constants.js';
import type { Frame } from '../../src/protocol/codec.js';

export const HEADERS = [
  'host',
  'quiet-river-42.example.com',
  'content-type',
  'application/json',
  'user-agent',
  'GitHub-Hookshot/abc123',
  'x-github-event',
  'push',
  'set-cookie',
  'a=1',
  'set-cookie',
  'b=2',
];

/** Valid frames, at least one of each type, with binary fields as Buffers (what decode returns). */
export const SAMPLES: readonly Frame[] = [
  [FrameType.READY, 0, 'quiet-river-42', 'https://quiet-river-42.example.com', { ...DEFAULT_SETTINGS }],
  [FrameType.OPEN, 1, 'req_01HZX', 'POST', '/hooks/github?x=1', HEADERS, '203.0.113.7', Buffer.from('{"ok":true}'), true],
  [FrameType.OPEN, 2, 'req_01HZY', 'GET', '/', [], '::1', null, false],
  [FrameType.DATA, 2, Buffer.alloc(300, 0xab), false],
  [FrameType.DATA, 2, null, true],
  [FrameType.RESPONSE, 1, 200, ['content-type', 'text/plain', 'content-length', '2'], Buffer.from('ok'), true],
  [FrameType.RESPONSE, 2, 204, [], null, false],
  [FrameType.WINDOW, 0, 65_536],
  [FrameType.WINDOW, 7, MAX_WINDOW],
  [FrameType.RESET, 3, 1, 'the public client closed the connection'],
  [FrameType.RESET, 0xffffffff, 0, ''],
  [FrameType.GOAWAY, 0, 5, 'unknown frame type 12'],
  [FrameType.WS_OPEN, 9, 'req_01HZZ', '/_next/webpack-hmr', ['origin', 'http://localhost:3000', 'sec-websocket-protocol', 'chat'], '198.51.100.2'],
  [FrameType.WS_RESPONSE, 9, 101, 'chat', []],
  [FrameType.WS_RESPONSE, 9, 403, '', ['content-type', 'text/plain']],
  [FrameType.WS_MESSAGE, 9, Buffer.from('{"type":"hash"}'), false, true],
  [FrameType.WS_MESSAGE, 9, Buffer.alloc(0), true, false],
  [FrameType.WS_CLOSE, 9, 1000, 'bye'],
  [FrameType.WS_CLOSE, 9, 1005, ''],
];

// ---- the documented layouts -------------------------------------------------------------------------

type Spec = (value: unknown) => boolean;

const uint32 = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
const streamId = (v: unknown): boolean => uint32(v) && (v as number) >= 1;
const zero = (v: unknown): boolean => v === 0;
const str = (v: unknown): boolean => typeof v === 'string';
const bool = (v: unknown): boolean => v === true || v === false;
const bin = (v: unknown): boolean => v instanceof Uint8Array;
const binOrNil = (v: unknown): boolean => v === null || v instanceof Uint8Array;
const status = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 999;
const closeCode = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 4999;
const credit = (v: unknown): boolean => uint32(v) && (v as number) >= 1;
const window = (v: unknown): boolean => uint32(v) && (v as number) >= 1 && (v as number) <= MAX_WINDOW;
const lineSafe = (v: unknown): boolean => typeof v === 'string' && !/[\r\n\0]/.test(v);
const headers = (v: unknown): boolean =>
  Array.isArray(v) &&
  v.length % 2 === 0 &&
  v.every((item, i) => typeof item === 'string' && !/[\r\n\0]/.test(item) && (i % 2 === 1 || !/[A-Z]/.test(item)));
const settings = (v: unknown): boolean => {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return false;
  const s = v as Record<string, unknown>;
  return streamId(s.maxFrameBody) && window(s.streamWindow) && window(s.connectionWindow) && streamId(s.maxStreams) && streamId(s.maxMessage);
};

/** docs/protocol.md, "Frames": the elements after the type, starting with the stream id. */
export const LAYOUTS: Readonly<Record<number, readonly Spec[]>> = {
  [FrameType.READY]: [zero, str, str, settings],
  [FrameType.OPEN]: [streamId, str, str, str, headers, str, binOrNil, bool],
  [FrameType.DATA]: [streamId, binOrNil, bool],
  [FrameType.RESPONSE]: [streamId, status, headers, binOrNil, bool],
  [FrameType.WINDOW]: [uint32, credit],
  [FrameType.RESET]: [streamId, uint32, str],
  [FrameType.GOAWAY]: [zero, uint32, str],
  [FrameType.WS_OPEN]: [streamId, str, str, headers, str],
  [FrameType.WS_RESPONSE]: [streamId, status, lineSafe, headers],
  [FrameType.WS_MESSAGE]: [streamId, bin, bool, bool],
  [FrameType.WS_CLOSE]: [streamId, closeCode, str],
};

/** Whether `value` is a frame as docs/protocol.md describes it. */
export function matchesLayout(value: unknown): boolean {
  if (!Array.isArray(value) || value.length < 1) return false;
  const layout = LAYOUTS[value[0] as number];
  if (layout === undefined || !Number.isInteger(value[0])) return false;
  if (value.length !== layout.length + 1) return false;
  return layout.every((check, i) => check(value[i + 1]));
}

/** Values of every msgpack kind, to put where they do not belong. */
export const ODD_VALUES: readonly unknown[] = [
  null,
  true,
  false,
  0,
  1,
  -1,
  1.5,
  99,
  100,
  101,
  1000,
  4999,
  5000,
  0xffffffff,
  2 ** 32,
  MAX_WINDOW + 1,
  Number.MAX_SAFE_INTEGER,
  '',
  'x',
  'X-Upper',
  'a\r\nb',
  'nul\0',
  Buffer.from('bytes'),
  [],
  ['a', 'b'],
  ['a'],
  ['A', 'b'],
  ['a', 'b\r\nx-injected: 1'],
  [1, 2],
  {},
  { a: 1 },
  { ...DEFAULT_SETTINGS },
  { ...DEFAULT_SETTINGS, streamWindow: MAX_WINDOW + 1 },
];
