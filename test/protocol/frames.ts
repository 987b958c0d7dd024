/**
 * Test material shared by the protocol tests: one or more valid sample frames of every type, and the
 * frame layouts of docs/protocol.md written out again as an independent table, so the codec is checked
 * against the documented wire format rather than against itself.
 */
import { DEFAULT_SETTINGS, FrameType, MAX_WINDOW } from '../../src/protocol/constants.js';
import type { Frame } from '../../src/protocol/codec.js';

export const HEADERS = [
  'Host',
  'quiet-river-42.example.com',
  'content-type',
  'application/json',
  'User-Agent',
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
  [FrameType.OPEN, 1, 'req_01HZX', 'POST', '/hooks/github?x=1', HEADERS, '203.0.113.7', Buffer.from('{"ok":true}'), true, false, 0],
  [FrameType.OPEN, 2, 'req_01HZY', 'GET', '/', [], '::1', null, false, false, 3],
  [FrameType.OPEN, 9, 'req_01HZZ', 'GET', '/_next/webpack-hmr', ['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='], '198.51.100.2', null, true, true, 65_535],
  [FrameType.DATA, 2, Buffer.alloc(300, 0xab), false],
  [FrameType.DATA, 2, null, true],
  [FrameType.RESPONSE, 1, 200, 'OK', ['Content-Type', 'text/plain', 'content-length', '2'], Buffer.from('ok'), true],
  [FrameType.RESPONSE, 2, 204, '', [], null, false],
  [FrameType.RESPONSE, 9, 101, 'Switching Protocols', ['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Accept', 's3pPLMBiTxaQ9kYGzzhZRbK+xOo='], null, false],
  [FrameType.WINDOW, 0, 65_536],
  [FrameType.WINDOW, 7, MAX_WINDOW],
  [FrameType.RESET, 3, 1, 'the public client closed the connection'],
  [FrameType.RESET, 0xffffffff, 0, ''],
  [FrameType.GOAWAY, 0, 5, 'unknown frame type 200'],
  [FrameType.INFO, 1, 103, 'Early Hints', ['Link', '</style.css>; rel=preload; as=style']],
  [FrameType.INFO, 1, 100, 'Continue', []],
  [FrameType.TRAILERS, 2, ['X-Checksum', 'sha256=abc']],
  [FrameType.TRAILERS, 2, []],
  [FrameType.BIND, 0, 1, 'http', 'hooks', 0, 3000, '', false, true],
  [FrameType.BIND, 0, 65_535, 'tcp', '', 20_022, 22, 'eyJhbGxvd19jaWRyIjpbIjEwLjAuMC4wLzgiXX0', true, false],
  [FrameType.BIND, 0, 2, 'tls', 'db', 0, 8443, '', false, false],
  [FrameType.BOUND, 0, 1, '', '', 'hooks', 'https://hooks.burrow.example'],
  [FrameType.BOUND, 0, 2, 'SUBDOMAIN_TAKEN', 'The subdomain "db" is reserved by another account.', '', ''],
  // A cluster's: BIND naming the attachment it replaces (or 0), BOUND naming the new one.
  [FrameType.BIND, 0, 3, 'http', 'shop', 0, 8080, '', false, false, 41],
  [FrameType.BIND, 0, 4, 'http', 'blog', 0, 8081, '', false, false, 0],
  [FrameType.BOUND, 0, 3, '', '', 'shop', 'https://shop.burrow.example', Number.MAX_SAFE_INTEGER],
  [FrameType.BOUND, 0, 4, 'ALREADY_ATTACHED', 'This client already has a session for "blog" on edge a.', '', '', 0],
  [FrameType.UNBOUND, 0, 1, 2, 'the tunnel was closed through the API'],
  [FrameType.UNBOUND, 0, 0, 4, ''],
  [FrameType.ACCEPT, 7, 1, 'req_01HZX', '203.0.113.7', 51_234, '198.51.100.1', 20_022],
  [FrameType.ACCEPT, 0xffffffff, 0, '', '2001:db8::1', 0, '', 65_535],
  [FrameType.READY, 0, 'quiet-river-42', 'https://quiet-river-42.example.com', { ...DEFAULT_SETTINGS, clusterEdges: 3, attachment: 2 ** 40 }],
  [FrameType.NOTICE, 0, 1, 'the edge cannot reach the cluster store (connection lost); the tunnel stays served while its lease holds'],
  [FrameType.NOTICE, 0, 2, ''],
];

// ---- the documented layouts -------------------------------------------------------------------------

type Spec = (value: unknown) => boolean;

const uint32 = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
const streamId = (v: unknown): boolean => uint32(v) && (v as number) >= 1;
const zero = (v: unknown): boolean => v === 0;
const str = (v: unknown): boolean => typeof v === 'string';
const bool = (v: unknown): boolean => v === true || v === false;
const binOrNil = (v: unknown): boolean => v === null || v instanceof Uint8Array;
const status = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 999;
const credit = (v: unknown): boolean => uint32(v) && (v as number) >= 1;
const window = (v: unknown): boolean => uint32(v) && (v as number) >= 1 && (v as number) <= MAX_WINDOW;
const lineSafe = (v: unknown): boolean => typeof v === 'string' && !/[\r\n\0]/.test(v);
const headers = (v: unknown): boolean => Array.isArray(v) && v.length % 2 === 0 && v.every((item) => typeof item === 'string' && !/[\r\n\0]/.test(item));
const tunnel = (v: unknown): boolean => uint32(v) && (v as number) <= 65_535;
const boundTunnel = (v: unknown): boolean => tunnel(v) && (v as number) >= 1;
const port = (v: unknown): boolean => uint32(v) && (v as number) <= 65_535;
const kind = (v: unknown): boolean => v === 'http' || v === 'tcp' || v === 'tls';
const fenceOrZero = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const settings = (v: unknown): boolean => {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return false;
  const s = v as Record<string, unknown>;
  const fence = (x: unknown): boolean => typeof x === 'number' && Number.isSafeInteger(x) && x >= 1;
  return (
    streamId(s.maxFrameBody) &&
    window(s.streamWindow) &&
    window(s.connectionWindow) &&
    streamId(s.maxStreams) &&
    streamId(s.maxMessage) &&
    (s.clusterEdges === undefined || streamId(s.clusterEdges)) &&
    (s.attachment === undefined || fence(s.attachment))
  );
};

/** docs/protocol.md, "Frames": the elements after the type, starting with the stream id. */
export const LAYOUTS: Readonly<Record<number, readonly Spec[]>> = {
  [FrameType.READY]: [zero, str, str, settings],
  [FrameType.OPEN]: [streamId, str, lineSafe, lineSafe, headers, str, binOrNil, bool, bool, tunnel],
  [FrameType.DATA]: [streamId, binOrNil, bool],
  [FrameType.RESPONSE]: [streamId, status, lineSafe, headers, binOrNil, bool],
  [FrameType.WINDOW]: [uint32, credit],
  [FrameType.RESET]: [streamId, uint32, str],
  [FrameType.GOAWAY]: [zero, uint32, str],
  [FrameType.INFO]: [streamId, status, lineSafe, headers],
  [FrameType.TRAILERS]: [streamId, headers],
  [FrameType.BIND]: [zero, boundTunnel, kind, str, port, port, str, bool, bool, fenceOrZero],
  [FrameType.BOUND]: [zero, boundTunnel, str, str, str, str, fenceOrZero],
  [FrameType.UNBOUND]: [zero, tunnel, uint32, str],
  [FrameType.ACCEPT]: [streamId, tunnel, str, str, port, str, port],
  [FrameType.NOTICE]: [zero, uint32, str],
};

/** Frame types whose last element may be absent (docs/protocol.md, "Frames"). */
export const OPTIONAL_LAST: readonly number[] = [FrameType.OPEN, FrameType.BIND, FrameType.BOUND];

/** Whether `value` is a frame as docs/protocol.md describes it. */
export function matchesLayout(value: unknown): boolean {
  if (!Array.isArray(value) || value.length < 1) return false;
  const layout = LAYOUTS[value[0] as number];
  if (layout === undefined || !Number.isInteger(value[0])) return false;
  // The last element of OPEN (its tunnel, absent for tunnel 0), BIND (drop) and BOUND (attachment) may be absent.
  const optionalLast = OPTIONAL_LAST.includes(value[0] as number) && value.length === layout.length;
  if (value.length !== layout.length + 1 && !optionalLast) return false;
  return layout.every((check, i) => (optionalLast && i === layout.length - 1) || check(value[i + 1]));
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
