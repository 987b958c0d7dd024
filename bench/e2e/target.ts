/**
 * The local target of the end-to-end benchmark, run in its own process (`node dist/bench/e2e/target.js`) so
 * that direct, tunnel and floor runs hit the same server under the same conditions.
 *
 * `GET /bench/<shape>/<size>` answers a JSON body of <size> bytes; `POST /bench/<shape>/0` reads the body
 * and answers its length as JSON. <shape> is `length` (a `content-length`) or `chunked`
 * (`transfer-encoding: chunked`, the whole body in one write, as a streaming framework's `res.end(body)`
 * after the head). Any other path answers as `length` (GET: the old small body). It listens on 127.0.0.1
 * only, prints `{"port":N}` once listening, and exits when its stdin closes (the runner died) or on
 * SIGTERM/SIGINT.
 */
import { createServer, type ServerResponse } from 'node:http';
import { serveForRunner } from './child-server.js';
import { GET_BODY, payload, postBody, SMALL } from './payloads.js';

interface Route {
  chunked: boolean;
  /** GET's body. */
  body: Buffer;
}

const OLD_GET_BODY = Buffer.from(GET_BODY);
const routes = new Map<string, Route>();

/** Parsed once per distinct URL: the target's own cost stays what a plain handler costs. */
function routeOf(url: string): Route {
  let route = routes.get(url);
  if (route !== undefined) return route;
  const match = /^\/bench\/(length|chunked)\/(\d+)/.exec(url);
  const size = match === null ? 0 : Math.min(Math.max(Number(match[2]), SMALL), 64 * 1024 * 1024);
  route = { chunked: match?.[1] === 'chunked', body: match === null ? OLD_GET_BODY : Buffer.from(payload(size)) };
  if (routes.size < 1_000) routes.set(url, route);
  return route;
}

function answer(res: ServerResponse, chunked: boolean, body: Buffer | string): void {
  res.writeHead(200, chunked ? { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function main(): void {
  const server = createServer((req, res) => {
    const route = routeOf(req.url ?? '/');
    if (req.method === 'GET') {
      answer(res, route.chunked, route.body);
      return;
    }
    if (req.method === 'POST') {
      let length = 0;
      req.on('data', (chunk: Buffer) => {
        length += chunk.length;
      });
      req.on('end', () => answer(res, route.chunked, postBody(length)));
      return;
    }
    res.writeHead(405, { 'content-type': 'application/json', allow: 'GET, POST' });
    res.end('{"error":"method not allowed"}');
  });
  // Idle keep-alive connections of the tunnel client's pool and the probes survive the pauses between runs.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 130_000;
  serveForRunner(server, () => server.closeAllConnections());
}

main();
