/**
 * The inspector's test stack, all real: an edge, an account, a local server that remembers what it got,
 * the tunnel client, and the inspector on a free loopback port attached to it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { request } from 'undici';
import { WebSocketServer } from 'ws';
import type { EdgeOptions } from '../../src/edge/server.js';
import { Inspector, type InspectorOptions } from '../../src/inspector/server.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, type HttpResult, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  raw: Buffer;
}

export interface Stack {
  edge: TestEdge;
  account: TestAccount;
  local: LocalServer;
  /** Every request the local server received, oldest first. */
  seen: Seen[];
  client: TunnelClient;
  inspector: Inspector;
  /** The tunnel's public Host header, and its subdomain. */
  host: string;
  subdomain: string;
  /** A public request through the tunnel. */
  send(method: string, path: string, options?: { body?: string | Buffer; headers?: Record<string, string> }): Promise<HttpResult>;
  close(): Promise<void>;
}

/**
 * The local app: /status/NNN answers NNN, /binary answers bytes, /silent never answers, anything else
 * echoes as JSON; a WebSocket on any path echoes each message back, prefixed "echo:" when it is text.
 */
export async function startStack(options: InspectorOptions = {}, recordLimit = 1024 * 1024, edgeOptions: Partial<EdgeOptions> = {}): Promise<Stack> {
  const seen: Seen[] = [];
  const edge = await startEdge(edgeOptions);
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: body.toString('utf8'), raw: body });
      if (req.url === '/silent') return;
      const status = /^\/status\/([0-9]{3})/.exec(req.url!);
      if (req.url === '/binary') {
        res.setHeader('content-type', 'application/octet-stream');
        res.end(Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80]));
        return;
      }
      res.statusCode = status === null ? 200 : Number(status[1]);
      res.setHeader('content-type', 'application/json');
      res.setHeader('x-local', 'yes');
      res.end(JSON.stringify({ method: req.method, url: req.url, body: body.toString('utf8') }));
    });
  });
  const sockets = new WebSocketServer({ server: local.server });
  sockets.on('connection', (socket) => {
    socket.on('message', (data: Buffer, isBinary: boolean) => socket.send(isBinary ? data : `echo:${data.toString('utf8')}`, { binary: isBinary }));
  });
  const account = await createAccount(edge);
  const { client, host, subdomain } = await startClient(edge, account.token, local.port, { recordLimit });
  const inspector = await Inspector.start({ port: 0, edge: edge.url, token: account.token, ...options });
  inspector.attach(client);
  return {
    edge,
    account,
    local,
    seen,
    client,
    inspector,
    host,
    subdomain,
    send: (method, path, sendOptions = {}) =>
      call(edge, method, path, {
        host,
        ...(sendOptions.body === undefined ? {} : { rawBody: sendOptions.body }),
        ...(sendOptions.headers === undefined ? {} : { headers: sendOptions.headers }),
      }),
    async close() {
      inspector.close();
      await client.close();
      for (const socket of sockets.clients) socket.terminate();
      sockets.close();
      await local.close();
      await edge.close();
    },
  };
}

export interface InspectorResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
  text: string;
}

/** A request to the inspector; Host is 127.0.0.1:PORT unless given. */
export async function inspect(
  inspector: Inspector,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<InspectorResult> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  } else if (options.rawBody !== undefined) {
    body = options.rawBody;
  }
  const response = await request(`http://127.0.0.1:${inspector.port}${path}`, {
    method: method as 'GET',
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers, json, text };
}

/** Headers as the inspector shows them ([name, value] pairs) → the first value of `name`. */
export function header(pairs: [string, string][], name: string): string | undefined {
  return pairs.find(([key]) => key === name)?.[1];
}
