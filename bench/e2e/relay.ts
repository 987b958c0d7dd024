/**
 * A bare TCP byte relay for the benchmark's floors (bench/e2e.ts, `npm run bench:hops`): listens on
 * 127.0.0.1 (port 0), and pipes every accepted connection both ways to one new connection to
 * 127.0.0.1:<upstream port>. No HTTP, no framing, no copies beyond Node's streams: what one more Node
 * process on the path costs at least.
 *
 * With `--tls-cert FILE --tls-key FILE` it terminates TLS on the side it accepts (`node:tls`, Node's
 * defaults, as the edge's public HTTPS listener has them), and with `--upstream-ca FILE` it speaks TLS to
 * its upstream (server name localhost, trusting that CA): two of them make the HTTPS phase's Node floor,
 * both hops encrypted as the TLS tunnel's are, what `node:tls` itself costs a request on this machine.
 *
 * Prints `{"port":N}` once listening; exits when its stdin closes or on SIGTERM/SIGINT.
 */
import { readFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer } from 'node:tls';
import { parseArgs } from 'node:util';
import { serveForRunner } from './child-server.js';

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { 'tls-cert': { type: 'string' }, 'tls-key': { type: 'string' }, 'upstream-ca': { type: 'string' } },
  });
  const upstreamPort = Number(positionals[0]);
  const certFile = values['tls-cert'];
  const keyFile = values['tls-key'];
  if (positionals.length !== 1 || !Number.isInteger(upstreamPort) || upstreamPort < 1 || upstreamPort > 65_535 || (certFile === undefined) !== (keyFile === undefined)) {
    process.stderr.write('usage: relay.js <upstream port> [--tls-cert FILE --tls-key FILE] [--upstream-ca FILE]\n');
    process.exit(2);
  }
  const upstreamCa = values['upstream-ca'] === undefined ? null : readFileSync(values['upstream-ca']);
  const dial = (): Socket => {
    const socket = upstreamCa === null ? connect({ host: '127.0.0.1', port: upstreamPort }) : tlsConnect({ host: '127.0.0.1', port: upstreamPort, servername: 'localhost', ca: upstreamCa });
    return socket.setNoDelay(true);
  };
  const sockets = new Set<Socket>();
  const relay = (downstream: Socket): void => {
    downstream.setNoDelay(true);
    const upstream = dial();
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    downstream.pipe(upstream);
    upstream.pipe(downstream);
    downstream.on('error', () => upstream.destroy());
    upstream.on('error', () => downstream.destroy());
  };
  const server =
    certFile === undefined ? createServer({ noDelay: true }, relay) : createTlsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile!), noDelay: true }, relay);
  serveForRunner(server, () => {
    for (const socket of sockets) socket.destroy();
  });
}

main();
