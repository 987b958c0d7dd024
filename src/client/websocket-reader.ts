/**
 * A read-only RFC 6455 frame reader for the inspector: the bytes of an upgraded connection pass through
 * the tunnel untouched (docs/protocol.md section 13), and this reads a copy of them as they go by to
 * tell the inspector what messages crossed and how the connection closed. It never frames, re-frames or
 * holds back a byte; it keeps at most WS_MESSAGE_BYTES_KEPT of each message (unmasked), and the length
 * of the rest. A message of a connection that negotiated permessage-deflate is shown as it travelled,
 * compressed.
 */
import { WS_MESSAGE_BYTES_KEPT } from './exchange.js';

export interface FrameReaderEvents {
  /** A whole message: its first bytes (at most WS_MESSAGE_BYTES_KEPT) and its full size. */
  message(kept: Uint8Array, size: number, binary: boolean): void;
  /** A close frame: its code (null when it carried none) and reason. */
  close(code: number | null, reason: string): void;
}

const enum Stage {
  HEAD,
  PAYLOAD,
  /** Bytes that are not WebSocket frames (a protocol other than WebSocket): nothing more is read. */
  OFF,
}

export class WebSocketFrameReader {
  private stage = Stage.HEAD;
  /** Header bytes of the frame being read (at most 14). */
  private readonly head = Buffer.alloc(14);
  private headLength = 0;
  private opcode = 0;
  private fin = false;
  private mask: number[] | null = null;
  private remaining = 0;
  private payloadOffset = 0;
  /** The message being read: its type, its size so far, and its first bytes. */
  private messageBinary = false;
  private messageSize = 0;
  private kept: Buffer[] = [];
  private keptBytes = 0;
  /** A close frame's payload (at most 125 bytes). */
  private control: Buffer[] = [];

  constructor(private readonly events: FrameReaderEvents) {}

  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.byteLength && this.stage !== Stage.OFF) {
      if (this.stage === Stage.HEAD) at = this.readHead(chunk, at);
      else at = this.readPayload(chunk, at);
    }
  }

  private readHead(chunk: Uint8Array, from: number): number {
    let at = from;
    while (at < chunk.byteLength) {
      this.head[this.headLength++] = chunk[at++]!;
      const needed = this.headNeeded();
      if (needed === -1) {
        this.stage = Stage.OFF;
        return chunk.byteLength;
      }
      if (this.headLength < needed) continue;
      this.startFrame(needed);
      return at;
    }
    return at;
  }

  /** Bytes the current frame's header has, once its first two are known (-1: not a frame). */
  private headNeeded(): number {
    if (this.headLength < 2) return 2;
    const length = this.head[1]! & 0x7f;
    const masked = (this.head[1]! & 0x80) !== 0;
    const extra = length === 126 ? 2 : length === 127 ? 8 : 0;
    const opcode = this.head[0]! & 0x0f;
    if ((opcode > 2 && opcode < 8) || opcode > 10) return -1;
    return 2 + extra + (masked ? 4 : 0);
  }

  private startFrame(headerLength: number): void {
    const head = this.head;
    const short = head[1]! & 0x7f;
    let length = short;
    let offset = 2;
    if (short === 126) {
      length = head.readUInt16BE(2);
      offset = 4;
    } else if (short === 127) {
      length = Number(head.readBigUInt64BE(2));
      offset = 10;
    }
    this.mask = (head[1]! & 0x80) !== 0 ? [head[offset]!, head[offset + 1]!, head[offset + 2]!, head[offset + 3]!] : null;
    this.headLength = 0;
    this.fin = (head[0]! & 0x80) !== 0;
    const opcode = head[0]! & 0x0f;
    this.opcode = opcode;
    this.remaining = length;
    this.payloadOffset = 0;
    if (opcode === 1 || opcode === 2) {
      this.messageBinary = opcode === 2;
      this.messageSize = 0;
      this.kept = [];
      this.keptBytes = 0;
    }
    if (opcode >= 8) this.control = [];
    void headerLength;
    this.stage = Stage.PAYLOAD;
    if (length === 0) this.endFrame();
  }

  private readPayload(chunk: Uint8Array, from: number): number {
    const take = Math.min(this.remaining, chunk.byteLength - from);
    const part = chunk.subarray(from, from + take);
    const opcode = this.opcode;
    if (opcode < 8) {
      this.messageSize += take;
      const room = WS_MESSAGE_BYTES_KEPT - this.keptBytes;
      if (room > 0) this.keep(part.subarray(0, Math.min(room, take)), this.kept);
    } else if (opcode === 8) {
      this.keep(part, this.control);
    }
    this.payloadOffset += take;
    this.remaining -= take;
    if (this.remaining === 0) this.endFrame();
    return from + take;
  }

  /** Copies `part` (unmasked) into `into`. */
  private keep(part: Uint8Array, into: Buffer[]): void {
    const copy = Buffer.from(part);
    const mask = this.mask;
    if (mask !== null) {
      const base = this.payloadOffset;
      for (let i = 0; i < copy.length; i++) copy[i] = copy[i]! ^ mask[(base + i) & 3]!;
    }
    into.push(copy);
    if (into === this.kept) this.keptBytes += copy.length;
  }

  private endFrame(): void {
    this.stage = Stage.HEAD;
    const opcode = this.opcode;
    if (opcode === 8) {
      const payload = Buffer.concat(this.control);
      this.events.close(payload.length >= 2 ? payload.readUInt16BE(0) : null, payload.length > 2 ? payload.subarray(2).toString('utf8') : '');
      return;
    }
    if (opcode >= 8 || !this.fin) return;
    this.events.message(Buffer.concat(this.kept, this.keptBytes), this.messageSize, this.messageBinary);
    this.kept = [];
    this.keptBytes = 0;
  }
}
