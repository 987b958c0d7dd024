/**
 * A captured request sent again through the live tunnel (POST /api/v1/requests/:id/replay): the same
 * stream machinery as public traffic, with memory as the response sink. The replay is captured as a new
 * exchange, which the promise resolves with, once committed.
 */
import type { ErrorCode } from '../errors.js';
import type { ReplayOverrides } from '../api/types.js';
import { expandCapture, type CaptureRecord } from '../store/captures.js';
import { EdgeHttpStream, type RequestHead } from './http-stream.js';
import type { StreamHost } from './stream-host.js';

/** Headers recomputed for the replayed body, whatever the original said (names of any case). */
const RECOMPUTED = new Set(['content-length', 'transfer-encoding']);

export function replayHead(capture: CaptureRecord, overrides: ReplayOverrides): { head: RequestHead; body: Buffer | null } {
  const body =
    overrides.body !== undefined
      ? Buffer.from(overrides.body)
      : capture.requestBody === null
        ? null
        : Buffer.from(capture.requestBody);
  const replaced = overrides.headers ?? {};
  const headers: string[] = [];
  const original = capture.requestHeaders;
  const replacedNames = new Set(Object.keys(replaced).map((name) => name.toLowerCase()));
  for (let i = 0; i < original.length; i += 2) {
    const name = original[i]!;
    const lower = name.toLowerCase();
    if (RECOMPUTED.has(lower) || replacedNames.has(lower)) continue;
    headers.push(name, original[i + 1]!);
  }
  for (const [name, value] of Object.entries(replaced)) {
    if (value !== null && !RECOMPUTED.has(name.toLowerCase())) headers.push(name, value);
  }
  if (body !== null && body.byteLength > 0) headers.push('content-length', String(body.byteLength));
  return {
    head: {
      method: overrides.method ?? capture.method,
      target: overrides.path ?? capture.path,
      headers,
      clientAddress: capture.clientAddress,
      upgrade: false,
    },
    body,
  };
}

export class ReplayHttpStream extends EdgeHttpStream {
  private readonly body: Buffer | null;
  private settle: ((capture: CaptureRecord) => void) | null = null;

  constructor(id: number, session: StreamHost, capture: CaptureRecord, overrides: ReplayOverrides) {
    const { head, body } = replayHead(capture, overrides);
    super(id, session, head, capture.id);
    this.body = body;
  }

  start(): Promise<CaptureRecord> {
    const done = new Promise<CaptureRecord>((resolve) => {
      this.settle = resolve;
    });
    this.sendOpen(this.body, true);
    return done;
  }

  protected pauseRequest(): void {
    this.requestPaused = true;
  }

  protected resumeRequest(): void {
    this.requestPaused = false;
  }

  protected startResponse(): void {}

  protected interim(): void {}

  // A replay never asks to upgrade, so it is never switched.
  protected switchProtocols(): void {}

  protected writeRaw(): void {}

  protected cutRaw(): void {}

  protected writeBody(chunk: Uint8Array): void {
    // Kept only as far as the capture keeps it; credit returns at once.
    this.consumed(chunk.byteLength);
  }

  protected endResponse(lastChunk: Uint8Array | null): void {
    if (lastChunk !== null) this.consumed(lastChunk.byteLength);
    this.resolve();
  }

  protected failResponse(_code: ErrorCode, _message: string): void {
    this.resolve();
  }

  private resolve(): void {
    this.releaseConnectionCredit();
    const settle = this.settle;
    this.settle = null;
    settle?.(expandCapture(this.storedCapture()));
  }
}
