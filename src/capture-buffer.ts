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

  /** The kept bytes as the chunks they were kept in (no copy), or null when none were kept. */
  chunksKept(): readonly Buffer[] | null {
    return this.kept === 0 ? null : this.chunks;
  }

  /** The kept bytes without joining them: one buffer when they are in one, else the chunks; null when none. */
  keptBody(): Buffer | readonly Buffer[] | null {
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
