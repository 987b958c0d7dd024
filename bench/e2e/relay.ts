/**
 * A bare TCP byte relay for `npm run bench:hops` (bench/hops.ts): listens on 127.0.0.1 (port 0), and
 * pipes every accepted connection both ways to one new connection to 127.0.0.1:<upstream port>. No HTTP,
 * no framing, no copies beyond Node's streams: what one more Node process on the path costs at least.
 * Prints `{"port":N}` once listening; exits when its stdin closes or on SIGTERM/SIGINT.
 */
import { connect, createServer, type Socket } from 'node:net';
import { serveForRunner } from './child-server.js';

function main(): void {
  const upstreamPort = Number(process.argv[2]);
  if (!Number.isInteger(upstreamPort) || upstreamPort < 1 || upstreamPort > 65_535) {
    process.stderr.write('usage: relay.js <upstream port>\n');
    process.exit(2);
  }
  const sockets = new Set<Socket>();
  const server = createServer({ noDelay: true }, (downstream) => {
    const upstream = connect({ host: '127.0.0.1', port: upstreamPort, noDelay: true });
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    downstream.pipe(upstream);
    upstream.pipe(downstream);
    downstream.on('error', () => upstream.destroy());
    upstream.on('error', () => downstream.destroy());
  });
  serveForRunner(server, () => {
    for (const socket of sockets) socket.destroy();
  });
}

main();
