/**
 * The local target of the end-to-end benchmark, run in its own process (`node dist/bench/e2e/target.js`) so
 * that direct and tunnel runs hit the same server under the same conditions.
 *
 * GET answers a small constant JSON body; POST reads the body and answers its length as JSON. It listens on
 * 127.0.0.1 only, prints `{"port":N}` once listening, and exits when its stdin closes (the runner died) or
 * on SIGTERM/SIGINT.
 */
import { createServer } from 'node:http';
import { serveForRunner } from './child-server.js';
import { GET_BODY, postBody } from './payloads.js';

function main(): void {
  const getBody = Buffer.from(GET_BODY);
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': getBody.length });
      res.end(getBody);
      return;
    }
    if (req.method === 'POST') {
      let length = 0;
      req.on('data', (chunk: Buffer) => {
        length += chunk.length;
      });
      req.on('end', () => {
        const body = postBody(length);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      });
      return;
    }
    res.writeHead(405, { 'content-type': 'application/json', allow: 'GET, POST' });
    res.end('{"error":"method not allowed"}');
  });
  // Idle keep-alive connections of the tunnel client's pool and the probe survive the pauses between runs.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 130_000;
  serveForRunner(server, () => server.closeAllConnections());
}

main();
