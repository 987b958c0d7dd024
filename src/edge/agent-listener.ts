/**
 * The edge's agent listener (DESIGN.md sections 1 and 2): uWebSockets.js on a port of its own, serving
 * only what it is best at, the tunnel clients' msgpack-framed WebSockets at /api/v1/connect. Clients are
 * given the edge's base URL and learn this endpoint from `GET /api/v1/instance` (`agent_url`); behind a
 * front proxy the proxy routes that path here (deploy/). With TLS it serves the same certificates as
 * the public listener, as uWS SSLApps reloaded side by side (src/edge/tls.ts).
 */
import { CONNECT_PATH } from '../protocol/constants.js';
import { listenAlone, listenPort, uws, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket, type us_socket_context_t, type WebSocket } from '../uws.js';
import type { OriginSource } from './client-address.js';
import { plainAddress } from './client-address.js';
import type { SocketData } from './stream-host.js';
import { TlsListener, type CertificateSummary, type TlsOptions } from './tls.js';

export interface AgentHandlers {
  /** An upgrade at /api/v1/connect: answered by the edge (a refusal, or `res.upgrade`). */
  connect(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void;
  /** A tunnel's WebSocket opened (after `connect` upgraded it). */
  opened(ws: WebSocket<SocketData>): void;
  /** Anything else: the edge's 404. */
  other(res: HttpResponse, req: HttpRequest): void;
  /** The edge is closing: new connections are cut. */
  stopped(): boolean;
}

/** A uWS request's origin (the agent port's peers; PROXY v2 is parsed by uWS there). */
export function uwsOrigin(res: HttpResponse): OriginSource {
  return {
    remoteAddress: plainAddress(Buffer.from(res.getRemoteAddressAsText()).toString()),
    proxiedAddress: Buffer.from(res.getProxiedRemoteAddressAsText()).toString(),
  };
}

/** A uWS request's fields as a flat list (uWS gives names lower-case). */
export function uwsFields(req: HttpRequest): string[] {
  const fields: string[] = [];
  req.forEach((name, value) => fields.push(name, value));
  return fields;
}

export class AgentListener {
  private readonly app: TemplatedApp | null;
  private readonly tls: TlsListener | null;
  private socket: us_listen_socket | null = null;
  port = 0;

  constructor(
    private readonly handlers: AgentHandlers,
    private readonly maxPayloadLength: number,
    tls: TlsOptions | undefined,
  ) {
    this.tls = tls === undefined ? null : new TlsListener(tls, (app) => this.routes(app));
    this.app = this.tls === null ? uws.App() : null;
    if (this.app !== null) this.routes(this.app);
  }

  async listen(host: string, port: number): Promise<void> {
    if (this.tls !== null) {
      await this.tls.listen(host, port);
      this.port = this.tls.port;
      return;
    }
    const listening = await listenAlone(this.app!, host, port);
    if ('refused' in listening) throw new Error(`agent port: ${listening.refused}`);
    this.socket = listening.socket;
    this.port = listenPort(listening.socket);
  }

  /** SIGHUP: new tunnel connections get the new certificate; connected tunnels stay up. */
  reload(): Promise<CertificateSummary> | null {
    return this.tls?.reload() ?? null;
  }

  close(): void {
    if (this.socket !== null) uws.us_listen_socket_close(this.socket);
    this.socket = null;
    this.tls?.close();
  }

  private routes(app: TemplatedApp): void {
    app.ws<SocketData>('/*', {
      compression: uws.DISABLED,
      maxPayloadLength: this.maxPayloadLength,
      // Far above the session's high-water mark: with credit in force, a send is never dropped.
      maxBackpressure: 64 * 1024 * 1024,
      closeOnBackpressureLimit: 0,
      idleTimeout: 32,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        if (this.handlers.stopped()) res.close();
        else if (req.getUrl() === CONNECT_PATH) this.handlers.connect(res, req, context);
        else this.handlers.other(res, req);
      },
      open: (ws: WebSocket<SocketData>) => this.handlers.opened(ws),
      message: (ws, message, isBinary) => ws.getUserData().session?.onMessage(message, isBinary),
      drain: (ws) => ws.getUserData().session?.onDrain(),
      // The reason is copied now: uWS reuses its memory when this callback returns.
      close: (ws, code, message) => ws.getUserData().session?.onClose(code, Buffer.from(message).toString()),
    });
    app.any('/*', (res, req) => {
      if (this.handlers.stopped()) res.close();
      else this.handlers.other(res, req);
    });
  }
}
