/**
 * The credit bookkeeping of a raw stream (a TCP or TLS passthrough connection, docs/protocol.md section
 * 18), the same on both sides: the edge's public socket (src/edge/raw-stream.ts) and the client's local
 * one (src/client/raw-stream.ts). No sockets here: the owner reads and writes its socket and tells the
 * pipe, which frames what it read as DATA within the stream's and the connection's credit and returns
 * credit for what the socket took.
 *
 * Outgoing: bytes the credit does not cover wait here (one socket read at most: the owner's socket is
 * paused until the credit comes), and the source's end goes out as DATA `end` once nothing waits.
 * Incoming: the peer's DATA is checked against the stream window; its credit goes back (WINDOW, and the
 * connection's through the owner) once the socket took the bytes, so a slow reader slows the sender.
 */
import { encode } from './codec.js';
import { FrameType } from './constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit } from './flow.js';

/** What the pipe needs from its owner and, through it, from the connection. */
export interface RawPipeOwner {
  readonly settings: { readonly maxFrameBody: number };
  readonly connectionSend: SendCredit;
  send(frame: Buffer): void;
  /** Connection credit, returned for bytes written out (or dropped). */
  consumedConnection(bytes: number): void;
  /** The connection's credit ran out while bytes wait: call `drain()` when it comes back. */
  waitForConnection(): void;
  pauseSource(): void;
  resumeSource(): void;
}

export class RawPipe {
  readonly sendCredit: SendCredit;
  readonly receiveWindow: ReceiveWindow;
  /** Source bytes waiting for credit (copies: a socket's buffers are its own). */
  private pending: Buffer[] = [];
  private paused = false;
  /** The source ended (its FIN): DATA `end` goes out once nothing waits. */
  private sourceEnded = false;
  /** Bytes the sink took while full: their credit waits for its drain. */
  private unacknowledged = 0;
  /** Bytes received from the peer, and those whose connection credit went back. */
  private received = 0;
  private returned = 0;
  /** Over: no more WINDOW for the stream (connection credit still goes back). */
  closed = false;

  constructor(
    readonly id: number,
    private readonly owner: RawPipeOwner,
    window: number,
  ) {
    this.sendCredit = new SendCredit(window);
    this.receiveWindow = new ReceiveWindow(window);
  }

  /** Source bytes waiting for credit. */
  get pendingBytes(): number {
    let bytes = 0;
    for (const chunk of this.pending) bytes += chunk.byteLength;
    return bytes;
  }

  /** The source is paused until credit comes. */
  get holding(): boolean {
    return this.paused;
  }

  /** Nothing waits either way: every source byte was framed, every sink byte taken. */
  get idle(): boolean {
    return this.pending.length === 0 && this.unacknowledged === 0;
  }

  // ---- source → peer --------------------------------------------------------------------------------

  fromSource(chunk: Buffer): void {
    if (this.pending.length > 0) {
      this.pending.push(chunk);
      return;
    }
    const sent = this.sendWithinCredit(chunk);
    if (sent < chunk.byteLength) this.wait(chunk.subarray(sent));
  }

  /** The source ended; true when its DATA `end` went out now (else it goes once the waiting bytes did). */
  sourceEnd(): boolean {
    this.sourceEnded = true;
    if (this.pending.length > 0) return false;
    this.owner.send(encode([FrameType.DATA, this.id, null, true]));
    return true;
  }

  /** More credit (stream or connection): send what waits, then the end or read on. True when the end went out. */
  drain(): boolean {
    while (this.pending.length > 0) {
      const chunk = this.pending[0]!;
      const sent = this.sendWithinCredit(chunk);
      if (sent < chunk.byteLength) {
        this.pending[0] = chunk.subarray(sent);
        if (this.owner.connectionSend.available === 0) this.owner.waitForConnection();
        return false;
      }
      this.pending.shift();
    }
    if (this.sourceEnded) {
      this.owner.send(encode([FrameType.DATA, this.id, null, true]));
      return true;
    }
    if (this.paused) {
      this.paused = false;
      this.owner.resumeSource();
    }
    return false;
  }

  /** WINDOW for the stream. */
  grant(credit: number): boolean {
    this.sendCredit.grant(credit);
    return this.drain();
  }

  private sendWithinCredit(chunk: Uint8Array): number {
    const maxFrame = this.owner.settings.maxFrameBody;
    const connection = this.owner.connectionSend;
    let offset = 0;
    while (offset < chunk.byteLength) {
      const size = takeFrameCredit(chunk.byteLength - offset, maxFrame, this.sendCredit, connection);
      if (size === 0) break;
      this.owner.send(encode([FrameType.DATA, this.id, chunk.subarray(offset, offset + size), false]));
      offset += size;
    }
    return offset;
  }

  private wait(rest: Uint8Array): void {
    this.pending.push(Buffer.from(rest));
    if (this.owner.connectionSend.available === 0) this.owner.waitForConnection();
    if (!this.paused) {
      this.paused = true;
      this.owner.pauseSource();
    }
  }

  // ---- peer → sink ----------------------------------------------------------------------------------

  /** The peer's DATA of `size` bytes arrived; false when it broke the stream window. */
  receive(size: number): boolean {
    if (!this.receiveWindow.receive(size)) return false;
    this.received += size;
    return true;
  }

  /** The peer's DATA of `size` bytes arrived, its window already checked (the edge's connection does). */
  counted(size: number): void {
    this.received += size;
  }

  /** The sink was given `bytes`: taken at once (`accepted`), or held until its drain. */
  wrote(bytes: number, accepted: boolean): void {
    if (accepted) this.consumed(bytes);
    else this.unacknowledged += bytes;
  }

  /** The sink drained: the bytes it held are taken. */
  sinkDrained(): void {
    const bytes = this.unacknowledged;
    this.unacknowledged = 0;
    this.consumed(bytes);
  }

  /** Returns credit for `bytes` the sink took (never more than was received). */
  private consumed(bytes: number): void {
    const give = Math.min(bytes, this.received - this.returned);
    if (give <= 0) return;
    this.returned += give;
    if (!this.closed) {
      const grant = this.receiveWindow.consume(give);
      if (grant > 0) this.owner.send(encode([FrameType.WINDOW, this.id, grant]));
    }
    this.owner.consumedConnection(give);
  }

  /** The stream is over: waiting bytes are dropped, and bytes received but never taken give their connection credit back. */
  close(): void {
    this.closed = true;
    this.pending = [];
    this.unacknowledged = 0;
    this.consumed(this.received - this.returned);
  }
}
