/**
 * Issue 24's CPU floor: a plain TCP connection reads into one buffer shared by every connection of its
 * `ServerConnections` (src/http1/server.ts, `withSharedReads`). Whatever a connection keeps past a read
 * must therefore be its own copy: the bytes of a pipelined request held while the queue is full, a PROXY
 * preface that came in pieces, the bytes after an upgrade. Each case lets another connection's read land
 * in the shared buffer in between, with bytes of the same shape, and checks the kept bytes are intact.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { PREFACE_MORE, ServerConnections, type ServerConnection, type ServerExchange } from '../../src/http1/server.js';

const PREFIX = 'HELLO ';
const prefaces: string[] = [];

/** A preface line `HELLO <word>\n`, waited for until whole (as a PROXY header that comes in pieces). */
function helloPreface(_connection: ServerConnection, bytes: Buffer): number {
  if (bytes.byteLength < PREFIX.length || bytes.subarray(0, PREFIX.length).toString('latin1') !== PREFIX) return 0;
  const end = bytes.indexOf(10);
  if (end === -1) return PREFACE_MORE;
  prefaces.push(bytes.subarray(PREFIX.length, end).toString('latin1'));
  return end + 1;
}

function serve(exchange: ServerExchange): void {
  const target = exchange.head.target;
  exchange.attach({
    onRequestBody(_chunk, last) {
      if (!last) return;
      const delay = /^\/delay\/(\d+)/.exec(target);
      const answer = (): void => exchange.respond(200, 'OK', ['X-Target', target], target);
      if (delay === null) answer();
      else setTimeout(answer, Number(delay[1]));
    },
    onAborted() {},
    onSwitched(socket: Socket, head: Buffer) {
      // Kept until the end: the chunks must be the owner's own by then.
      const chunks: Buffer[] = [head];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('end', () => socket.end(chunks.map((chunk) => chunk.toString('latin1')).join(';')));
      socket.resume();
    },
  });
  if (target === '/upgrade') exchange.writeHead(101, 'Switching Protocols', ['Connection', 'Upgrade', 'Upgrade', 'test'], -1);
}

async function open(port: number): Promise<{ socket: Socket; text: () => string; ended: Promise<unknown> }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  return { socket, text: () => text, ended: once(socket, 'end') };
}

const get = (target: string, extra = ''): string => `GET ${target} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('issue 24: reads into the shared buffer, kept past the read', { timeout: 20_000 }, () => {
  let server: Server;
  let connections: ServerConnections;
  let port: number;
  const seen: string[] = [];
  before(async () => {
    connections = new ServerConnections(
      {
        onRequest(exchange) {
          seen.push(exchange.head.target);
          serve(exchange);
        },
        refusal: (error) => ({ status: error.status, fields: [], body: `${error.code}\n` }),
      },
      { maxPipelined: 2 },
    );
    server = createServer({ allowHalfOpen: true }, (socket) => connections.accept(socket, '127.0.0.1', helloPreface));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    connections.destroyAll();
    await new Promise((resolve) => server.close(resolve));
  });

  test('a pipelined request held while the queue is full is parsed as sent, after other connections read', async () => {
    const held = await open(port);
    // The queue holds two: the third request waits, unparsed, in the connection's stash.
    held.socket.write(get('/delay/200') + get('/delay/1') + get('/held-aaaaaaaa', 'Connection: close\r\n'));
    await pause(50);
    assert.deepEqual(seen.slice(-2), ['/delay/200', '/delay/1']);
    // Another connection's reads land in the shared buffer meanwhile, longer than the held bytes.
    for (let i = 0; i < 3; i++) {
      const other = await open(port);
      other.socket.write(get(`/other-${'b'.repeat(400)}`, 'Connection: close\r\n'));
      await other.ended;
      other.socket.destroy();
    }
    await held.ended;
    held.socket.destroy();
    assert.equal(seen.at(-1), '/held-aaaaaaaa');
    assert.deepEqual([...held.text().matchAll(/X-Target: (\S+)/g)].map((match) => match[1]), ['/delay/200', '/delay/1', '/held-aaaaaaaa']);
  });

  test('a preface that comes in pieces is read whole, after other connections read', async () => {
    const slow = await open(port);
    slow.socket.write(`${PREFIX}aaaa`);
    await pause(30);
    const other = await open(port);
    other.socket.write(`${PREFIX}bbbbbbbbbbbbbbbb`);
    await pause(30);
    slow.socket.write(`cccc\n${get('/after-preface', 'Connection: close\r\n')}`);
    await slow.ended;
    slow.socket.destroy();
    other.socket.destroy();
    assert.ok(prefaces.includes('aaaacccc'), `the preface as sent, got ${JSON.stringify(prefaces)}`);
    assert.match(slow.text(), /X-Target: \/after-preface/);
  });

  test('an upgrade hands over the bytes after its head, and later reads go to the new owner intact', async () => {
    const upgraded = await open(port);
    upgraded.socket.write(`${get('/upgrade', 'Connection: Upgrade\r\nUpgrade: test\r\n')}early-dddd`);
    await pause(30);
    upgraded.socket.write('later-ffff');
    await pause(30);
    const other = await open(port);
    other.socket.write(get(`/other-${'e'.repeat(400)}`, 'Connection: close\r\n'));
    await other.ended;
    other.socket.destroy();
    upgraded.socket.end();
    await upgraded.ended;
    upgraded.socket.destroy();
    assert.equal(upgraded.text(), 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\nearly-dddd;later-ffff');
  });
});
