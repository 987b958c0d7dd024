/**
 * The CLI's side of the API: a thin JSON client on undici. An API error becomes a CliError whose message
 * carries the spec's code, so `burrow tokens create` prints e.g. "TOKEN_LIMIT_REACHED: ...".
 *
 * Every command that sends the token to the edge gets its client from `edgeApiClient`, which applies the
 * client's trust rules once (issue 14): no token in clear text to an edge off this machine without
 * --insecure, decided before any connection; the CA of --ca / BURROW_CA / the config file trusted beside
 * the public roots; a failed TLS handshake reported in one line naming its cause.
 */
import { request, type Dispatcher } from 'undici';
import { cleartextRefusal, describeTlsError } from '../client/edge-trust.js';
import { CliError } from './args.js';
import { requireToken, resolveCredentials, type CaSource, type Credentials } from './config.js';
import { dispatcherTrusting, readCaFile } from './edge-ca.js';

/** The flags of every command that talks to the edge's API (see CONNECTION_HELP). */
export const CONNECTION_OPTIONS = {
  edge: { type: 'string' },
  token: { type: 'string' },
  ca: { type: 'string' },
  insecure: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

/** Their help lines, for the Options section of each command's --help. */
export const CONNECTION_HELP = `  --edge URL     the edge (default: BURROW_EDGE, the config file, http://localhost:8080)
  --token T      the token (default: BURROW_TOKEN, the config file)
  --ca FILE      trust this CA (PEM) for an https:// edge with a private certificate, beside the
                 public roots (default: BURROW_CA, the CA "burrow login --ca" saved)
  --insecure     allow sending the token over plain http:// to an edge not on this machine
  --json         print the API's JSON
  -h, --help     show this help`;

export interface ConnectionFlags {
  edge?: string | undefined;
  token?: string | undefined;
  ca?: string | undefined;
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
  const refusal = cleartextRefusal(credentials.edge, insecure);
  if (refusal !== null) throw new CliError(refusal);
  const pem = credentials.ca === undefined ? undefined : readCaFile(credentials.ca.path, credentials.ca.from);
  return new ApiClient(credentials.edge, token, pem === undefined ? undefined : dispatcherTrusting(pem), credentials.ca);
}

export class ApiClient {
  constructor(
    readonly edge: string,
    private readonly token: string | undefined,
    /** undici's global dispatcher when undefined. */
    private readonly dispatcher?: Dispatcher,
    /** The extra CA trusted, if any (what "burrow login" saves). */
    readonly ca?: CaSource,
  ) {}

  async call<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response;
    try {
      response = await request(`${this.edge}${path}`, {
        method: method as 'GET',
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
        ...(this.dispatcher === undefined ? {} : { dispatcher: this.dispatcher }),
      });
    } catch (error) {
      const nested = (error as { cause?: unknown }).cause;
      const tls = (nested instanceof Error ? describeTlsError(nested) : null) ?? describeTlsError(error as Error);
      if (tls !== null) throw new CliError(`cannot connect to the edge at ${this.edge}: ${tls}`, 1, 'EDGE_UNREACHABLE');
      // A plain-HTTP uWS edge leaves a ClientHello unanswered: undici's connect timeout (TCP and TLS together) ends it.
      if (this.edge.startsWith('https:') && (error as { code?: string }).code === 'UND_ERR_CONNECT_TIMEOUT') {
        throw new CliError(
          `cannot connect to the edge at ${this.edge}: the connection and its TLS handshake did not complete within 10 s (UND_ERR_CONNECT_TIMEOUT); ` +
            'is the edge reachable, and does it speak TLS on this port? If not, use its http:// URL or give it --tls-cert',
          1,
          'EDGE_UNREACHABLE',
        );
      }
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as { code?: string }).code ?? (error as Error).message;
      throw new CliError(`cannot reach the edge at ${this.edge} (${cause}); is it running? (burrow edge --dev)`, 1, 'EDGE_UNREACHABLE');
    }
    const text = await response.body.text();
    if (response.statusCode === 204) return undefined as T;
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new CliError(`the edge at ${this.edge} answered ${response.statusCode} with a body that is not JSON; is it a Burrow edge?`, 1, 'EDGE_UNREACHABLE');
    }
    if (response.statusCode >= 400) {
      const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
      const retry = response.headers['retry-after'];
      const suffix = response.statusCode === 429 && retry !== undefined ? ` (retry in ${String(retry)} s)` : '';
      const code = error?.code ?? `HTTP_${response.statusCode}`;
      const message = `${error?.message ?? 'request failed'}${suffix}`;
      throw new CliError(`${error?.code ?? `HTTP ${response.statusCode}`}: ${message}`, 1, code, message);
    }
    return parsed as T;
  }
}
