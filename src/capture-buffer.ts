/**
 * Bytes kept of a body: one buffer, or the chunks they came in (views, not joined). The edge's capture
 * encoding copies the chunks straight into the stored record, and the client's inspector joins them only
 * when something reads the body: joining every multi-frame body cost a copy of up to 1 MiB each way.
 */
export type KeptBody<T extends Uint8Array = Uint8Array> = T | readonly T[];

/** The kept body's size in bytes, without joining it. */
export function bodyLength(body: KeptBody | null): number {
  if (body === null) return 0;
  if (body instanceof Uint8Array) return body.byteLength;
  let length = 0;
  for (const chunk of body) length += chunk.byteLength;
  return length;
}

/** The kept body in one buffer (chunks joined, a copy), or null. */
export function wholeBody(body: KeptBody<Buffer> | null): Buffer | null;
export function wholeBody(body: KeptBody | null): Uint8Array | null;
export function wholeBody(body: KeptBody | null): Uint8Array | null {
  if (body === null || body instanceof Uint8Array) return body;
  return body.length === 1 ? body[0]! : Buffer.concat(body);
}

/**
 * Keeps the first `limit` bytes of a body for its capture (the edge's capture log, the client's
 * inspector); the traffic itself is never cut.
 */
export class CaptureBuffer {
  private chunks: Buffer[] = [];
  private kept = 0;
  /** Every byte seen, kept or not. */
  size = 0;

  constructor(private readonly limit: number) {}

  /** A chunk that is a view of memory uWebSockets.js reuses once its callback returns: copied. */
  add(chunk: Uint8Array): void {
    this.keep(chunk, true);
  }

  /** A chunk the caller owns and will not change: kept as a view, no copy. */
  addOwned(chunk: Uint8Array): void {
    this.keep(chunk, false);
  }

  private keep(chunk: Uint8Array, copy: boolean): void {
    this.size += chunk.byteLength;
    const room = this.limit - this.kept;
    if (room <= 0 || chunk.byteLength === 0) return;
    const take = chunk.byteLength <= room ? chunk.byteLength : room;
    this.chunks.push(copy ? Buffer.copyBytesFrom(chunk, 0, take) : Buffer.from(chunk.buffer, chunk.byteOffset, take));
    this.kept += take;
  }

  get truncated(): boolean {
    return this.size > this.kept;
  }

  /** The kept bytes without joining them: one buffer when they are in one, else the chunks; null when none. */
  keptBody(): KeptBody<Buffer> | null {
    if (this.kept === 0) return null;
    return this.chunks.length === 1 ? this.chunks[0]! : this.chunks;
  }

  bytes(): Buffer | null {
    if (this.kept === 0) return null;
    if (this.chunks.length === 1) return this.chunks[0]!;
    const whole = Buffer.concat(this.chunks, this.kept);
    this.chunks = [whole];
    return whole;
  }
}
