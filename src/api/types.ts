/**
 * What the API handlers take and give, and the interfaces through which they reach the live parts of
 * the edge (tunnels) and the capture log. The handlers are plain functions of these; the uWebSockets.js
 * adapter in src/edge turns sockets into ApiRequest and ApiResponse back into bytes.
 */
import type { Awaitable } from '../store/account-store.js';
import type { CaptureDetail, CaptureStore, CaptureSummary, SearchResult } from '../store/captures.js';

export interface ApiRequest {
  /** Upper-case method. */
  method: string;
  /** The raw path, without the query string. */
  path: string;
  /** The raw query string, without '?'. */
  query: string;
  /** Lower-case header names; only those the API reads are copied. */
  headers: {
    authorization: string;
    'content-type': string;
    /** What the dashboard's session needs (docs/dashboard.md); absent where the caller has no cookie. */
    cookie?: string;
    origin?: string;
    host?: string;
    'x-burrow-csrf'?: string;
  };
  body: Buffer | null;
  clientAddress: string;
  /** The scheme the client used (the edge's own, or a trusted proxy's X-Forwarded-Proto); the API's public scheme when absent. */
  scheme?: string;
  /**
   * False when the host the edge dispatched the request on is an API host without the dashboard
   * (`<domain>` beside `burrow edge --api-host`): there the session cookie is ignored and sign-in refused.
   */
  dashboardHost?: boolean;
}

export type HeaderPairs = [string, string][];

export interface ApiResponse {
  status: number;
  headers?: HeaderPairs;
  /** Serialised as JSON; absent for 204. */
  body?: unknown;
}

export interface TunnelInfo {
  /** The tunnel's name: its subdomain, or `tcp:PORT` for a TCP tunnel. */
  subdomain: string;
  accountId: string;
  tokenId: string;
  port: number;
  startedAt: number;
  publicUrl: string;
  /** 'http' when absent. */
  kind?: 'http' | 'tcp' | 'tls';
  /** Clients serving the name (`--pool`); 1 when absent. */
  poolMembers?: number;
}

export type TunnelCloseReason = 'closed-by-api' | 'token-revoked';

/** Edits applied to a captured request when it is replayed. */
export interface ReplayOverrides {
  method?: string;
  path?: string;
  /** A name mapped to null removes that header (JSON merge-patch style). */
  headers?: Record<string, string | null>;
  /** The body's bytes (sent in JSON as UTF-8 text, or as base64 with `"body_encoding": "base64"`). */
  body?: Uint8Array;
}

/** The live tunnels of the edge, as the API sees them (implemented by the edge's registry). */
export interface TunnelDirectory {
  listByAccount(accountId: string): Awaitable<TunnelInfo[]>;
  get(subdomain: string): Awaitable<TunnelInfo | undefined>;
  /** The account that holds the name now: a live tunnel or a dropped one inside its grace period. */
  holderOf(subdomain: string): Awaitable<string | undefined>;
  close(subdomain: string, reason: TunnelCloseReason): Awaitable<boolean>;
  closeByToken(tokenId: string): Awaitable<number>;
  /** Re-sends a captured request through the live tunnel; resolves with the new capture. */
  replay(capture: CaptureDetail, overrides: ReplayOverrides): Promise<CaptureDetail>;
}

/** The edge's delivery of held webhooks, as the API sees it (docs/offline.md). */
/**
 * Cluster mode: the webhooks held for a name in the cluster's Redis (src/edge/cluster/offline-stream.ts),
 * as `GET /api/v1/queue` lists them; the queue's other routes are not available there yet.
 */
export interface ClusterQueueView {
  /** The events held now for the name's reservation (its account and generation), oldest first, and the name's totals. */
  list(subdomain: string, accountId: string, generation: string): Promise<{ events: number; bytes: number; queue: Record<string, unknown>[] }>;
}

export interface QueueDriver {
  /** Events of `subdomain` were queued, redelivered or discarded, or its queue paused or resumed. */
  changed(subdomain: string): void;
}

export interface InstanceInfo {
  build: string;
  region: string;
  /**
   * The tunnel clients' endpoint (docs/api.md, an extension): its WebSocket URL for a request that came
   * with this Host header. Absent on an edge without an agent listener.
   */
  agentUrl?: (host: string) => string;
}

/** How the API pages through captures: `before` is a capture id (the cursor), absent for the newest. */
export interface CaptureQuery {
  limit: number;
  before?: string;
  retentionMs: number;
  now: number;
}

/**
 * The capture log as the API reads it. On a lone edge it is the edge's own CaptureStore (LocalCaptureLog,
 * src/api/capture-log.ts); in cluster mode the edge hands the API one that also asks the other edges
 * (src/edge/cluster/captures.ts). A `before` that names no capture of the subdomain is INVALID_REQUEST.
 */
export interface CaptureLog {
  /** Newest first; null when the account never had this subdomain (on any edge). */
  list(accountId: string, subdomain: string, query: CaptureQuery): Awaitable<CaptureSummary[] | null>;
  search(accountId: string, subdomain: string, text: string, query: CaptureQuery & { maxScanned: number; maxBodyBytes: number }): Awaitable<SearchResult | null>;
  get(accountId: string, id: string, retentionMs: number, now: number): Awaitable<CaptureDetail | null>;
}

export type { CaptureStore };
