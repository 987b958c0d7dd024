/**
 * The CLI's side of the API: a thin JSON client on undici. An API error becomes a CliError whose message
 * carries the spec's code, so `burrow tokens create` prints e.g. "TOKEN_LIMIT_REACHED: ...".
 */
import { request } from 'undici';
import { CliError } from './args.js';

export class ApiClient {
  constructor(
    readonly edge: string,
    private readonly token: string | undefined,
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
      });
    } catch (error) {
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
