/**
 * The internal endpoints one edge calls on another (docs/cluster.md, "The internal hop"): under
 * INTERNAL_PREFIX, on any host that is not a tunnel's, and only with the cluster secret. Without it,
 * the request goes on as an ordinary one (and finds no such API path), so nothing here can be probed
 * from outside.
 */
import { BurrowError } from '../../errors.js';
import { errorResponse } from '../../api/api.js';
import type { ApiResponse } from '../../api/types.js';
import { fieldValue } from '../../http1/head.js';
import type { ServerExchange } from '../../http1/server.js';
import { gatherBody, requestFraming } from '../request-framing.js';
import { writeOwn } from '../responses.js';
import type { ReleaseCall } from './peer-link.js';
import { INTERNAL_PREFIX, RELEASE_PATH, SECRET_HEADER, STORE_STATUS_PATH, type ClusterSecret } from './secret.js';
import type { ClusterDirectory, LocalTunnels } from './types.js';

/** Internal calls carry small JSON bodies (a capture for a replay is the largest). */
const INTERNAL_BODY_LIMIT = 16 * 1024 * 1024;

export interface InternalRequest {
  method: string;
  path: string;
  query: string;
  /** JSON (release) or msgpack (captures, replay); the calls carry everything in it. */
  body: Buffer | null;
}

/** An internal route: answers from this edge's own state only (it never calls another edge). */
export type InternalRoute = (request: InternalRequest) => Promise<ApiResponse> | ApiResponse;

export class InternalEndpoints {
  private readonly routes = new Map<string, InternalRoute>();

  constructor(
    private readonly secret: ClusterSecret,
    private readonly directory: ClusterDirectory,
    private readonly local: LocalTunnels | null,
    private readonly log: (line: string) => void,
  ) {
    this.routes.set(`POST ${RELEASE_PATH}`, (request) => this.release(request));
    // An edge that lost the store asks whether the others still reach it (src/edge/cluster/registry.ts).
    this.routes.set(`GET ${STORE_STATUS_PATH}`, () => ({ status: 200, body: { available: this.local?.storeAvailable?.() ?? false } }));
  }

  /** Adds a route under INTERNAL_PREFIX (the capture fan-out's, src/edge/cluster/captures.ts). */
  route(method: string, path: string, handler: InternalRoute): void {
    if (!path.startsWith(INTERNAL_PREFIX)) throw new Error(`internal routes live under ${INTERNAL_PREFIX}`);
    this.routes.set(`${method} ${path}`, handler);
  }

  /**
   * Serves the request when it is an internal call with the right secret (then true); otherwise false
   * and the exchange is untouched. `path` and `query` are the target's two parts.
   */
  serves(exchange: ServerExchange, path: string, query: string): boolean {
    if (!path.startsWith(INTERNAL_PREFIX)) return false;
    const fields = exchange.head.fields;
    if (!this.secret.matches(fieldValue(fields, SECRET_HEADER) ?? '')) return false;
    const method = exchange.head.method;
    const handler = this.routes.get(`${method} ${path}`);
    const request: InternalRequest = { method, path, query, body: null };
    const answer = (response: ApiResponse): void => {
      if (!exchange.dead) writeInternal(exchange, response);
    };
    gatherBody(
      exchange,
      requestFraming(fields),
      INTERNAL_BODY_LIMIT,
      () => writeInternal(exchange, errorResponse(new BurrowError('PAYLOAD_TOO_LARGE')), true),
      (body) => {
        if (handler === undefined) {
          answer(errorResponse(new BurrowError('NOT_FOUND', `No internal endpoint ${method} ${path}.`)));
          return;
        }
        request.body = body;
        Promise.resolve()
          .then(() => handler(request))
          .then(answer, (error: unknown) => {
            if (!(error instanceof BurrowError)) this.log(`cluster ${path}: ${(error as Error).stack ?? error}`);
            answer(errorResponse(error instanceof BurrowError ? error : new BurrowError('INTERNAL_ERROR')));
          });
      },
    );
    return true;
  }

  /** Another edge takes a tunnel over (the same account reconnected there): end ours if it is that grant. */
  private release(request: InternalRequest): ApiResponse {
    const call = parseJson(request.body) as Partial<ReleaseCall>;
    if (typeof call.subdomain !== 'string' || typeof call.fence !== 'number') {
      throw new BurrowError('INVALID_REQUEST', 'A release names a subdomain and a fence.');
    }
    // A call meant for an earlier process of this edge: that process, and its tunnels, are gone.
    if (typeof call.boot === 'string' && call.boot !== this.directory.self.boot) return { status: 200, body: { outcome: 'not-held' } };
    const instance = typeof call.instance === 'string' ? call.instance : undefined;
    const outcome = this.local === null ? 'not-held' : this.local.release(call.subdomain, call.fence, instance);
    return { status: 200, body: { outcome } };
  }
}

export function parseJson(body: Buffer | null): unknown {
  try {
    const value: unknown = JSON.parse(body === null ? '' : body.toString('utf8'));
    if (typeof value === 'object' && value !== null) return value;
  } catch {
    // answered below
  }
  throw new BurrowError('INVALID_REQUEST', 'The body must be a JSON object.');
}

function writeInternal(exchange: ServerExchange, response: ApiResponse, closeConnection = false): void {
  const fields: string[] = [];
  for (const [name, value] of response.headers ?? []) fields.push(name, value);
  fields.push('cache-control', 'no-store');
  // Captures travel as msgpack (bodies as bytes); everything else is JSON.
  if (Buffer.isBuffer(response.body)) {
    writeOwn(exchange, response.status, fields, response.body, closeConnection);
    return;
  }
  fields.push('content-type', 'application/json; charset=utf-8');
  writeOwn(exchange, response.status, fields, response.body === undefined ? '' : JSON.stringify(response.body), closeConnection);
}
