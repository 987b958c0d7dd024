/**
 * Frame encoding and decoding: one msgpack array per WebSocket message, `[type, stream, ...fields]`.
 *
 * Decoding first walks the msgpack structure (exactly one array value, no extension types, bounded
 * nesting, every length inside the input), then lets msgpackr build it, then validates every field
 * through a table indexed by frame type (after a range check), so the session code can index a decoded
 * frame without checks. Anything else, including truncated or trailing bytes, is a ProtocolError: the
 * receiving side ends that tunnel with the reason, never the process. Binary fields decode as views
 * of the input, not copies: a receiver that keeps a chunk past the input's lifetime copies it itself,
 * once.
 */
import { Packr, Unpackr } from 'msgpackr';
import { FrameType, GoAwayCode, MAX_FRAME_TYPE, MAX_TUNNEL_ID, MAX_WINDOW, RETIRED_FRAME_TYPES, TUNNEL_KINDS, type GoAwayCodeValue, type Settings, type TunnelKindValue } from './constants.js';

export type Bytes = Uint8Array;
/**
 * Header pairs flattened: [name0, value0, name1, value1, ...]; names as they were sent (any case); no
 * CR, LF or NUL; each character one byte (docs/protocol.md section 12).
 */
export type HeaderList = string[];

export type ReadyFrame = [typeof FrameType.READY, 0, subdomain: string, publicUrl: string, settings: Settings];
export type OpenFrame = [
  typeof FrameType.OPEN,
  stream: number,
  requestId: string,
  method: string,
  target: string,
  headers: HeaderList,
  clientAddress: string,
  body: Bytes | null,
  end: boolean,
  upgrade: boolean,
  /** Absent for tunnel 0, so a client that never sends BIND receives the OPEN it always did. */
  tunnel?: number,
];
export type DataFrame = [typeof FrameType.DATA, stream: number, chunk: Bytes | null, end: boolean];
export type ResponseFrame = [
  typeof FrameType.RESPONSE,
  stream: number,
  status: number,
  reason: string,
  headers: HeaderList,
  body: Bytes | null,
  end: boolean,
];
export type WindowFrame = [typeof FrameType.WINDOW, stream: number, credit: number];
export type ResetFrame = [typeof FrameType.RESET, stream: number, code: number, message: string];
export type GoAwayFrame = [typeof FrameType.GOAWAY, 0, code: number, message: string];
export type InfoFrame = [typeof FrameType.INFO, stream: number, status: number, reason: string, headers: HeaderList];
export type TrailersFrame = [typeof FrameType.TRAILERS, stream: number, headers: HeaderList];
export type BindFrame = [
  typeof FrameType.BIND,
  0,
  tunnel: number,
  kind: TunnelKindValue,
  name: string,
  remotePort: number,
  localPort: number,
  policy: string,
  replace: boolean,
  pool: boolean,
  /**
   * The cluster attachment this BIND replaces (the tunnel's BOUND `attachment` on the connection it
   * had), 0 for none. Absent from a client before it (the edge then drops its own attachment of the
   * same client process), and sent only to an edge whose READY has clusterEdges (section 18).
   */
  drop?: number,
];
export type BoundFrame = [
  typeof FrameType.BOUND,
  0,
  tunnel: number,
  error: string,
  message: string,
  name: string,
  publicUrl: string,
  /** The tunnel's lease attachment on this edge (cluster mode), 0 for none; only in answer to a BIND with `drop`. */
  attachment?: number,
];
export type UnboundFrame = [typeof FrameType.UNBOUND, 0, tunnel: number, code: number, message: string];
export type NoticeFrame = [typeof FrameType.NOTICE, 0, code: number, message: string];
export type AcceptFrame = [
  typeof FrameType.ACCEPT,
  stream: number,
  tunnel: number,
  requestId: string,
  clientAddress: string,
  clientPort: number,
  serverAddress: string,
  serverPort: number,
];

export type Frame =
  | ReadyFrame
  | OpenFrame
  | DataFrame
  | ResponseFrame
  | WindowFrame
  | ResetFrame
  | GoAwayFrame
  | InfoFrame
  | TrailersFrame
  | BindFrame
  | BoundFrame
  | UnboundFrame
  | AcceptFrame
  | NoticeFrame;

export class ProtocolError extends Error {
  readonly code: GoAwayCodeValue = GoAwayCode.PROTOCOL_ERROR;
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

// Plain msgpack (no record extension) so clients in other languages decode frames with any msgpack
// library; maps become plain objects; 64-bit integers become numbers (stream ids and sizes fit).
const packr = new Packr({ useRecords: false, variableMapSize: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });

export function encode(frame: Frame): Buffer {
  return packr.pack(frame);
}

/**
 * `encoded`, a frame whose binary field holding nothing (`c4 00`) ends `after` bytes before the frame's
 * end, laid out again with room for `size` bytes in that field (a bin 32 header): a new buffer whose
 * room, `size` bytes ending `after` bytes before its end, the caller fills in place. A body that comes
 * in pieces is then copied once, straight into its frame, instead of joined first and copied again by
 * `encode`.
 */
export function withBinaryRoom(encoded: Uint8Array, after: number, size: number): Buffer {
  const emptyAt = encoded.byteLength - after - 2;
  if (emptyAt < 1 || encoded[emptyAt] !== 0xc4 || encoded[emptyAt + 1] !== 0) throw new Error('withBinaryRoom: no empty binary field there');
  const frame = Buffer.allocUnsafe(emptyAt + 5 + size + after);
  frame.set(encoded.subarray(0, emptyAt), 0);
  frame[emptyAt] = 0xc6;
  frame.writeUInt32BE(size, emptyAt + 1);
  frame.set(encoded.subarray(emptyAt + 2), emptyAt + 5 + size);
  return frame;
}

/** Room a DATA frame needs in front of its bytes: the array, the type, a stream id up to uint 32, a bin 32 header. */
export const DATA_PREFIX_ROOM = 12;

/** Bytes that lie in a buffer of their sender's own with room for a DATA frame around them → that buffer. */
const DATA_ROOMS = new WeakMap<Uint8Array, Buffer>();

/**
 * `bytes` copied into a buffer of their own with room for a DATA frame around them: bytes that must
 * wait (for credit) are copied once, and `dataFrame` frames the copy where it lies.
 */
export function copyWithDataRoom(bytes: Uint8Array): Buffer {
  const room = Buffer.allocUnsafe(DATA_PREFIX_ROOM + bytes.byteLength + 1);
  room.set(bytes, DATA_PREFIX_ROOM);
  const copy = room.subarray(DATA_PREFIX_ROOM, DATA_PREFIX_ROOM + bytes.byteLength);
  DATA_ROOMS.set(copy, room);
  return copy;
}

/**
 * Tells `dataFrame` that `view` lies in `buffer`, the caller's own (never shared, never a pool slice
 * another holds), with at least DATA_PREFIX_ROOM bytes of it before the view and one after.
 */
export function markDataRoom(view: Buffer, buffer: Buffer): void {
  if (view.buffer !== buffer.buffer || view.byteOffset - buffer.byteOffset < DATA_PREFIX_ROOM || view.byteOffset + view.byteLength >= buffer.byteOffset + buffer.byteLength) {
    throw new Error('markDataRoom: no room around the view');
  }
  DATA_ROOMS.set(view, buffer);
}

/**
 * The DATA frame `[DATA, stream, body, end]`. When `body` has room around it (`copyWithDataRoom`,
 * `markDataRoom`) the frame's prefix and `end` are written there and the frame is a view of the same
 * buffer, the body's bytes untouched; otherwise it is encoded (a copy).
 */
export function dataFrame(stream: number, body: Uint8Array, end: boolean): Buffer {
  const buffer = DATA_ROOMS.get(body);
  if (buffer === undefined) return encode([FrameType.DATA, stream, body, end]);
  const at = body.byteOffset - buffer.byteOffset;
  const size = body.byteLength;
  const idSize = uintSize(stream);
  const start = at - 7 - idSize;
  buffer[start] = 0x94;
  buffer[start + 1] = FrameType.DATA;
  writeUint(buffer, start + 2, stream, idSize);
  buffer[at - 5] = 0xc6;
  buffer.writeUInt32BE(size, at - 4);
  buffer[at + size] = end ? 0xc3 : 0xc2;
  return buffer.subarray(start, at + size + 1);
}

/** `value` as msgpack writes a non-negative integer in `size` bytes (uintSize). */
function writeUint(buffer: Buffer, at: number, value: number, size: number): void {
  if (size === 1) buffer[at] = value;
  else if (size === 2) {
    buffer[at] = 0xcc;
    buffer[at + 1] = value;
  } else if (size === 3) {
    buffer[at] = 0xcd;
    buffer.writeUInt16BE(value, at + 1);
  } else {
    buffer[at] = 0xce;
    buffer.writeUInt32BE(value, at + 1);
  }
}

/** The bytes msgpack takes for a non-negative integer (fixint 1, uint 8 2, uint 16 3, uint 32 5). */
export function uintSize(value: number): number {
  return value < 0x80 ? 1 : value < 0x100 ? 2 : value < 0x10000 ? 3 : 5;
}

// ---- structure --------------------------------------------------------------------------------

/** Containers nest at most this deep: a frame array holding header arrays or the settings map is 2. */
export const MAX_NESTING = 4;
/** Items still to read in each open container, by depth; decode is not re-entrant, so one suffices. */
const pendingItems = new Float64Array(MAX_NESTING + 1);

/**
 * Walks the msgpack structure without building values: the input must be exactly one value, an array,
 * of plain msgpack (no extension types), nesting at most MAX_NESTING deep, with every length inside
 * the input. It never recurses and never allocates, so hostile input (deep nesting, huge declared
 * lengths, trailing bytes) is refused in time linear in the input before msgpackr sees it.
 */
function checkStructure(bytes: Uint8Array): void {
  const end = bytes.length;
  if (end === 0) throw new ProtocolError('an empty message is not a frame');
  const first = bytes[0]!;
  if (!((first >= 0x90 && first <= 0x9f) || first === 0xdc || first === 0xdd)) {
    throw new ProtocolError('a frame must be an array [type, stream, ...]');
  }
  let position = 0;
  let depth = 0;
  pendingItems[0] = 1;
  while (depth >= 0) {
    if (pendingItems[depth] === 0) {
      depth--;
      continue;
    }
    pendingItems[depth]!--;
    if (position >= end) throw truncated();
    const token = bytes[position++]!;
    let items = -1;
    let skip = 0;
    if (token <= 0x7f || token >= 0xe0) {
      // fixint
    } else if (token <= 0x8f) {
      items = (token & 0x0f) * 2;
    } else if (token <= 0x9f) {
      items = token & 0x0f;
    } else if (token <= 0xbf) {
      skip = token & 0x1f;
    } else {
      switch (token) {
        case 0xc0: // nil
        case 0xc2: // false
        case 0xc3: // true
          break;
        case 0xcc: // uint 8
        case 0xd0: // int 8
          skip = 1;
          break;
        case 0xcd: // uint 16
        case 0xd1: // int 16
          skip = 2;
          break;
        case 0xca: // float 32
        case 0xce: // uint 32
        case 0xd2: // int 32
          skip = 4;
          break;
        case 0xcb: // float 64
        case 0xcf: // uint 64
        case 0xd3: // int 64
          skip = 8;
          break;
        case 0xc4: // bin 8
        case 0xd9: // str 8
          if (position + 1 > end) throw truncated();
          skip = bytes[position]!;
          position += 1;
          break;
        case 0xc5: // bin 16
        case 0xda: // str 16
          if (position + 2 > end) throw truncated();
          skip = (bytes[position]! << 8) | bytes[position + 1]!;
          position += 2;
          break;
        case 0xc6: // bin 32
        case 0xdb: // str 32
          if (position + 4 > end) throw truncated();
          skip = readUint32(bytes, position);
          position += 4;
          break;
        case 0xdc: // array 16
        case 0xde: // map 16
          if (position + 2 > end) throw truncated();
          items = ((bytes[position]! << 8) | bytes[position + 1]!) * (token === 0xde ? 2 : 1);
          position += 2;
          break;
        case 0xdd: // array 32
        case 0xdf: // map 32
          if (position + 4 > end) throw truncated();
          items = readUint32(bytes, position) * (token === 0xdf ? 2 : 1);
          position += 4;
          break;
        default:
          // 0xc1 (never used) and the extension types 0xc7-0xc9, 0xd4-0xd8.
          throw new ProtocolError(`msgpack type 0x${token.toString(16)} is not allowed in a frame`);
      }
    }
    if (items >= 0) {
      // Every item takes at least one byte: a count beyond the input is a truncated (or lying) frame.
      if (items > end - position) throw truncated();
      if (depth + 1 > MAX_NESTING) throw new ProtocolError(`a frame may nest containers at most ${MAX_NESTING} deep`);
      pendingItems[++depth] = items;
    } else if (skip > end - position) {
      throw truncated();
    } else {
      position += skip;
    }
  }
  if (position !== end) throw new ProtocolError(`${end - position} trailing bytes after the frame; a message carries exactly one frame`);
}

function readUint32(bytes: Uint8Array, at: number): number {
  return bytes[at]! * 0x1000000 + ((bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!);
}

function truncated(): ProtocolError {
  return new ProtocolError('truncated frame');
}

// ---- validation -------------------------------------------------------------------------------

type Check = (value: unknown) => boolean;

const isUint = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xffffffff;
const isStream = (value: unknown): boolean => isUint(value) && (value as number) > 0;
const isZero = (value: unknown): boolean => value === 0;
const isString = (value: unknown): boolean => typeof value === 'string';
const isBool = (value: unknown): boolean => typeof value === 'boolean';
const isBytesOrNull = (value: unknown): boolean => value === null || value instanceof Uint8Array;
const isStatus = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 999;
/** A fence from the cluster's counter: any positive integer msgpack carries exactly. */
const isFence = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
/** A fence, or 0 for none. */
const isFenceOrZero = (value: unknown): boolean => value === 0 || isFence(value);
const isWindow = (value: unknown): boolean => isStream(value) && (value as number) <= MAX_WINDOW;
const isTunnel = (value: unknown): boolean => isUint(value) && (value as number) <= MAX_TUNNEL_ID;
const isBoundTunnel = (value: unknown): boolean => isTunnel(value) && (value as number) > 0;
const isPort = (value: unknown): boolean => isUint(value) && (value as number) <= 0xffff;
const isKind = (value: unknown): boolean => typeof value === 'string' && (TUNNEL_KINDS as readonly string[]).includes(value);
/**
 * Nothing in a header name or value, or a reason phrase, may end a line of a head (CR, LF) or a C string
 * (NUL): a frame with one is refused whole. Whether a name is a token and every character a byte is the
 * receiving stream's check (docs/protocol.md section 12), so one bad head resets one stream, not the tunnel.
 */
const BAD_LINE = /[\r\n\0]/;
const isLineSafe = (value: unknown): boolean => typeof value === 'string' && !BAD_LINE.test(value);
const isHeaders = (value: unknown): boolean => {
  if (!Array.isArray(value) || value.length % 2 !== 0) return false;
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i];
    if (typeof item !== 'string' || BAD_LINE.test(item)) return false;
  }
  return true;
};
const isSettings = (value: unknown): boolean => {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array) return false;
  const settings = value as Record<string, unknown>;
  return (
    isStream(settings.maxFrameBody) &&
    isWindow(settings.streamWindow) &&
    isWindow(settings.connectionWindow) &&
    isStream(settings.maxStreams) &&
    isStream(settings.maxMessage) &&
    (settings.maxTunnels === undefined || isStream(settings.maxTunnels)) &&
    (settings.clusterEdges === undefined || isStream(settings.clusterEdges)) &&
    (settings.attachment === undefined || isFence(settings.attachment))
  );
};

/** Field checks after the type, indexed by frame type; the first checks the stream id. */
const SHAPES: (readonly Check[] | undefined)[] = [];
SHAPES[FrameType.READY] = [isZero, isString, isString, isSettings];
SHAPES[FrameType.OPEN] = [isStream, isString, isLineSafe, isLineSafe, isHeaders, isString, isBytesOrNull, isBool, isBool, isTunnel];
SHAPES[FrameType.DATA] = [isStream, isBytesOrNull, isBool];
SHAPES[FrameType.RESPONSE] = [isStream, isStatus, isLineSafe, isHeaders, isBytesOrNull, isBool];
SHAPES[FrameType.WINDOW] = [isUint, isStream];
SHAPES[FrameType.RESET] = [isStream, isUint, isString];
SHAPES[FrameType.GOAWAY] = [isZero, isUint, isString];
SHAPES[FrameType.INFO] = [isStream, isStatus, isLineSafe, isHeaders];
SHAPES[FrameType.TRAILERS] = [isStream, isHeaders];
SHAPES[FrameType.BIND] = [isZero, isBoundTunnel, isKind, isString, isPort, isPort, isString, isBool, isBool, isFenceOrZero];
SHAPES[FrameType.BOUND] = [isZero, isBoundTunnel, isString, isString, isString, isString, isFenceOrZero];
SHAPES[FrameType.UNBOUND] = [isZero, isTunnel, isUint, isString];
SHAPES[FrameType.ACCEPT] = [isStream, isTunnel, isString, isString, isPort, isString, isPort];
SHAPES[FrameType.NOTICE] = [isZero, isUint, isString];

/** Frame types whose last element came later and may be absent (an older peer's frame). */
const OPTIONAL_LAST: ReadonlySet<number> = new Set([FrameType.OPEN, FrameType.BIND, FrameType.BOUND]);

export const FRAME_NAMES: readonly string[] = Object.freeze(
  Object.entries(FrameType).reduce<string[]>((names, [name, type]) => {
    names[type] = name;
    return names;
  }, []),
);

/**
 * Decodes and validates one frame. `bytes` may be a view of a buffer the caller does not own; binary
 * fields of the result are views of it too. Anything that is not exactly one valid frame throws a
 * ProtocolError whose message is short and safe to send back in GOAWAY.
 */
export function decode(bytes: Uint8Array): Frame {
  checkStructure(bytes);
  let value: unknown;
  try {
    value = unpackr.unpack(bytes as Buffer);
  } catch (error) {
    throw new ProtocolError(`undecodable frame: ${String((error as Error)?.message).slice(0, 80)}`);
  }
  if (!Array.isArray(value) || value.length < 2) throw new ProtocolError('a frame must be an array [type, stream, ...]');
  const type = value[0];
  const shape = typeof type === 'number' && Number.isInteger(type) && type >= 1 && type <= MAX_FRAME_TYPE ? SHAPES[type] : undefined;
  if (shape === undefined) {
    const retired = typeof type === 'number' ? RETIRED_FRAME_TYPES[type] : undefined;
    if (retired !== undefined) throw new ProtocolError(`frame type ${type} (${retired}) is protocol 1's; protocol 2 has no such frame`);
    throw new ProtocolError(`unknown frame type ${typeof type === 'number' ? type : typeof type}`);
  }
  // The last element of OPEN (the tunnel), BIND (drop) and BOUND (attachment) may be absent (docs/protocol.md section 18).
  if (value.length !== shape.length + 1 && !(OPTIONAL_LAST.has(type) && value.length === shape.length)) {
    throw new ProtocolError(`${FRAME_NAMES[type]} frame has ${value.length} elements, expected ${shape.length + 1}`);
  }
  for (let i = 0; i < value.length - 1; i++) {
    if (!shape[i]!(value[i + 1])) throw new ProtocolError(`${FRAME_NAMES[type]} frame: element ${i + 1} has the wrong type or value`);
  }
  return value as Frame;
}
