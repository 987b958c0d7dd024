/**
 * WebSocket passthrough messages over a stream, the part both ends share: outgoing messages are cut
 * into WS_MESSAGE fragments of at most maxFrameBody and sent within the stream's and the connection's
 * credit; incoming fragments are put back together, up to a size limit. Pure: the caller sends frames.
 */
import { encode, ProtocolError } from './codec.js';
import { FrameType, type Settings } from './constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit } from './flow.js';

interface Outgoing {
  data: Uint8Array;
  offset: number;
  binary: boolean;
}

export class MessageRelay {
  readonly sendCredit: SendCredit;
  readonly receiveWindow: ReceiveWindow;
  private readonly queue: Outgoing[] = [];
  private queuedBytes = 0;
  private fragments: Uint8Array[] = [];
  private fragmentBytes = 0;
  private fragmentBinary = false;

  constructor(
    private readonly streamId: number,
    private readonly settings: Settings,
    /** The most bytes waiting for credit before the sender gives up on the socket. */
    private readonly maxQueued: number,
    /** The largest message put back together. */
    private readonly maxMessage: number,
  ) {
    this.sendCredit = new SendCredit(settings.streamWindow);
    this.receiveWindow = new ReceiveWindow(settings.streamWindow);
  }

  get waiting(): number {
    return this.queuedBytes;
  }

  /**
   * Queues a message (owned by the relay from now on) and sends what credit allows through `send`.
   * Returns false when too much waits already: the caller closes the socket that feeds it.
   */
  push(data: Uint8Array, binary: boolean, connection: SendCredit, send: (frame: Buffer) => void): boolean {
    if (this.queuedBytes + data.byteLength > this.maxQueued && this.queue.length > 0) return false;
    this.queue.push({ data, offset: 0, binary });
    this.queuedBytes += data.byteLength;
    this.flush(connection, send);
    return true;
  }

  /** Sends queued fragments within credit; returns true when nothing waits any more. */
  flush(connection: SendCredit, send: (frame: Buffer) => void): boolean {
    const maxFrame = this.settings.maxFrameBody;
    while (this.queue.length > 0) {
      const message = this.queue[0]!;
      const left = message.data.byteLength - message.offset;
      const size = takeFrameCredit(left, maxFrame, this.sendCredit, connection);
      if (size === 0 && left > 0) return false;
      const fin = size === left;
      send(encode([FrameType.WS_MESSAGE, this.streamId, message.data.subarray(message.offset, message.offset + size), message.binary, fin]));
      message.offset += size;
      this.queuedBytes -= size;
      if (fin) this.queue.shift();
    }
    return true;
  }

  /**
   * An incoming fragment (a view; copied only when the message spans several fragments). Returns the
   * whole message when `fin` ends it, or null while it is incomplete.
   */
  receive(data: Uint8Array, binary: boolean, fin: boolean): { data: Uint8Array; binary: boolean } | null {
    if (this.fragments.length === 0 && fin) {
      if (data.byteLength > this.maxMessage) throw new ProtocolError(`a WebSocket message over ${this.maxMessage} bytes`);
      return { data, binary };
    }
    if (this.fragments.length === 0) this.fragmentBinary = binary;
    this.fragmentBytes += data.byteLength;
    if (this.fragmentBytes > this.maxMessage) throw new ProtocolError(`a WebSocket message over ${this.maxMessage} bytes`);
    this.fragments.push(Buffer.copyBytesFrom(data));
    if (!fin) return null;
    const whole = Buffer.concat(this.fragments, this.fragmentBytes);
    this.fragments = [];
    this.fragmentBytes = 0;
    return { data: whole, binary: this.fragmentBinary };
  }
}
