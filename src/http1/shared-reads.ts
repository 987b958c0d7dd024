/**
 * Reads of many sockets into one buffer (`net.Socket`'s `onread`), instead of a fresh 64 KiB allocation
 * per read pushed through each socket's readable stream: each read is handled before the next lands, so
 * one buffer serves every socket of a listener or a process (bench/RESULTS.md, "Issue 24: the edge's
 * CPU floor"). A read is valid only during its callback: what is kept past it must be copied (`owned`),
 * and once the socket belongs to a new owner that reads it through 'data' events (after a switch of
 * protocols), each read reaches it as a copy.
 */
import type { Socket } from 'node:net';

/** The size of a shared read buffer. */
export const SHARED_READ_BYTES = 64 * 1024;

/** One socket's reads into a shared buffer, handed to `onData`; `callback` is its `onread.callback`. */
export class SharedReads {
  /** The socket read (set once it exists: a server's is made after its callback). */
  socket: Socket | null = null;
  /** The socket is a new owner's: reads go to its 'data' listeners, copied. */
  handedOver = false;
  /** Inside a read: bytes kept past it must be copied. */
  private reading = false;

  constructor(private readonly onData: (chunk: Buffer) => void) {}

  readonly callback = (bytes: number, buffer: Buffer): boolean => {
    const chunk = buffer.subarray(0, bytes);
    if (this.handedOver) return this.socket!.push(Buffer.from(chunk));
    this.reading = true;
    try {
      this.onData(chunk);
    } finally {
      this.reading = false;
    }
    return true;
  };

  /** `bytes` to keep past this read: a copy when they are in the shared buffer. */
  owned(bytes: Buffer): Buffer {
    return this.reading ? Buffer.from(bytes) : bytes;
  }
}
