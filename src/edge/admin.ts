/**
 * The admin listener (`burrow edge --admin [HOST:]PORT`): its own uWebSockets.js app on its own port,
 * loopback unless told otherwise, so metrics and health never share the public port. It serves
 * `GET /metrics` (Prometheus text) and `GET /healthz` (200 while serving, 503 from the moment draining
 * starts); everything else is 404. The spec's `/health` and `/api/v1/health` stay 404 on the public
 * port: they are not served there.
 *
 * DNS rebinding: a page on attacker.example whose name is made to resolve to this machine could read the
 * metrics through a victim's browser. The browser sends `Host: attacker.example`, so the listener answers
 * only a Host that is a loopback name (`localhost`, `*.localhost`), an IP address (which no rebinding
 * can forge), the --admin host itself, or none; anything else is 421 Misdirected Request.
 */
import { listenAlone, listenPort, uws, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from '../uws.js';
import type { EdgeMetrics } from './metrics.js';

export interface AdminAddress {
  host: string;
  port: number;
}

/**
 * `[HOST:]PORT` → address; a bare port binds 127.0.0.1, `[::1]:9090` an IPv6 address. Returns a reason
 * when the text is not an address.
 */
export function parseAdminAddress(text: string): AdminAddress | string {
  const match = /^(?:(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+)):)?([0-9]{1,5})$/.exec(text.trim());
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || !(port >= 0 && port <= 65535)) return `expected [HOST:]PORT, e.g. 9090 or 127.0.0.1:9090, got "${text}"`;
  return { host: match[1] ?? match[2] ?? '127.0.0.1', port };
}

const IP_LITERAL = /^(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|\[[0-9a-f:.]+\])$/;

/** Whether the admin listener bound to `address` answers a request with this Host header. */
export function adminHostAllowed(hostHeader: string, address: AdminAddress): boolean {
  if (hostHeader === '') return true;
  const lower = hostHeader.toLowerCase();
  const host = lower.startsWith('[') ? lower.slice(0, lower.indexOf(']') + 1) : lower.replace(/:[0-9]{1,5}$/, '');
  if (host === 'localhost' || host.endsWith('.localhost') || IP_LITERAL.test(host)) return true;
  return host === address.host.toLowerCase();
}

const MISDIRECTED = 'misdirected: the admin listener answers Host localhost, an IP address or its --admin host only\n';
const HEALTHY = '{"status":"serving"}\n';
const DRAINING = '{"status":"draining"}\n';

export class AdminServer {
  private readonly app: TemplatedApp;
  private socket: us_listen_socket | null = null;
  port = 0;

  private constructor(
    private readonly address: AdminAddress,
    private readonly metrics: EdgeMetrics,
    private readonly draining: () => boolean,
    private readonly log: (line: string) => void,
  ) {
    this.app = uws.App();
    this.app.get('/metrics', (res, req) => {
      if (this.misdirected(res, req)) return;
      this.serveMetrics(res);
    });
    this.app.get('/healthz', (res, req) => {
      if (this.misdirected(res, req)) return;
      const draining = this.draining();
      res
        .writeStatus(draining ? '503 Service Unavailable' : '200 OK')
        .writeHeader('content-type', 'application/json')
        .writeHeader('cache-control', 'no-store')
        .end(draining ? DRAINING : HEALTHY);
    });
    this.app.any('/*', (res, req) => {
      if (this.misdirected(res, req)) return;
      res.writeStatus('404 Not Found').writeHeader('content-type', 'text/plain').end('not found: the admin listener serves GET /metrics and GET /healthz\n');
    });
  }

  static async start(address: AdminAddress, metrics: EdgeMetrics, draining: () => boolean, log: (line: string) => void): Promise<AdminServer> {
    const server = new AdminServer(address, metrics, draining, log);
    const listening = await listenAlone(server.app, address.host, address.port);
    if ('refused' in listening) throw new Error(`admin listener: ${listening.refused}`);
    server.socket = listening.socket;
    server.port = listenPort(listening.socket);
    return server;
  }

  /** Answers 421 to a Host this listener is not (DNS rebinding) and returns true. */
  private misdirected(res: HttpResponse, req: HttpRequest): boolean {
    if (adminHostAllowed(req.getHeader('host'), this.address)) return false;
    res.writeStatus('421 Misdirected Request').writeHeader('content-type', 'text/plain').writeHeader('cache-control', 'no-store').end(MISDIRECTED);
    return true;
  }

  private serveMetrics(res: HttpResponse): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    this.metrics.text().then(
      (text) => {
        if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', this.metrics.contentType).end(text));
      },
      (error: Error) => {
        this.log(`metrics: ${error.stack ?? error.message}`);
        if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').writeHeader('content-type', 'text/plain').end('metrics failed\n'));
      },
    );
  }

  close(): void {
    if (this.socket !== null) uws.us_listen_socket_close(this.socket);
    this.socket = null;
  }
}
