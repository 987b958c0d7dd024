/**
 * The edge's Prometheus metrics (served by src/edge/admin.ts on `--admin`; docs/deploy.md, "Monitoring").
 *
 * The hot path pays only for plain integer fields and at most one histogram observation per histogram
 * per request: counters are fields incremented where traffic passes and read by prom-client's
 * `collect()` callbacks when /metrics is scraped; gauges (tunnels, streams) are computed at scrape time
 * from the registry. Without `--admin` no EdgeMetrics exists and the hooks skip it.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import type { SkippedCaptures } from '../store/captures.js';
import { WRITE_KINDS, type WriteKind } from '../store/write-failures.js';

/** Where the edge answered a request with one of its own error codes. */
export type RefusalSource = 'public' | 'api' | 'connect';
const SOURCES: readonly RefusalSource[] = ['public', 'api', 'connect'];

const CODES = Object.keys(ERROR_CODES) as ErrorCode[];
const CODE_INDEX = new Map<string, number>(CODES.map((code, index) => [code, index]));

/** Status classes 1xx..5xx by index 1..5; index 0 counts anything outside 100..599. */
const STATUS_CLASSES = ['other', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/** What the metrics read from the edge at scrape time. */
export interface EdgeGauges {
  tunnelsActive(): number;
  streamsOpen(): number;
  draining(): boolean;
  /** The disk and the capture quotas (issue 23); absent in tests of the metrics alone. */
  storage?: StorageGauges;
}

/** Read at scrape time: free space, the floor, capture quota use, skipped captures, failed writes. */
export interface StorageGauges {
  freeBytes(): number;
  minFreeBytes(): number;
  low(): boolean;
  quotaUse(): { storedBytes: number; accountsOver90Percent: number };
  /** The capture blocks file (big records): its size and its blocks free for reuse, in bytes. */
  blocksUse(): { fileBytes: number; freeBytes: number };
  skipped(): SkippedCaptures;
  writeFailures(kind: WriteKind): number;
}

const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const COMMIT_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25];

export class EdgeMetrics {
  readonly registry = new Registry();

  // Plain counters, incremented on the path.
  readonly requestsByClass = [0, 0, 0, 0, 0, 0];
  bytesIn = 0;
  bytesOut = 0;
  tunnelConnects = 0;
  tunnelDisconnects = 0;
  capturesCommitted = 0;
  accessLogDropped = 0;
  /** Per source, per error code (CODES order). */
  private readonly refusals: number[][] = SOURCES.map(() => CODES.map(() => 0));

  private readonly requestDuration: Histogram;
  private readonly hopDuration: Histogram;
  private readonly commitDuration: Histogram;

  constructor(gauges: EdgeGauges) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const metrics = this;

    new Gauge({
      name: 'burrow_tunnels_active',
      help: 'Tunnels connected to this edge.',
      registers,
      collect() {
        this.set(gauges.tunnelsActive());
      },
    });
    new Gauge({
      name: 'burrow_streams_open',
      help: 'Streams (HTTP exchanges and WebSocket passthroughs) open on all tunnels.',
      registers,
      collect() {
        this.set(gauges.streamsOpen());
      },
    });
    new Gauge({
      name: 'burrow_draining',
      help: '1 while the edge drains before it stops (GET /healthz answers 503), else 0.',
      registers,
      collect() {
        this.set(gauges.draining() ? 1 : 0);
      },
    });
    counter('burrow_tunnel_connects_total', 'Tunnel clients that connected.', () => metrics.tunnelConnects);
    counter('burrow_tunnel_disconnects_total', 'Tunnel connections that ended, for any reason.', () => metrics.tunnelDisconnects);
    new Counter({
      name: 'burrow_public_requests_total',
      help: 'Public HTTP requests on tunnel subdomains, by the status class answered (an abandoned request counts as 499).',
      labelNames: ['status_class'],
      registers,
      collect() {
        this.reset();
        for (let index = 0; index < STATUS_CLASSES.length; index++) this.inc({ status_class: STATUS_CLASSES[index]! }, metrics.requestsByClass[index]!);
      },
    });
    counter('burrow_public_received_bytes_total', 'Request body bytes received from public clients.', () => metrics.bytesIn);
    counter('burrow_public_sent_bytes_total', 'Response body bytes from local servers to public clients.', () => metrics.bytesOut);
    new Counter({
      name: 'burrow_rejected_requests_total',
      help: 'Requests the edge answered with one of its own error codes, by code and by where (public traffic, the API, tunnel connects).',
      labelNames: ['reason', 'source'],
      registers,
      collect() {
        this.reset();
        for (let source = 0; source < SOURCES.length; source++) {
          const counts = metrics.refusals[source]!;
          for (let code = 0; code < CODES.length; code++) {
            if (counts[code]! > 0) this.inc({ reason: CODES[code]!, source: SOURCES[source]! }, counts[code]!);
          }
        }
      },
    });
    counter('burrow_captures_committed_total', 'Captured exchanges written to LMDB.', () => metrics.capturesCommitted);
    const storage = gauges.storage;
    if (storage !== undefined) {
      this.gauge('burrow_disk_free_bytes', "Free bytes on the data directory's file system (statfs, for unprivileged writers) at the last reading, less what captures wrote since.", () => Math.max(0, storage.freeBytes()));
      this.gauge('burrow_disk_min_free_bytes', 'The free-space floor (--min-free-disk) in bytes: below it captures are skipped and held webhooks refused.', () => storage.minFreeBytes());
      this.gauge('burrow_disk_low', '1 while free space is below the floor (captures skipped, held webhooks refused with 503 STORAGE_FULL), else 0.', () => (storage.low() ? 1 : 0));
      this.gauge('burrow_capture_stored_bytes', "Bytes of captures stored on this edge, all accounts (what the accounts' capture quotas count).", () => storage.quotaUse().storedBytes);
      this.gauge(
        'burrow_capture_quota_accounts_over_90_percent',
        'Accounts that wrote captures since the edge started and hold 90% of their capture quota or more.',
        () => storage.quotaUse().accountsOver90Percent,
      );
      this.gauge(
        'burrow_capture_blocks_bytes',
        'Bytes of the capture blocks file (captured exchanges of 32 KiB or more, in 64 KiB blocks): it keeps the largest size it reached until a restart cuts its free end off.',
        () => storage.blocksUse().fileBytes,
      );
      this.gauge('burrow_capture_blocks_free_bytes', 'Bytes of the capture blocks file free for new captures (their captures overwritten or expired).', () => storage.blocksUse().freeBytes);
      new Counter({
        name: 'burrow_captures_skipped_total',
        help: 'Exchanges forwarded but not captured: over the account\'s capture quota (quota), below the free-space floor (disk), or the commit failed (error).',
        labelNames: ['reason'],
        registers,
        collect() {
          this.reset();
          const skipped = storage.skipped();
          for (const reason of ['quota', 'disk', 'error'] as const) this.inc({ reason }, skipped[reason]);
        },
      });
      new Counter({
        name: 'burrow_store_write_failures_total',
        help: 'LMDB writes that failed to commit (a full or failing disk), by what was written.',
        labelNames: ['store'],
        registers,
        collect() {
          this.reset();
          for (const kind of WRITE_KINDS) this.inc({ store: kind }, storage.writeFailures(kind));
        },
      });
    }
    counter('burrow_access_log_dropped_lines_total', 'Access log lines dropped because the log could not keep up.', () => metrics.accessLogDropped);
    this.requestDuration = new Histogram({
      name: 'burrow_public_request_duration_seconds',
      help: 'Public HTTP requests through a tunnel: from the request reaching the edge to the end of the response from the tunnel.',
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.hopDuration = new Histogram({
      name: 'burrow_tunnel_hop_duration_seconds',
      help: 'From the OPEN frame sent to the tunnel client to its RESPONSE frame received: the client, the local server and the way back.',
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.commitDuration = new Histogram({
      name: 'burrow_capture_commit_duration_seconds',
      help: 'Capture commits (one LMDB transaction for the captures journaled in up to 5 ms; per event-loop turn with --capture-fsync): how long each took; its _count is the number of commits.',
      buckets: COMMIT_BUCKETS,
      registers,
    });

    function counter(name: string, help: string, read: () => number): void {
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    }
  }

  /** A gauge read at scrape time, for parts of the edge that keep their own figures (the offline queue). */
  gauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** A public request ended (answered through the tunnel, by the edge, or abandoned). */
  request(status: number, bytesIn: number, bytesOut: number): void {
    const statusClass = (status / 100) | 0;
    this.requestsByClass[statusClass >= 1 && statusClass <= 5 ? statusClass : 0]!++;
    this.bytesIn += bytesIn;
    this.bytesOut += bytesOut;
  }

  /** Durations in milliseconds (performance.now() differences); a negative hop means "not known". */
  timings(requestMs: number, hopMs: number): void {
    this.requestDuration.observe(requestMs / 1000);
    if (hopMs >= 0) this.hopDuration.observe(hopMs / 1000);
  }

  refused(source: RefusalSource, code: string): void {
    const index = CODE_INDEX.get(code);
    if (index !== undefined) this.refusals[SOURCES.indexOf(source)]![index]!++;
  }

  commit(captures: number, durationMs: number): void {
    this.capturesCommitted += captures;
    this.commitDuration.observe(durationMs / 1000);
  }

  /** The text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
