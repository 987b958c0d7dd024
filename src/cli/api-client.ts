/**
 * The CLI's side of the API: a thin JSON client on undici. An API error becomes a CliError whose message
 * carries the spec's code, so `burrow tokens create` prints e.g. "TOKEN_LIMIT_REACHED: ...".
 *
 * Every command that sends the token to the edge gets its client from `edgeApiClient`, which applies the
 * client's trust rules once (issue 14): no token in clear text to an edge off this machine without
 * --insecure, decided before any connection; the CA of --ca / BURROW_CA / the config file trusted beside
 * the public roots; a failed TLS handshake reported in one line naming its cause.
 *
 * Given several edges (repeated --edge, failover order), a call that cannot reach one tries the next: on
 * any transport failure for GET, and for other methods only when the request cannot have been sent
 * (refused, unresolved, no route, connect timeout, TLS), so a POST is never sent twice. An HTTP answer,
 * error or not, is the answer.
 */
import { request, type Dispatcher } from 'undici';
import { cleartextRefusal, describeTlsError } from '../client/edge-trust.js';
import { describeLookupFailure } from '../client/resolve-rules.js';
import { CliError } from './args.js';
import { requireToken, resolveCredentials, type CaSource, type Credentials } from './config.js';
import { edgeDispatcher, readCaFile } from './edge-ca.js';

/** The flags of every command that talks to the edge's API (see CONNECTION_HELP). */
export const CONNECTION_OPTIONS = {
  edge: { type: 'string', multiple: true },
  token: { type: 'string' },
  ca: { type: 'string' },
  resolve: { type: 'string', multiple: true },
  insecure: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

/** Their help lines, for the Options section of each command's --help. */
export const CONNECTION_HELP = `  --edge URL       the edge (default: BURROW_EDGE, the config file, http://localhost:8080);
                   repeat it (or give BURROW_EDGE a comma-separated list) to try the next edge
                   when one cannot be reached
  --token T        the token (default: BURROW_TOKEN, the config file)
  --ca FILE        trust this CA (PEM) for an https:// edge with a private certificate, beside
                   the public roots (default: BURROW_CA, the CA "burrow login --ca" saved)
  --resolve HOST:PORT:ADDRESS
                   connect to ADDRESS for the edge URL's HOST and PORT, without DNS; the
                   certificate is still checked for HOST (like curl --resolve; repeatable;
                   default: BURROW_RESOLVE, comma-separated)
  --insecure       allow sending the token over plain http:// to an edge not on this machine
  --json           print the API's JSON
  -h, --help       show this help`;

export interface ConnectionFlags {
  edge?: string | string[] | undefined;
  token?: string | undefined;
  ca?: string | undefined;
  resolve?: string[] | undefined;
  insecure?: boolean | undefined;
}

/**
 * The API client for the edge, token and CA that the flags, then the environment, then the config file
 * name. Throws, before any connection, when the token would cross the network in clear text without
 * --insecure, when there is no token, or when the CA file is missing or not a certificate.
 */
export function edgeApiClient(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): ApiClient {
  return apiClientFor(resolveCredentials(flags, env), flags.insecure === true);
}

/** The same from credentials already resolved (burrow login decides which saved CA still applies). */
export function apiClientFor(credentials: Credentials, insecure: boolean): ApiClient {
  const token = requireToken(credentials);
  for (const edge of credentials.edges) {
    const refusal = cleartextRefusal(edge, insecure);
    if (refusal !== null) throw new CliError(refusal);
  }
  const pem = credentials.ca === undefined ? undefined : readCaFile(credentials.ca.path, credentials.ca.from);
  return new ApiClient(credentials.edges, token, edgeDispatcher(pem, credentials.resolve), credentials.ca);
}

/** Without a CA of its own, every API client shares this one (localhost names resolved to loopback, public roots). */
let sharedDispatcher: Dispatcher | undefined;

/** Transport errors that happen before a request's first byte is written: retrying it elsewhere is safe. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT']);

export class ApiClient {
  readonly edges: readonly string[];
  /** The edge that answered last: the next call starts there. */
  private preferred = 0;

  constructor(
    edges: string | readonly string[],
    private readonly token: string | undefined,
    /** The shared edge dispatcher (src/client/edge-lookup.ts) when undefined. */
    private readonly dispatcher?: Dispatcher,
    /** The extra CA trusted, if any (what "burrow login" saves). */
    readonly ca?: CaSource,
  ) {
    this.edges = typeof edges === 'string' ? [edges] : edges;
    if (this.edges.length === 0) throw new Error('ApiClient needs at least one edge');
  }

  /** The edge that answered last (the first one before any call). */
  get edge(): string {
    return this.edges[this.preferred]!;
  }

  async call<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const failures: CliError[] = [];
    for (let tried = 0; tried < this.edges.length; tried++) {
      const index = (this.preferred + tried) % this.edges.length;
      const outcome = await this.callOne<T>(this.edges[index]!, method, path, body);
      if (outcome.kind === 'answered') {
        this.preferred = index;
        return outcome.value;
      }
      failures.push(outcome.error);
      if (!outcome.unsent && method !== 'GET') break;
    }
    if (failures.length === 1) throw failures[0]!;
    throw new CliError(`no edge could be reached: ${failures.map((failure) => failure.message).join('; ')}`, 1, 'EDGE_UNREACHABLE');
  }

  /** One edge's answer (an API error is thrown: it is an answer), or why it could not be reached. */
  private async callOne<T>(
    edge: string,
    method: string,
    path: string,
    body: unknown,
  ): Promise<{ kind: 'answered'; value: T } | { kind: 'unreachable'; error: CliError; unsent: boolean }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response;
    try {
      response = await request(`${edge}${path}`, {
        method: method as 'GET',
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
        dispatcher: this.dispatcher ?? (sharedDispatcher ??= edgeDispatcher(undefined)),
      });
    } catch (error) {
      const nested = (error as { cause?: unknown }).cause;
      const tls = (nested instanceof Error ? describeTlsError(nested) : null) ?? describeTlsError(error as Error);
      // A failed handshake is over before the request is written.
      if (tls !== null) return { kind: 'unreachable', error: new CliError(`cannot connect to the edge at ${edge}: ${tls}`, 1, 'EDGE_UNREACHABLE'), unsent: true };
      const code = (error as { cause?: { code?: string } }).cause?.code ?? (error as { code?: string }).code;
      const unsent = code !== undefined && NOT_SENT.has(code);
      // A plain-HTTP uWS edge leaves a ClientHello unanswered: undici's connect timeout (TCP and TLS together) ends it.
      if (edge.startsWith('https:') && code === 'UND_ERR_CONNECT_TIMEOUT') {
        const message =
          `cannot connect to the edge at ${edge}: the connection and its TLS handshake did not complete within 10 s (UND_ERR_CONNECT_TIMEOUT); ` +
          'is the edge reachable, and does it speak TLS on this port? If not, use its http:// URL or give it --tls-cert';
        return { kind: 'unreachable', error: new CliError(message, 1, 'EDGE_UNREACHABLE'), unsent };
      }
      const lookup = describeLookupFailure(code, edge);
      if (lookup !== null) return { kind: 'unreachable', error: new CliError(`cannot reach the edge at ${edge}: ${lookup}`, 1, 'EDGE_UNREACHABLE'), unsent };
      const cause = code ?? (error as Error).message;
      return { kind: 'unreachable', error: new CliError(`cannot reach the edge at ${edge} (${cause}); is it running? (burrow edge --dev)`, 1, 'EDGE_UNREACHABLE'), unsent };
    }
    const text = await response.body.text();
    if (response.statusCode === 204) return { kind: 'answered', value: undefined as T };
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new CliError(`the edge at ${edge} answered ${response.statusCode} with a body that is not JSON; is it a Burrow edge?`, 1, 'EDGE_UNREACHABLE');
    }
    if (response.statusCode >= 400) {
      const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
      const retry = response.headers['retry-after'];
      const suffix = response.statusCode === 429 && retry !== undefined ? ` (retry in ${String(retry)} s)` : '';
      const code = error?.code ?? `HTTP_${response.statusCode}`;
      const message = `${error?.message ?? 'request failed'}${suffix}`;
      throw new CliError(`${error?.code ?? `HTTP ${response.statusCode}`}: ${message}`, 1, code, message);
    }
    return { kind: 'answered', value: parsed as T };
  }
}
