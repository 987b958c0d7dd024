/**
 * Credit-based flow control, the arithmetic only (docs/protocol.md, "Flow control").
 *
 * Each direction of each stream, and each direction of the whole connection, has a window. A sender
 * holds `SendCredit` and never sends more body bytes than it has; a receiver holds a `ReceiveWindow`,
 * checks that the peer stayed within the credit it was given, and returns credit (a WINDOW frame) as it
 * writes the bytes out. Grants are batched: one WINDOW per quarter window consumed, not per chunk.
 */
import { MAX_WINDOW } from './constants.js';
import { ProtocolError } from './codec.js';

export class SendCredit {
  constructor(private credit: number) {}

  get available(): number {
    return this.credit;
  }

  /** Takes up to `wanted` bytes of credit and returns how many were taken. */
  take(wanted: number): number {
    if (!(wanted > 0)) return 0;
    const taken = wanted < this.credit ? wanted : this.credit;
    this.credit -= taken;
    return taken;
  }

  /** Adds credit from a WINDOW frame; a non-positive grant, or more than MAX_WINDOW held, is a protocol error. */
  grant(credit: number): void {
    if (!Number.isInteger(credit) || credit <= 0) throw new ProtocolError(`invalid WINDOW credit ${credit}: credit is a positive integer`);
    if (this.credit + credit > MAX_WINDOW) {
      throw new ProtocolError(`WINDOW credit ${credit} on top of ${this.credit} exceeds the maximum window of ${MAX_WINDOW} bytes`);
    }
    this.credit += credit;
  }
}

export class ReceiveWindow {
  /** Credit the peer still holds. */
  private outstanding: number;
  /** Bytes written out since the last grant. */
  private consumed = 0;
  private readonly threshold: number;

  constructor(readonly size: number) {
    this.outstanding = size;
    this.threshold = Math.max(1, size >>> 2);
  }

  /** Accounts for `bytes` received; false when the peer exceeded its credit (a flow-control error). */
  receive(bytes: number): boolean {
    if (bytes > this.outstanding) return false;
    this.outstanding -= bytes;
    return true;
  }

  /** Bytes received and not yet written out: what the receiver holds in memory for this window. */
  get held(): number {
    return this.size - this.outstanding - this.consumed;
  }

  /** Accounts for `bytes` written out; returns the credit to grant now (0 to wait for more). */
  consume(bytes: number): number {
    if (!(bytes > 0)) return 0;
    this.consumed += bytes;
    if (this.consumed < this.threshold) return 0;
    const grant = this.consumed;
    this.consumed = 0;
    this.outstanding += grant;
    return grant;
  }
}

/**
 * Takes the credit for a body's next frame: at most `wanted` bytes and `maxFrame`, within both the
 * stream's and the connection's credit. Returns the bytes taken; 0 means wait for a WINDOW.
 */
export function takeFrameCredit(wanted: number, maxFrame: number, stream: SendCredit, connection: SendCredit): number {
  let size = wanted < maxFrame ? wanted : maxFrame;
  if (size > stream.available) size = stream.available;
  if (size > connection.available) size = connection.available;
  stream.take(size);
  connection.take(size);
  return size;
}

/** Takes exactly `size` bytes of both credits (a whole body in one frame), or nothing. */
export function takeWholeCredit(size: number, maxFrame: number, stream: SendCredit, connection: SendCredit): boolean {
  if (size > maxFrame || size > stream.available || size > connection.available) return false;
  stream.take(size);
  connection.take(size);
  return true;
}
