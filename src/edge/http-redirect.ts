/**
 * The plain-HTTP listener of an HTTPS edge (`--http-port`): every request is redirected to the same
 * URL over HTTPS, except ACME HTTP-01 challenges, which are served from a directory so certbot's
 * webroot mode can prove the apex name while the edge runs. It stands on the same HTTP/1 server as the
 * public listener (src/http1/server.ts), so HTTP/1.0 clients, pipelining and the timeouts are the same.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fieldValue } from '../http1/head.js';
import { ServerConnections, type ServerExchange } from '../http1/server.js';
import type { HostDispatch } from './host.js';
import { PublicListener } from './public-listener.js';
import { writeOwn } from './responses.js';

export const ACME_CHALLENGE_PREFIX = '/.well-known/acme-challenge/';
/** ACME tokens are base64url (RFC 8555 section 8.3): nothing else may reach the file system. */
const ACME_TOKEN = /^[A-Za-z0-9_-]{1,256}$/;
const IGNORED_BODY = { onRequestBody(): void {}, onAborted(): void {} };

export interface RedirectOptions {
  hosts: HostDispatch;
  /** The HTTPS port public URLs use (443 is left out of the Location). */
  httpsPort: () => number;
  /** certbot's --webroot-path: challenges are read from <dir>/.well-known/acme-challenge/<token>. */
  acmeWebroot?: string;
}

export class HttpRedirectListener {
  private readonly connections: ServerConnections;
  private readonly listener: PublicListener;

  constructor(private readonly options: RedirectOptions) {
    this.connections = new ServerConnections({
      onRequest: (exchange) => this.serve(exchange),
      refusal: (error) => ({ status: error.status, fields: ['content-type', 'text/plain'], body: `${error.reason}\n` }),
    });
    this.listener = new PublicListener(this.connections, null);
  }

  get port(): number {
    return this.listener.port;
  }

  async listen(host: string, port: number): Promise<void> {
    try {
      await this.listener.listen(host, port);
    } catch (error) {
      throw new Error(`cannot listen for HTTP: ${(error as Error).message}`);
    }
  }

  close(): void {
    this.listener.close();
    this.connections.destroyAll();
  }

  private serve(exchange: ServerExchange): void {
    exchange.attach(IGNORED_BODY);
    const head = exchange.head;
    const host = fieldValue(head.fields, 'host') ?? '';
    const target = head.target;
    const method = head.method;
    if (host === '' || this.options.hosts.resolve(host).kind === 'unknown') {
      writeOwn(exchange, 404, ['content-type', 'application/json; charset=utf-8'], JSON.stringify({ error: { code: 'NOT_FOUND', message: 'Unknown host.' } }));
      return;
    }
    if (target.startsWith(ACME_CHALLENGE_PREFIX) && (method === 'GET' || method === 'HEAD')) {
      const query = target.indexOf('?');
      this.serveChallenge(exchange, target.slice(ACME_CHALLENGE_PREFIX.length, query === -1 ? undefined : query));
      return;
    }
    const port = this.options.httpsPort();
    const hostname = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:[0-9]*$/, '');
    const path = target.startsWith('/') ? target : '/';
    // 308 keeps the method and body (a webhook POST sent to http:// arrives as a POST).
    writeOwn(exchange, 308, ['location', `https://${hostname}${port === 443 ? '' : `:${port}`}${path}`, 'cache-control', 'no-store'], null, true);
  }

  private serveChallenge(exchange: ServerExchange, token: string): void {
    const webroot = this.options.acmeWebroot;
    if (webroot === undefined || !ACME_TOKEN.test(token)) {
      writeOwn(exchange, 404, [], null);
      return;
    }
    readFile(join(webroot, ACME_CHALLENGE_PREFIX, token)).then(
      (body) => {
        if (!exchange.dead) writeOwn(exchange, 200, ['content-type', 'text/plain', 'cache-control', 'no-store'], body);
      },
      () => {
        if (!exchange.dead) writeOwn(exchange, 404, [], null);
      },
    );
  }
}
