/**
 * The plain-HTTP listener of an HTTPS edge (`--http-port`): every request is redirected to the same
 * URL over HTTPS, except ACME HTTP-01 challenges, which are served from a directory so certbot's
 * webroot mode can prove the apex name while the edge runs.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { listenAlone, listenPort, uws, type HttpResponse, type TemplatedApp, type us_listen_socket } from '../uws.js';
import type { HostDispatch } from './host.js';
import { endHeadResponse } from './responses.js';

export const ACME_CHALLENGE_PREFIX = '/.well-known/acme-challenge/';
/** ACME tokens are base64url (RFC 8555 section 8.3): nothing else may reach the file system. */
const ACME_TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

export interface RedirectOptions {
  hosts: HostDispatch;
  /** The HTTPS port public URLs use (443 is left out of the Location). */
  httpsPort: () => number;
  /** certbot's --webroot-path: challenges are read from <dir>/.well-known/acme-challenge/<token>. */
  acmeWebroot?: string;
}

export class HttpRedirectListener {
  private readonly app: TemplatedApp;
  private socket: us_listen_socket | null = null;
  port = 0;

  constructor(private readonly options: RedirectOptions) {
    this.app = uws.App();
    this.app.any('/*', (res, req) => {
      const host = req.getHeader('host');
      const url = req.getUrl();
      const query = req.getQuery();
      const method = req.getCaseSensitiveMethod();
      if (this.options.hosts.resolve(host).kind === 'unknown' || host === '') {
        res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json; charset=utf-8');
        res.end(JSON.stringify({ error: { code: 'NOT_FOUND', message: 'Unknown host.' } }));
        return;
      }
      if (url.startsWith(ACME_CHALLENGE_PREFIX) && (method === 'GET' || method === 'HEAD')) {
        this.serveChallenge(res, url.slice(ACME_CHALLENGE_PREFIX.length), method === 'HEAD');
        return;
      }
      const port = this.options.httpsPort();
      const hostname = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:[0-9]*$/, '');
      const location = `https://${hostname}${port === 443 ? '' : `:${port}`}${url}${query ? `?${query}` : ''}`;
      // 308 keeps the method and body (a webhook POST sent to http:// arrives as a POST).
      res.writeStatus('308 Permanent Redirect').writeHeader('location', location).writeHeader('cache-control', 'no-store');
      res.endWithoutBody(0, true);
    });
  }

  async listen(host: string, port: number): Promise<void> {
    const listening = await listenAlone(this.app, host, port);
    if ('refused' in listening) throw new Error(`cannot listen for HTTP: ${listening.refused}`);
    this.socket = listening.socket;
    this.port = listenPort(listening.socket);
  }

  close(): void {
    if (this.socket !== null) uws.us_listen_socket_close(this.socket);
    this.socket = null;
  }

  private serveChallenge(res: HttpResponse, token: string, isHead: boolean): void {
    const webroot = this.options.acmeWebroot;
    if (webroot === undefined || !ACME_TOKEN.test(token)) {
      res.writeStatus('404 Not Found').endWithoutBody(0, true);
      return;
    }
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    readFile(join(webroot, ACME_CHALLENGE_PREFIX, token)).then(
      (body) => {
        if (aborted) return;
        res.cork(() => {
          res.writeStatus('200 OK').writeHeader('content-type', 'text/plain').writeHeader('cache-control', 'no-store');
          if (isHead) endHeadResponse(res, body.byteLength);
          else res.end(body);
        });
      },
      () => {
        if (!aborted) res.cork(() => res.writeStatus('404 Not Found').endWithoutBody(0, true));
      },
    );
  }
}
