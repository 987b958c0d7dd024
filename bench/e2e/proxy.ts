/**
 * A minimal one-hop HTTP reverse proxy built from Burrow's own stack, for the benchmark's floor phase
 * (bench/e2e/hops.ts): the native uWebSockets.js server in front, an undici Pool (128 connections, no
 * pipelining, no timeouts: the client's settings) to 127.0.0.1:<upstream port> behind, nothing else. No
 * tunnel, no framing, no capture, no inspector, no streaming: the request body is gathered, the response
 * gathered and written corked. What one process that parses HTTP on both sides costs here, i.e. the
 * least an edge and a client together could cost with this stack, were they one process.
 * Prints `{"port":N}` once listening; exits when its stdin closes or on SIGTERM/SIGINT.
 */
import type { Dispatcher } from 'undici';
import { Pool } from 'undici';
import { listenPort, uws, type HttpResponse, type us_listen_socket } from '../../src/uws.js';

/** Headers about the connection, not the message (RFC 9110 section 7.6.1), and the ones undici and uWS write themselves. */
const NOT_PASSED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'content-length', 'date']);

class Exchange implements Dispatcher.DispatchHandler {
  aborted = false;
  private status = 0;
  private headers: Record<string, string | string[] | undefined> = {};
  private readonly chunks: Buffer[] = [];

  constructor(private readonly res: HttpResponse) {}

  onRequestStart(): void {}

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.status = statusCode;
    this.headers = headers;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.aborted) return;
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.res.cork(() => {
      this.res.writeStatus(String(this.status));
      for (const name in this.headers) {
        const value = this.headers[name];
        if (value === undefined || NOT_PASSED.has(name)) continue;
        if (typeof value === 'string') this.res.writeHeader(name, value);
        else for (const item of value) this.res.writeHeader(name, item);
      }
      this.res.end(body);
    });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.aborted) return;
    this.res.cork(() => {
      this.res.writeStatus('502 Bad Gateway');
      this.res.end(error.message);
    });
  }
}

function main(): void {
  const upstreamPort = Number(process.argv[2]);
  if (!Number.isInteger(upstreamPort) || upstreamPort < 1 || upstreamPort > 65_535) {
    process.stderr.write('usage: proxy.js <upstream port>\n');
    process.exit(2);
  }
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 128, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 });
  const app = uws.App();
  app.any('/*', (res, req) => {
    const method = req.getCaseSensitiveMethod();
    const query = req.getQuery();
    const path = query === undefined || query === '' ? req.getUrl() : `${req.getUrl()}?${query}`;
    const headers: string[] = [];
    req.forEach((name, value) => {
      if (!NOT_PASSED.has(name)) headers.push(name, value);
    });
    const exchange = new Exchange(res);
    res.onAborted(() => {
      exchange.aborted = true;
    });
    const chunks: Buffer[] = [];
    res.onData((data, last) => {
      // uWS reuses `data` after the callback returns: copy it.
      if (data.byteLength > 0) chunks.push(Buffer.from(data.slice(0)));
      if (!last) return;
      const body = chunks.length === 0 ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      pool.dispatch({ method, path, headers, body }, exchange);
    });
  });
  let listening: us_listen_socket | null = null;
  app.listen('127.0.0.1', 0, (socket) => {
    if (socket === false) {
      process.stderr.write('proxy: could not listen on 127.0.0.1\n');
      process.exit(1);
    }
    listening = socket;
    process.stdout.write(`${JSON.stringify({ port: listenPort(socket) })}\n`);
  });
  const stop = (): void => {
    if (listening !== null) uws.us_listen_socket_close(listening);
    listening = null;
    void pool.destroy().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}

main();
