/**
 * A read-only view of a WebSocket's messages for the inspector. After a 101 the tunnel carries the raw
 * bytes of both directions untouched (docs/protocol.md section 13); the inspector still lists messages,
 * so each direction's bytes are also fed, as they pass, to a `WsFrameReader` that parses RFC 6455
 * framing: FIN, opcodes, masks, 7/16/64-bit lengths, fragmented messages, control frames between
 * fragments, close code and reason.
 *
 * It never changes, delays or holds the traffic: it reads the chunks it is shown and copies out at most
 * `cap` bytes of each message (the inspector's display cap), counting the rest, so a message of any size
 * costs at most `cap` bytes here and is recorded cut with its real length.
 *
 * permessage-deflate (RFC 7692): when the handshake's answer accepted it, compressed messages (RSV1 on
 * their first frame) are inflated for display with node:zlib's raw inflate, streaming, per direction:
 * one inflater per direction when the sender keeps its context between messages, a fresh one for each
 * message when the answer says `server_no_context_takeover` (or `client_...` for the other direction).
 * The window is always inflated with 15 bits, which decodes any smaller window the sender chose. When
 * inflating fails (bad data, a message inflating past `MAX_INFLATED`, a backlog the inspector cannot
 * keep up with) the message is shown as its compressed bytes with a note, and so is every later
 * message of that direction whose context is lost with it; the traffic is never touched.
 *
 * Messages come out in the order they were sent, per direction. An uncompressed message that follows
 * a compressed one waits for the inflater (zlib works off the main thread), never the traffic.
 */
import { createInflateRaw, type InflateRaw } from 'node:zlib';

export const WsOpcode = { CONTINUATION: 0, TEXT: 1, BINARY: 2, CLOSE: 8, PING: 9, PONG: 10 } as const;

/** A message as the inspector shows it. */
export interface ObservedWsMessage {
  /** TEXT, BINARY, CLOSE, PING or PONG. */
  opcode: number;
  /** The first `cap` bytes of the payload as the application sees it (inflated when it could be). */
  data: Buffer;
  /** The payload's length as the application sees it: inflated length when inflated, else the wire length. */
  size: number;
  /** Payload bytes on the wire (for a compressed message, its compressed length). */
  wireSize: number;
  /** `data` is shorter than the message. */
  truncated: boolean;
  /** Compressed on the wire (permessage-deflate, RSV1). */
  compressed: boolean;
  /** Set when the message is shown otherwise than the application sees it, saying why; else ''. */
  note: string;
  /** Frames the message came in (1 unless fragmented). */
  frames: number;
  /** A CLOSE frame's status code (null when it carried none) and reason. */
  closeCode: number | null;
  closeReason: string;
}

/** The permessage-deflate parameters of one direction's sender. */
export interface DeflateParameters {
  /** The sender starts every message with an empty window (`*_no_context_takeover`). */
  noContextTakeover: boolean;
  /** `*_max_window_bits`, or 15. */
  maxWindowBits: number;
}

/** What a 101's `Sec-WebSocket-Extensions` accepted: the client's compressor and the server's. */
export interface NegotiatedDeflate {
  client: DeflateParameters;
  server: DeflateParameters;
}

/** Inflated bytes past this in one message: it is shown compressed (a decompression bomb costs no more). */
export const MAX_INFLATED = 64 * 1024 * 1024;
/** Compressed bytes waiting in zlib past this, or this many messages waiting: inflating gives up. */
const MAX_INFLATE_BACKLOG = 8 * 1024 * 1024;
const MAX_WAITING_MESSAGES = 4096;
/** Inflaters of one-message contexts alive at once per direction (each holds a 32 KiB window). */
const MAX_SINGLE_INFLATIONS = 16;
/** RFC 6455 section 5.5: a control frame's payload is at most 125 bytes. */
const MAX_CONTROL_PAYLOAD = 125;
/** RFC 7692 section 7.2.2: the bytes the sender removed from the end of each message. */
const DEFLATE_TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);

/**
 * The permessage-deflate a 101 accepted, from its fields (flat, names in any case), or null. Only the
 * first extension offered counts when it is permessage-deflate (RFC 7692 section 5.1).
 */
export function negotiatedDeflate(fields: readonly string[]): NegotiatedDeflate | null {
  let header = '';
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i]!.toLowerCase() === 'sec-websocket-extensions') header = header === '' ? fields[i + 1]! : `${header}, ${fields[i + 1]!}`;
  }
  if (header === '') return null;
  for (const extension of header.split(',')) {
    const parts = extension.split(';').map((part) => part.trim());
    if (parts[0]!.toLowerCase() !== 'permessage-deflate') continue;
    const negotiated: NegotiatedDeflate = { client: { noContextTakeover: false, maxWindowBits: 15 }, server: { noContextTakeover: false, maxWindowBits: 15 } };
    for (const parameter of parts.slice(1)) {
      const equals = parameter.indexOf('=');
      const name = (equals === -1 ? parameter : parameter.slice(0, equals)).trim().toLowerCase();
      const value = equals === -1 ? '' : parameter.slice(equals + 1).trim().replace(/^"(.*)"$/, '$1');
      const bits = /^[0-9]{1,2}$/.test(value) ? Number(value) : 15;
      if (name === 'server_no_context_takeover') negotiated.server.noContextTakeover = true;
      else if (name === 'client_no_context_takeover') negotiated.client.noContextTakeover = true;
      else if (name === 'server_max_window_bits') negotiated.server.maxWindowBits = bits;
      else if (name === 'client_max_window_bits') negotiated.client.maxWindowBits = bits;
    }
    return negotiated;
  }
  return null;
}

/** Both directions of one WebSocket: 'in' from the public client to the local server, 'out' back. */
export class WsObserver {
  readonly fromClient: WsFrameReader;
  readonly fromServer: WsFrameReader;

  /** `responseFields`: the 101's fields (for permessage-deflate); `cap`: bytes kept of each message. */
  constructor(responseFields: readonly string[], cap: number, onMessage: (direction: 'in' | 'out', message: ObservedWsMessage) => void) {
    const deflate = negotiatedDeflate(responseFields);
    this.fromClient = new WsFrameReader(cap, deflate?.client ?? null, (message) => onMessage('in', message));
    this.fromServer = new WsFrameReader(cap, deflate?.server ?? null, (message) => onMessage('out', message));
  }

  /** The connection is over: inflaters are released; messages not yet complete are not reported. */
  close(): void {
    this.fromClient.close();
    this.fromServer.close();
  }
}

/** A message being read (or inflated): what is kept of it and what is counted. */
class MessageRecord {
  opcode = 0;
  compressed = false;
  frames = 0;
  wireSize = 0;
  /** Kept bytes of the payload as it came off the wire (unmasked; compressed ones for a compressed message). */
  wire: Buffer[] = [];
  wireKept = 0;
  /** The inflater this message's bytes go to; null when it is not inflated (or inflating gave up). */
  inflation: Inflation | null = null;
  /** Inflated output kept, and counted. */
  inflated: Buffer[] = [];
  inflatedKept = 0;
  inflatedSize = 0;
  note = '';
  /** Its last frame was read. */
  complete = false;
  /** Complete, and inflated if it is to be: it can be reported. */
  ready = false;
}

/** One inflate stream and the messages it is inflating, oldest first. */
class Inflation {
  private readonly stream: InflateRaw;
  private readonly messages: MessageRecord[] = [];
  private broken = false;

  constructor(
    private readonly reader: WsFrameReader,
    private readonly cap: number,
    /** One message only (the sender does not keep its context): the stream ends with it. */
    private readonly single: boolean,
  ) {
    this.stream = createInflateRaw({ windowBits: 15 });
    this.stream.on('data', this.onData);
    this.stream.on('error', this.onError);
  }

  add(message: MessageRecord): void {
    message.inflation = this;
    this.messages.push(message);
  }

  write(bytes: Buffer): void {
    this.stream.write(bytes);
    if (this.stream.writableLength > MAX_INFLATE_BACKLOG) this.giveUp(FELL_BEHIND);
  }

  /** The message's last bytes are in: its inflation ends at the flush. */
  end(message: MessageRecord): void {
    this.stream.write(DEFLATE_TAIL);
    this.stream.flush(() => {
      if (this.broken || this.messages[0] !== message) return;
      this.messages.shift();
      message.inflation = null;
      message.ready = true;
      if (this.single) this.close();
      this.reader.drainReady();
    });
  }

  private readonly onData = (output: Buffer): void => {
    const message = this.messages[0];
    if (message === undefined || this.broken) return;
    message.inflatedSize += output.byteLength;
    if (message.inflatedKept < this.cap) {
      const take = Math.min(this.cap - message.inflatedKept, output.byteLength);
      message.inflated.push(take === output.byteLength ? output : Buffer.from(output.subarray(0, take)));
      message.inflatedKept += take;
    }
    if (message.inflatedSize > MAX_INFLATED) this.giveUp(`inflates to more than ${MAX_INFLATED} bytes; shown compressed`);
  };

  private readonly onError = (error: Error): void => {
    this.giveUp(`could not be inflated (${error.message}); shown compressed`);
  };

  /** Every message still inflating here is shown compressed with `note`; the stream is released. */
  giveUp(note: string): void {
    if (this.broken) return;
    for (const message of this.messages) {
      message.inflation = null;
      message.note = note;
      message.ready = message.complete;
    }
    this.close();
    this.reader.inflationFailed(this);
  }

  close(): void {
    if (this.broken) return;
    this.broken = true;
    this.messages.length = 0;
    this.stream.destroy();
    if (this.single) this.reader.singleInflations--;
  }
}

const FELL_BEHIND = 'not inflated: the inspector could not keep up; shown compressed';

const ReaderState = { HEADER: 0, PAYLOAD: 1, STOPPED: 2 } as const;
type ReaderStateValue = (typeof ReaderState)[keyof typeof ReaderState];

/** One direction's bytes in, its messages out (see the file's comment). */
export class WsFrameReader {
  private state: ReaderStateValue = ReaderState.HEADER;
  private readonly header = Buffer.alloc(14);
  private headerHave = 0;
  private headerNeed = 2;
  // The frame being read.
  private fin = false;
  private rsv1 = false;
  private opcode = 0;
  private masked = false;
  private readonly mask = Buffer.alloc(4);
  private remaining = 0;
  private payloadOffset = 0;
  // Messages.
  private message: MessageRecord | null = null;
  private control: MessageRecord | null = null;
  /** Messages complete on the wire, in order: reported from the front as they become ready. */
  private readonly waiting: MessageRecord[] = [];
  /** The inflater of a sender that keeps its context (one per direction). */
  private inflation: Inflation | null = null;
  /** Set when inflating gave up for good (the sender keeps its context, and it was lost): the note. */
  private inflateLost = '';
  /** Why reading stopped, once it has: the bytes no longer look like WebSocket frames. */
  stopped = '';
  /** One-message inflaters alive (a sender without context takeover). */
  singleInflations = 0;

  constructor(
    private readonly cap: number,
    private readonly deflate: DeflateParameters | null,
    private readonly onMessage: (message: ObservedWsMessage) => void,
  ) {}

  /** Bytes that passed in this direction. The chunk is read, never changed or kept. */
  push(chunk: Buffer): void {
    let at = 0;
    const length = chunk.byteLength;
    while (at < length && this.state !== ReaderState.STOPPED) {
      if (this.state === ReaderState.HEADER) {
        const take = Math.min(this.headerNeed - this.headerHave, length - at);
        chunk.copy(this.header, this.headerHave, at, at + take);
        this.headerHave += take;
        at += take;
        if (this.headerHave === this.headerNeed) this.readHeader();
        continue;
      }
      const take = Math.min(this.remaining, length - at);
      this.readPayload(chunk, at, take);
      at += take;
      this.remaining -= take;
      this.payloadOffset += take;
      if (this.remaining === 0 && this.state === ReaderState.PAYLOAD) this.endFrame();
    }
  }

  /** The connection is over: inflaters are released; messages not yet reported never will be. */
  close(): void {
    this.state = ReaderState.STOPPED;
    this.inflation?.close();
    this.inflation = null;
    for (const message of this.waiting) message.inflation?.close();
    this.message?.inflation?.close();
    this.waiting.length = 0;
  }

  /** An inflater gave up: with context takeover, every later compressed message is lost with it. */
  inflationFailed(inflation: Inflation): void {
    if (this.inflation === inflation) {
      this.inflation = null;
      this.inflateLost = 'not inflated: an earlier message of this direction could not be, and the sender keeps its context; shown compressed';
    }
    this.drainReady();
  }

  /** Reports the messages at the front that are ready, in order. */
  drainReady(): void {
    const waiting = this.waiting;
    while (waiting.length > 0 && waiting[0]!.ready) this.report(waiting.shift()!);
  }

  // ---- frames ------------------------------------------------------------------------------------------

  private readHeader(): void {
    const header = this.header;
    if (this.headerNeed === 2) {
      const second = header[1]!;
      const size = second & 0x7f;
      const need = 2 + (size === 126 ? 2 : size === 127 ? 8 : 0) + (second & 0x80 ? 4 : 0);
      if (need > 2) {
        this.headerNeed = need;
        return;
      }
    }
    const first = header[0]!;
    const second = header[1]!;
    this.fin = (first & 0x80) !== 0;
    this.rsv1 = (first & 0x40) !== 0;
    this.opcode = first & 0x0f;
    this.masked = (second & 0x80) !== 0;
    let size = second & 0x7f;
    let offset = 2;
    if (size === 126) {
      size = header.readUInt16BE(2);
      offset = 4;
    } else if (size === 127) {
      const high = header.readUInt32BE(2);
      if (high > 0x1fffff) {
        this.stop('a frame longer than 2^53 bytes');
        return;
      }
      size = high * 0x100000000 + header.readUInt32BE(6);
      offset = 10;
    }
    if (this.masked) header.copy(this.mask, 0, offset, offset + 4);
    this.headerHave = 0;
    this.headerNeed = 2;
    this.remaining = size;
    this.payloadOffset = 0;
    if (!this.startFrame(size)) return;
    if (size === 0) this.endFrame();
    else this.state = ReaderState.PAYLOAD;
  }

  private startFrame(size: number): boolean {
    const opcode = this.opcode;
    if (opcode >= 8) {
      if (opcode > 10) return this.stop(`a frame with the reserved opcode ${opcode}`);
      if (!this.fin || size > 125) return this.stop('a control frame fragmented or longer than 125 bytes');
      const control = new MessageRecord();
      control.opcode = opcode;
      control.frames = 1;
      this.control = control;
      return true;
    }
    if (opcode > 2) return this.stop(`a frame with the reserved opcode ${opcode}`);
    if (opcode === WsOpcode.CONTINUATION) {
      if (this.message === null) return this.stop('a continuation frame without a message to continue');
    } else {
      if (this.message !== null) return this.stop('a new message before the last one ended');
      const message = new MessageRecord();
      message.opcode = opcode;
      message.compressed = this.rsv1;
      this.message = message;
      if (this.rsv1) this.startInflating(message);
    }
    this.message!.frames++;
    return true;
  }

  private readPayload(chunk: Buffer, at: number, take: number): void {
    const control = this.opcode >= 8;
    const message = control ? this.control! : this.message!;
    // A control frame is read whole whatever the cap (at most 125 bytes): a close's code and reason are
    // reported even when nothing of the messages is kept (`burrow http`'s lines without an inspector).
    const cap = control ? MAX_CONTROL_PAYLOAD : this.cap;
    message.wireSize += take;
    const inflation = message.inflation;
    if (inflation === null && message.wireKept >= cap) return;
    // Copy out (and unmask) what is kept or inflated; the chunk itself is left as it is.
    const copy = inflation !== null ? take : Math.min(take, cap - message.wireKept);
    const bytes = Buffer.allocUnsafe(copy);
    chunk.copy(bytes, 0, at, at + copy);
    if (this.masked) unmask(bytes, this.mask, this.payloadOffset);
    if (message.wireKept < cap) {
      const keep = Math.min(copy, cap - message.wireKept);
      message.wire.push(keep === copy ? bytes : bytes.subarray(0, keep));
      message.wireKept += keep;
    }
    inflation?.write(bytes);
  }

  private endFrame(): void {
    this.state = ReaderState.HEADER;
    let message: MessageRecord;
    if (this.opcode >= 8) {
      message = this.control!;
      this.control = null;
    } else {
      if (!this.fin) return;
      message = this.message!;
      this.message = null;
    }
    message.complete = true;
    const inflation = message.inflation;
    if (inflation === null) message.ready = true;
    this.waiting.push(message);
    if (inflation !== null) {
      inflation.end(message);
      if (this.waiting.length > MAX_WAITING_MESSAGES) inflation.giveUp(FELL_BEHIND);
    }
    this.drainReady();
  }

  private startInflating(message: MessageRecord): void {
    if (this.deflate === null) {
      message.note = 'compressed (RSV1) although the handshake negotiated no permessage-deflate; shown as sent';
      return;
    }
    if (this.inflateLost !== '') {
      message.note = this.inflateLost;
      return;
    }
    if (this.deflate.noContextTakeover) {
      if (this.singleInflations >= MAX_SINGLE_INFLATIONS) {
        message.note = FELL_BEHIND;
        return;
      }
      this.singleInflations++;
      new Inflation(this, this.cap, true).add(message);
      return;
    }
    this.inflation ??= new Inflation(this, this.cap, false);
    this.inflation.add(message);
  }

  private stop(reason: string): false {
    this.state = ReaderState.STOPPED;
    this.stopped = `not WebSocket frames any more: ${reason}`;
    return false;
  }

  private report(record: MessageRecord): void {
    const inflated = record.compressed && record.note === '';
    const parts = inflated ? record.inflated : record.wire;
    const kept = inflated ? record.inflatedKept : record.wireKept;
    const size = inflated ? record.inflatedSize : record.wireSize;
    const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts, kept);
    let closeCode: number | null = null;
    let closeReason = '';
    if (record.opcode === WsOpcode.CLOSE && data.byteLength >= 2) {
      closeCode = data.readUInt16BE(0);
      closeReason = data.toString('utf8', 2);
    }
    this.onMessage({
      opcode: record.opcode,
      data,
      size,
      wireSize: record.wireSize,
      truncated: kept < size,
      compressed: record.compressed,
      note: record.note,
      frames: record.frames,
      closeCode,
      closeReason,
    });
  }
}

/** XORs `bytes` with the mask, starting at `offset` bytes into the frame's payload. */
function unmask(bytes: Buffer, mask: Buffer, offset: number): void {
  for (let i = 0; i < bytes.byteLength; i++) bytes[i] = bytes[i]! ^ mask[(offset + i) & 3]!;
}
