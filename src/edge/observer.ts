/**
 * What the edge tells operators: the tunnel connect/disconnect lines of its log (always), the metrics
 * (`--admin`) and the access log (`--access-log`). The request path calls it through a few hooks
 * (server.ts, session.ts, http-stream.ts, turn.ts); with neither metrics nor access log, `watching` is
 * false and per-request hooks return at once.
 */
import { CLOSE_CODE_BASE } from '../protocol/constants.js';
import type { AccessLog } from './access-log.js';
import type { EdgeHttpStream } from './http-stream.js';
import type { EdgeMetrics, RefusalSource } from './metrics.js';
import type { EdgeRawStream } from './raw-stream.js';
import type { TunnelSession } from './session.js';

const NORMAL_CLOSURE = 1000;
const GOING_AWAY = 1001;
const ABNORMAL = 1006;

export class EdgeObserver {
  /** Whether anything reads per-request data (metrics or the access log). */
  readonly watching: boolean;

  constructor(
    readonly metrics: EdgeMetrics | null,
    readonly accessLog: AccessLog | null,
    private readonly log: (line: string) => void,
  ) {
    this.watching = metrics !== null || accessLog !== null;
  }

  // ---- tunnels ------------------------------------------------------------------------------------------

  tunnelConnected(session: TunnelSession): void {
    if (this.metrics !== null) this.metrics.tunnelConnects++;
    this.log(`tunnel ${session.subdomain} connected (account ${session.accountId}, token ${session.tokenId}, port ${session.port})`);
  }

  /** `code` and `message`: the WebSocket close as uWS reports it (ours when the edge ended it). */
  tunnelDisconnected(session: TunnelSession, code: number, message: string): void {
    if (this.metrics !== null) this.metrics.tunnelDisconnects++;
    this.log(`tunnel ${session.subdomain} disconnected: ${disconnectReason(code, message)} (${code})`);
  }

  // ---- public requests --------------------------------------------------------------------------------

  /**
   * A public exchange through a tunnel ended: answered, failed by the edge, or abandoned by the client;
   * an upgraded one (status 101) when both its directions ended or it was cut, with the bytes that
   * passed each way after the 101 (`raw`). Counted with the requests either way.
   */
  exchangeEnded(stream: EdgeHttpStream, raw: { bytesIn: number; bytesOut: number } | null = null): void {
    const now = performance.now();
    // An upgraded connection counts the bytes that passed after its 101 (the request and 101 have none).
    const bytesIn = raw === null ? stream.requestCapture.size : raw.bytesIn;
    const bytesOut = raw === null ? stream.responseCapture.size : raw.bytesOut;
    const durationMs = now - stream.startedAt;
    const metrics = this.metrics;
    if (metrics !== null) {
      metrics.request(stream.status, bytesIn, bytesOut);
      const error = stream.error;
      if (error !== null && error !== 'CLIENT_CLOSED') metrics.refused('public', error);
      metrics.timings(durationMs, stream.openedAt > 0 && stream.respondedAt > 0 ? stream.respondedAt - stream.openedAt : -1);
    }
    this.accessLog?.write({
      receivedAt: stream.receivedAt,
      subdomain: stream.session.subdomain,
      method: stream.head.method,
      path: stream.head.target,
      status: stream.status,
      bytesIn,
      bytesOut,
      durationMs,
      clientAddress: stream.head.clientAddress,
      requestId: stream.requestId,
      error: stream.error,
    });
  }

  /** A public TCP connection (a tcp tunnel's, or a TLS one passed through) ended: one access-log line. */
  connectionEnded(stream: EdgeRawStream): void {
    const record = stream.storedCapture();
    const metrics = this.metrics;
    if (metrics !== null) {
      metrics.request(0, record.requestBodySize, record.responseBodySize);
      if (record.error !== null && record.error !== 'CLIENT_CLOSED') metrics.refused('public', record.error);
    }
    this.accessLog?.write({
      receivedAt: record.receivedAt,
      subdomain: record.subdomain,
      method: record.method,
      path: record.path,
      status: 0,
      bytesIn: record.requestBodySize,
      bytesOut: record.responseBodySize,
      durationMs: record.durationMs,
      clientAddress: record.clientAddress,
      requestId: record.id,
      error: record.error,
    });
  }

  /** The edge refused a public request before it reached a tunnel (no tunnel, busy, too large). */
  publicRefused(code: string, status: number, subdomain: string, method: string, path: string, clientAddress: string): void {
    if (this.metrics !== null) {
      this.metrics.request(status, 0, 0);
      this.metrics.refused('public', code);
    }
    this.accessLog?.write({
      receivedAt: Date.now(),
      subdomain,
      method,
      path,
      status,
      bytesIn: 0,
      bytesOut: 0,
      durationMs: 0,
      clientAddress,
      requestId: null,
      error: code,
    });
  }

  /** An API request or a tunnel connect answered with an error code. */
  refused(source: RefusalSource, code: string): void {
    this.metrics?.refused(source, code);
  }

  /** For the capture turn: how long each commit took (null when nobody reads it). */
  get commitObserver(): ((captures: number, durationMs: number) => void) | null {
    const metrics = this.metrics;
    return metrics === null ? null : (captures, durationMs) => metrics.commit(captures, durationMs);
  }

  close(): Promise<void> {
    return this.accessLog?.close() ?? Promise.resolve();
  }
}

function disconnectReason(code: number, message: string): string {
  if (message !== '') return code >= CLOSE_CODE_BASE ? message : `client closed: ${message}`;
  if (code === NORMAL_CLOSURE || code === GOING_AWAY) return 'client closed';
  if (code === ABNORMAL) return 'connection lost (no close frame; network drop, process killed or ping timeout)';
  return 'closed';
}
