/**
 * A local HTTP/1.1 server written byte by byte, for behaviour no well-behaved server shows: each
 * request head is read, and the script for its path writes whatever bytes it likes, then keeps the
 * connection for the next request or ends, resets or closes it. Records every request head's bytes.
 */
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/** Writes the answer; returns 'keep' to read the next request on the same connection. */
export type Script = (socket: Socket, head: Buffer) => 'keep' | 'done';

export interface RawLocal {
  port: number;
  /** Request heads as received, bytes exact. */
  heads: Buffer[];
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startRawLocal(scripts: Record<string, Script>, host = '127.0.0.1'): Promise<RawLocal> {
  const heads: Buffer[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.subarray(0, end + 4);
        // Bodies are not expected here: requests in these tests are GETs.
        buffered = buffered.subarray(end + 4);
        heads.push(Buffer.from(head));
        const path = head.toString('latin1').split(' ')[1] ?? '/';
        const script = scripts[path.split('?')[0]!] ?? scripts['*'];
        if (script === undefined || script(socket, head) === 'done') {
          socket.removeAllListeners('data');
          return;
        }
      }
    });
  });
  server.listen(0, host);
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    heads,
    get connections() {
      return connections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The answer to the follow-up request every case makes: the tunnel still works. */
export const OK: Script = (socket) => {
  socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
  return 'keep';
};
