/**
 * Frame encoding and decoding: one msgpack array per WebSocket message, `[type, stream, ...fields]`.
 *
 * Decoding validates every field's type through a table indexed by frame type (after a range check),
 * so the session code can index a decoded frame without checks. Anything else, including truncated or
 * trailing bytes, is a ProtocolError: the receiving side ends that tunnel with the reason, never the
 * process. Binary fields decode as views of the input, not copies: a receiver that keeps a chunk past
 * the input's lifetime copies it itself, once.
 */
import { Packr, Unpackr } from 'msgpackr';
import { FrameType, GoAwayCode, MAX_FRAME_TYPE, type GoAwayCodeValue, type Settings } from './constants.js';

export type Bytes = Uint8Array;
/** Header pairs flattened: [name0, value0, name1, value1, ...]; names are lower-case. */
export type HeaderList = string[];

export type ReadyFrame = [typeof FrameType.READY, 0, subdomain: string, publicUrl: string, settings: Settings];
export type OpenFrame = [
  typeof FrameType.OPEN,
  stream: number,
  requestId: string,
  method: string,
  path: string,
  headers: HeaderList,
  clientAddress: string,
  body: Bytes | null,
  end: boolean,
];
export type DataFrame = [typeof FrameType.DATA, stream: number, chunk: Bytes | null, end: boolean];
export type ResponseFrame = [
  typeof FrameType.RESPONSE,
  stream: number,
  status: number,
  headers: HeaderList,
  body: Bytes | null,
  end: boolean,
];
export type WindowFrame = [typeof FrameType.WINDOW, stream: number, credit: number];
export type ResetFrame = [typeof FrameType.RESET, stream: number, code: number, message: string];
export type GoAwayFrame = [typeof FrameType.GOAWAY, 0, code: number, message: string];
export type WsOpenFrame = [
  typeof FrameType.WS_OPEN,
  stream: number,
  requestId: string,
  path: string,
  headers: HeaderList,
  clientAddress: string,
];
export type WsResponseFrame = [typeof FrameType.WS_RESPONSE, stream: number, status: number, protocol: string, headers: HeaderList];
export type WsMessageFrame = [typeof FrameType.WS_MESSAGE, stream: number, data: Bytes, binary: boolean, fin: boolean];
export type WsCloseFrame = [typeof FrameType.WS_CLOSE, stream: number, code: number, reason: string];

export type Frame =
  | ReadyFrame
  | OpenFrame
  | DataFrame
  | ResponseFrame
  | WindowFrame
  | ResetFrame
  | GoAwayFrame
  | WsOpenFrame
  | WsResponseFrame
  | WsMessageFrame
  | WsCloseFrame;

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

// ---- validation -------------------------------------------------------------------------------

type Check = (value: unknown) => boolean;

const isUint = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xffffffff;
const isStream = (value: unknown): boolean => isUint(value) && (value as number) > 0;
const isZero = (value: unknown): boolean => value === 0;
const isString = (value: unknown): boolean => typeof value === 'string';
const isBool = (value: unknown): boolean => typeof value === 'boolean';
const isBytes = (value: unknown): boolean => value instanceof Uint8Array;
const isBytesOrNull = (value: unknown): boolean => value === null || value instanceof Uint8Array;
const isStatus = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 999;
const isCloseCode = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 4999;
const isHeaders = (value: unknown): boolean => {
  if (!Array.isArray(value) || value.length % 2 !== 0) return false;
  for (let i = 0; i < value.length; i++) if (typeof value[i] !== 'string') return false;
  return true;
};
const isSettings = (value: unknown): boolean => {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const settings = value as Record<string, unknown>;
  return (
    isStream(settings.maxFrameBody) &&
    isStream(settings.streamWindow) &&
    isStream(settings.connectionWindow) &&
    isStream(settings.maxStreams) &&
    isStream(settings.maxMessage)
  );
};

/** Field checks after [type, stream], indexed by frame type. */
const SHAPES: (readonly Check[] | undefined)[] = [];
SHAPES[FrameType.READY] = [isZero, isString, isString, isSettings];
SHAPES[FrameType.OPEN] = [isStream, isString, isString, isString, isHeaders, isString, isBytesOrNull, isBool];
SHAPES[FrameType.DATA] = [isStream, isBytesOrNull, isBool];
SHAPES[FrameType.RESPONSE] = [isStream, isStatus, isHeaders, isBytesOrNull, isBool];
SHAPES[FrameType.WINDOW] = [isUint, isStream];
SHAPES[FrameType.RESET] = [isStream, isUint, isString];
SHAPES[FrameType.GOAWAY] = [isZero, isUint, isString];
SHAPES[FrameType.WS_OPEN] = [isStream, isString, isString, isHeaders, isString];
SHAPES[FrameType.WS_RESPONSE] = [isStream, isStatus, isString, isHeaders];
SHAPES[FrameType.WS_MESSAGE] = [isStream, isBytes, isBool, isBool];
SHAPES[FrameType.WS_CLOSE] = [isStream, isCloseCode, isString];

export const FRAME_NAMES: readonly string[] = Object.freeze(
  Object.entries(FrameType).reduce<string[]>((names, [name, type]) => {
    names[type] = name;
    return names;
  }, []),
);

/**
 * Decodes and validates one frame. `bytes` may be a view of a buffer the caller does not own; binary
 * fields of the result are views of it too.
 */
export function decode(bytes: Uint8Array): Frame {
  let value: unknown;
  try {
    value = unpackr.unpack(bytes as Buffer);
  } catch (error) {
    throw new ProtocolError(`undecodable frame: ${(error as Error).message}`);
  }
  if (!Array.isArray(value) || value.length < 2) throw new ProtocolError('a frame must be an array [type, stream, ...]');
  const type = value[0];
  if (typeof type !== 'number' || !Number.isInteger(type) || type < 1 || type > MAX_FRAME_TYPE) {
    throw new ProtocolError(`unknown frame type ${String(type)}`);
  }
  const shape = SHAPES[type]!;
  if (value.length !== shape.length + 1) {
    throw new ProtocolError(`${FRAME_NAMES[type]} frame has ${value.length} elements, expected ${shape.length + 1}`);
  }
  for (let i = 0; i < shape.length; i++) {
    if (!shape[i]!(value[i + 1])) throw new ProtocolError(`${FRAME_NAMES[type]} frame: element ${i + 1} has the wrong type`);
  }
  return value as Frame;
}
