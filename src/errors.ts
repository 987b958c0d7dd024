/**
 * The one error type of Burrow and its registry of stable codes.
 *
 * Every error the edge answers, on the API and on public tunnel traffic, is one of these codes with
 * its HTTP status, in the spec's body shape `{"error":{"code","message"}}`. docs/errors.md lists the
 * same table; a test keeps the two equal.
 */

export const ERROR_CODES = {
  // The spec's own codes (spec section 7).
  UNAUTHORIZED: { status: 401, message: 'Token missing, malformed or revoked.' },
  TOKEN_LIMIT_REACHED: { status: 403, message: 'Active-token cap of the plan reached. Revoke a token or upgrade.' },
  TUNNEL_LIMIT_REACHED: { status: 403, message: 'Active-tunnel cap reached. Close a tunnel or upgrade.' },
  SUBDOMAIN_TAKEN: { status: 409, message: 'Subdomain already owned by another account.' },
  NOT_FOUND: { status: 404, message: 'Resource does not exist on this account.' },
  RATE_LIMITED: { status: 429, message: 'Too many requests. Retry after the time in the Retry-After header.' },
  // Burrow's additions for what the spec leaves "not shown" (DESIGN.md section 4).
  INVALID_REQUEST: { status: 400, message: 'The request is not valid.' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed on this path.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'The request body must be JSON, sent with Content-Type: application/json.' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'The request body is larger than the limit.' },
  RESERVATION_LIMIT_REACHED: { status: 403, message: 'Reserved-subdomain cap of the plan reached. Release one or upgrade.' },
  TUNNEL_OFFLINE: { status: 409, message: 'The tunnel is not connected.' },
  // Cluster mode: a client on several edges (docs/cluster.md, "Clients on several edges").
  ALREADY_ATTACHED: { status: 409, message: 'This client already has a session for this tunnel on this edge; connect through another edge.' },
  REPLAY_TRUNCATED: { status: 409, message: 'The captured request body was cut at the capture limit; send "allow_truncated": true to replay the cut body.' },
  INTERNAL_ERROR: { status: 500, message: 'Internal error.' },
  // The dashboard's session (docs/dashboard.md).
  CSRF_REJECTED: { status: 403, message: 'A request with the dashboard session must come from the dashboard page itself.' },
  // The local inspector's own refusals (docs/inspector.md).
  FORBIDDEN: { status: 403, message: 'This request may not use the inspector.' },
  EDGE_UNREACHABLE: { status: 502, message: 'The edge is unreachable.' },
  // The public listener's HTTP parser (src/http1): requests it cannot take at all.
  HEADERS_TOO_LARGE: { status: 431, message: "The request head is over the edge's limits." },
  HTTP_VERSION_NOT_SUPPORTED: { status: 505, message: 'The edge speaks HTTP/1.0 and HTTP/1.1.' },
  // Public tunnel traffic: answered by the edge itself, marked with a `burrow-error` header.
  TUNNEL_NOT_FOUND: { status: 404, message: 'No tunnel is connected on this subdomain.' },
  TUNNEL_BUSY: { status: 503, message: 'The tunnel has too many requests in flight. Retry shortly.' },
  TUNNEL_UNAVAILABLE: { status: 503, message: 'The tunnel is offline. Retry after the time in the Retry-After header.' },
  STORE_UNAVAILABLE: { status: 503, message: 'The shared store of the cluster is unreachable. Retry after the time in the Retry-After header.' },
  QUEUE_FULL: { status: 503, message: 'The offline queue of this subdomain is full. Retry after the time in the Retry-After header.' },
  STORAGE_FULL: { status: 503, message: "The edge's disk is full or failing: nothing new can be stored. Retry after the time in the Retry-After header." },
  TUNNEL_CLOSED: { status: 502, message: 'The tunnel closed before the response was complete.' },
  LOCAL_UNREACHABLE: { status: 502, message: 'The tunnel client could not reach the local server.' },
  LOCAL_TIMEOUT: { status: 504, message: 'The local server did not answer in time.' },
  INVALID_RESPONSE: { status: 502, message: 'The tunnel client sent a response the edge cannot forward.' },
  // Tunnel policies (docs/policies.md): refusals of public traffic, also marked with `burrow-error`.
  AUTHENTICATION_REQUIRED: { status: 401, message: 'This tunnel requires a user name and password.' },
  ADDRESS_FORBIDDEN: { status: 403, message: 'Requests from this address are not allowed on this tunnel.' },
  SIGNATURE_INVALID: { status: 401, message: 'The webhook signature is missing or does not verify.' },
  SIGN_IN_REQUIRED: { status: 401, message: 'This tunnel requires signing in; open it in a browser.' },
  SIGN_IN_FORBIDDEN: { status: 403, message: 'The signed-in account is not allowed on this tunnel.' },
  SIGN_IN_FAILED: { status: 502, message: 'The sign-in with the identity provider failed.' },
  POLICY_UNAVAILABLE: { status: 503, message: "The tunnel's policy cannot be read on this edge." },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorBody {
  error: { code: ErrorCode; message: string };
}

export class BurrowError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers the error carries (Retry-After, Allow). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string = ERROR_CODES[code].message, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'BurrowError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.headers = headers;
  }

  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message } };
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** Serialised once per code: public-traffic errors are answered on the hot path. */
const defaultBodies = new Map<ErrorCode, string>();
export function defaultErrorJson(code: ErrorCode): string {
  let body = defaultBodies.get(code);
  if (body === undefined) {
    body = JSON.stringify({ error: { code, message: ERROR_CODES[code].message } });
    defaultBodies.set(code, body);
  }
  return body;
}
