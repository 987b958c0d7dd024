/**
 * How the benchmark's helper processes (the target, the relays) serve: on a free 127.0.0.1 port, announced
 * to the runner as `{"port":N}` on stdout, until SIGTERM/SIGINT or until stdin closes (the runner died).
 */
import type { AddressInfo, Server } from 'node:net';

/** Listens, announces the port, and on the way out drops open connections (`dropConnections`) and exits 0. */
export function serveForRunner(server: Server, dropConnections: () => void): void {
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
  const stop = (): void => {
    dropConnections();
    server.close(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
