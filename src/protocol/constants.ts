/**
 * Wire constants of the tunnel protocol, version 2 (docs/protocol.md). A test pins every value: they
 * are a contract with clients that may be written in other languages, so a number here never changes
 * meaning. New frame types or codes get new numbers; retired numbers are never used again.
 */

export const PROTOCOL_VERSION = 2;
/** The header that carries the protocol version on the upgrade request and the 101 response. */
export const PROTOCOL_HEADER = 'burrow-protocol';
/** The path of the tunnel endpoint on the edge's agent listener. */
export const CONNECT_PATH = '/api/v1/connect';
/**
 * The connect's `instance` parameter: one id per client process, the same on each reconnect, so the edge
 * tells the client's own reconnect (which replaces its old session) from another client asking for a
 * name that is online (refused unless `replace=1`). docs/protocol.md section 1.
 */
export const INSTANCE_ID = /^[A-Za-z0-9_-]{8,64}$/;

/** Frame types: the first element of every frame array. */
export const FrameType = {
  /** edge → client: the tunnel is live. [1, 0, subdomain, publicUrl, settings] */
  READY: 1,
  /** edge → client: a new public request on one tunnel. [2, stream, requestId, method, target, headers, clientAddress, body, end, upgrade, tunnel] */
  OPEN: 2,
  /** both: a body chunk, or after a 101 the switched protocol's bytes. [3, stream, chunk, end] */
  DATA: 3,
  /** client → edge: the final response head. [4, stream, status, reason, headers, body, end] */
  RESPONSE: 4,
  /** both: flow-control credit in bytes; stream 0 is the connection. [5, stream, credit] */
  WINDOW: 5,
  /** both: abort one stream. [6, stream, code, message] */
  RESET: 6,
  /** both: the sender is closing the tunnel. [7, 0, code, message] */
  GOAWAY: 7,
  /** client → edge: an interim (1xx) response before the final one. [12, stream, status, reason, headers] */
  INFO: 12,
  /** both: trailer fields; they end the sender's body on that stream. [13, stream, headers] */
  TRAILERS: 13,
  /** client → edge: one more tunnel on this connection. [14, 0, tunnel, kind, name, remotePort, localPort, policy, replace, pool, drop?] */
  BIND: 14,
  /** edge → client: the answer to BIND, the tunnel live or refused. [15, 0, tunnel, error, message, name, publicUrl, attachment?] */
  BOUND: 15,
  /** edge → client: one tunnel of the connection ended, the others go on. [16, 0, tunnel, code, message] */
  UNBOUND: 16,
  /** edge → client: a public TCP connection (a tcp or tls tunnel's) for raw DATA both ways. [17, stream, tunnel, requestId, clientAddress, clientPort, serverAddress, serverPort] */
  ACCEPT: 17,
  /**
   * edge → client: something the client should tell its user; informational, never final, nothing to
   * answer; once per connection, whatever tunnels it carries. [18, 0, code, message] (NoticeCode)
   */
  NOTICE: 18,
} as const;
export type FrameTypeValue = (typeof FrameType)[keyof typeof FrameType];
export const MAX_FRAME_TYPE = 18;

/**
 * The kinds of tunnel a connection carries (docs/protocol.md section 18): `http` (requests as OPEN),
 * `tcp` (a public port of the edge's `--tcp-ports`, each connection an ACCEPT) and `tls` (TLS connections
 * to `<name>.<domain>` on the edge's HTTPS port, routed by SNI without terminating them, each an ACCEPT).
 */
export const TunnelKind = {
  HTTP: 'http',
  TCP: 'tcp',
  TLS: 'tls',
} as const;
export type TunnelKindValue = (typeof TunnelKind)[keyof typeof TunnelKind];
export const TUNNEL_KINDS: readonly TunnelKindValue[] = Object.freeze(Object.values(TunnelKind));
/** The tunnel the connect's own query parameters describe (`port`, `subdomain`); BIND numbers the others from 1. */
export const CONNECT_TUNNEL = 0;
/** Tunnel ids are 0 to this on each connection. */
export const MAX_TUNNEL_ID = 0xffff;

/**
 * Frame types of protocol 1 that protocol 2 retired (WebSockets now pass as an upgraded stream's raw
 * bytes): never used again, and a protocol error if received.
 */
export const RETIRED_FRAME_TYPES: Readonly<Record<number, string>> = Object.freeze({
  8: 'WS_OPEN',
  9: 'WS_RESPONSE',
  10: 'WS_MESSAGE',
  11: 'WS_CLOSE',
});

/** RESET codes: why one stream ended early. */
export const ResetCode = {
  /** The public client went away, or the edge gave up (timeout); stop work on the stream. */
  CANCEL: 1,
  /** The client could not connect to the local port. */
  LOCAL_UNREACHABLE: 2,
  /** The local server failed or closed the connection mid-exchange. */
  LOCAL_ERROR: 3,
  /** A frame on this stream broke the protocol. */
  PROTOCOL_ERROR: 4,
  /** The peer sent more body bytes than its credit. */
  FLOW_CONTROL_ERROR: 5,
  /** The receiver will not take the stream (too many streams, shutting down). */
  REFUSED: 6,
} as const;
export type ResetCodeValue = (typeof ResetCode)[keyof typeof ResetCode];

/** GOAWAY codes: why the whole tunnel is closing. The WebSocket close code is 4000 + this code. */
export const GoAwayCode = {
  /** The edge is shutting down: reconnect. */
  SHUTDOWN: 1,
  /** Closed through DELETE /api/v1/tunnels/:subdomain: do not reconnect. */
  CLOSED_BY_API: 2,
  /** The token that opened the tunnel was revoked: do not reconnect. */
  TOKEN_REVOKED: 3,
  /** Another connection of the same account took over the subdomain: do not reconnect. */
  REPLACED: 4,
  /** The peer broke the protocol. */
  PROTOCOL_ERROR: 5,
  /** The client is closing (Ctrl-C). */
  CLIENT_CLOSING: 6,
  /** The peer stopped answering pings. */
  TIMEOUT: 7,
  /**
   * A cluster edge lost its shared store (Redis) while the other edges still reach it, and its lease on
   * the tunnel lapsed: reconnect at once, through another edge.
   */
  STORE_UNREACHABLE: 8,
} as const;
export type GoAwayCodeValue = (typeof GoAwayCode)[keyof typeof GoAwayCode];
export const CLOSE_CODE_BASE = 4000;

/**
 * NOTICE codes: what the edge tells the client about itself. Informational: the tunnel stays as it is,
 * and a client that knows no code shows the message or ignores it.
 */
export const NoticeCode = {
  /**
   * A cluster edge cannot reach the cluster's shared store (Redis): the tunnel stays served while its
   * lease holds (docs/cluster.md, "Redis down"); new connects and API calls get 503 meanwhile.
   */
  STORE_UNAVAILABLE: 1,
  /** The edge reaches its store (again). */
  STORE_AVAILABLE: 2,
} as const;
export type NoticeCodeValue = (typeof NoticeCode)[keyof typeof NoticeCode];

/** Codes after which a client must not reconnect on its own. */
export const FINAL_GOAWAY_CODES: ReadonlySet<number> = new Set([
  GoAwayCode.CLOSED_BY_API,
  GoAwayCode.TOKEN_REVOKED,
  GoAwayCode.REPLACED,
  GoAwayCode.CLIENT_CLOSING,
]);

/** Settings the edge announces in READY; the client obeys them. */
export interface Settings {
  /** Largest body chunk in one OPEN, DATA or RESPONSE frame. */
  maxFrameBody: number;
  /** Initial credit of each stream, in each direction. */
  streamWindow: number;
  /** Initial credit of the connection, in each direction. */
  connectionWindow: number;
  /** Most streams open at once; the edge refuses further public requests (503 TUNNEL_BUSY). */
  maxStreams: number;
  /** Largest WebSocket message a peer may send (a full body chunk plus the rest of its frame). */
  maxMessage: number;
  /**
   * Most tunnels on the connection, the connect's own included. An edge that sends it takes BIND (section
   * 18); from an edge without it a client binds nothing.
   */
  maxTunnels?: number;
  /**
   * Cluster mode only (docs/cluster.md): how many edges of the cluster were alive when this tunnel
   * connected. A client that sees it may attach the same tunnel to several edges.
   */
  clusterEdges?: number;
  /**
   * Cluster mode only: this session's attachment to the tunnel's lease (a fence, unique in the
   * cluster). A reconnect names it in `drop` so the edge that had it lets go at once.
   */
  attachment?: number;
}

export const DEFAULT_SETTINGS: Readonly<Settings> = Object.freeze({
  maxFrameBody: 64 * 1024,
  streamWindow: 1024 * 1024,
  connectionWindow: 16 * 1024 * 1024,
  maxStreams: 1024,
  maxMessage: 64 * 1024 + 64 * 1024,
  maxTunnels: 64,
});

/** Credit may never exceed this (2^31 - 1), as in HTTP/2. */
export const MAX_WINDOW = 0x7fffffff;
