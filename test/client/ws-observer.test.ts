/**
 * The inspector's read-only WebSocket view, fed the bytes real `ws` peers exchange. A relay plays the
 * tunnel client: it takes the public client's upgrade, sends it through the local hop as one handshake
 * to a `ws` server, answers the client with the server's 101 as sent, then passes bytes both ways
 * untouched while a WsObserver reads them. With and without permessage-deflate (context kept, and not),
 * the observed messages are the ones the peers sent: text and binary, 7/16/64-bit lengths, fragments,
 * pings, the close code and reason; a message over the cap is cut with its real length. Then frames
 * fed one byte at a time, and compressed bytes that do not inflate.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { constants as zlib, deflateRawSync as deflateRaw } from 'node:zlib';
import { after, describe, test } from 'node:test';
import { WebSocket, WebSocketServer, type PerMessageDeflateOptions } from 'ws';
import { LocalHop } from '../../src/client/local-hop/pool.js';
import type { LocalResponseHandler } from '../../src/client/local-hop/exchange.js';
import { negotiatedDeflate, WsFrameReader, WsObserver, WsOpcode, type ObservedWsMessage } from '../../src/client/ws-observer.js';
import { responseHead } from '../../src/http1/head.js';
import { ALL, Http1Parser, MessageKind, type MessageHead } from '../../src/http1/parser.js';
import { localTarget } from '../../src/client/routes.js';
import { waitFor } from '../helpers.js';

const CAP = 4096;

interface Observed {
  direction: 'in' | 'out';
  message: ObservedWsMessage;
}

/** The relay: public client ↔ (local hop) ↔ local `ws` server, observed. */
async function startRelay(localPort: number, observed: Observed[]): Promise<{ port: number; close(): Promise<void> }> {
  const target = localTarget(localPort, '127.0.0.1');
  const hop = new LocalHop([target]);
  const sockets = new Set<Socket | Duplex>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('error', () => {});
    let request: MessageHead | null = null;
    const parser = new Http1Parser(MessageKind.REQUEST, {
      onHead: (head) => ((request = head), true),
      onBody: () => {},
      onTrailers: () => {},
      onComplete: () => {},
    });
    const onData = (chunk: Buffer): void => {
      const result = parser.execute(chunk);
      if (result === ALL || typeof result !== 'number' || request === null) return;
      client.removeListener('data', onData);
      client.pause();
      parser.close();
      const early = chunk.subarray(result);
      const head = request as MessageHead;
      const handler: LocalResponseHandler = {
        onInterim: () => {},
        onHead: (refusal) => client.write(responseHead(refusal.status, refusal.reason, refusal.fields), 'latin1'),
        onBody: (body) => client.write(body),
        onTrailers: () => {},
        onEnd: () => client.end(),
        onError: () => client.destroy(),
        onRequestDrain: () => {},
        onUpgrade: (answer, local, leftover) => {
          sockets.add(local);
          local.on('error', () => {});
          client.write(responseHead(answer.status, answer.reason, answer.fields), 'latin1');
          const observer = new WsObserver(answer.fields, CAP, (direction, message) => observed.push({ direction, message }));
          const passOut = (bytes: Buffer): void => {
            observer.fromServer.push(bytes);
            client.write(bytes);
          };
          if (leftover.length > 0) passOut(leftover);
          local.on('data', passOut);
          client.on('data', (bytes: Buffer) => {
            observer.fromClient.push(bytes);
            local.write(bytes);
          });
          if (early.length > 0) {
            observer.fromClient.push(early);
            local.write(early);
          }
          local.on('end', () => client.end());
          client.on('end', () => local.end());
          local.on('close', () => observer.close());
          local.resume();
          client.resume();
        },
      };
      hop.pool(target).request({ method: head.method, target: head.target, fields: head.fields, upgrade: true }, null, true, handler);
    };
    client.on('data', onData);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      hop.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

interface Peers {
  client: WebSocket;
  local: WebSocket;
  localReceived: { data: Buffer; binary: boolean }[];
  clientReceived: { data: Buffer; binary: boolean }[];
  observed: Observed[];
  /** The local server's 101, as it wrote it. */
  answer: string[];
  close(): Promise<void>;
}

async function connect(deflate: PerMessageDeflateOptions | false): Promise<Peers> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: deflate });
  await once(wss, 'listening');
  const observed: Observed[] = [];
  const answer: string[] = [];
  wss.on('headers', (lines: string[]) => answer.push(...lines));
  const relay = await startRelay((wss.address() as AddressInfo).port, observed);
  const localReceived: { data: Buffer; binary: boolean }[] = [];
  const clientReceived: { data: Buffer; binary: boolean }[] = [];
  const accepted = once(wss, 'connection') as Promise<[WebSocket]>;
  const client = new WebSocket(`ws://127.0.0.1:${relay.port}/live`, { perMessageDeflate: deflate === false ? false : { threshold: 0 } });
  client.on('message', (data: Buffer, binary: boolean) => clientReceived.push({ data, binary }));
  await once(client, 'open');
  const [local] = await accepted;
  local.on('message', (data: Buffer, binary: boolean) => localReceived.push({ data, binary }));
  return {
    client,
    local,
    localReceived,
    clientReceived,
    observed,
    answer,
    async close() {
      client.terminate();
      await relay.close();
      await new Promise((resolve) => wss.close(resolve));
    },
  };
}

const TEXT_SMALL = 'hello, tunnel';
const TEXT_16 = 'sixteen-bit length '.repeat(20);
const BINARY_64 = randomBytes(70_000);
const TEXT_BIG = 'a compressible line of text\n'.repeat(10_000);

/** Each peer sends its messages, the observer sees them in order, as the peers received them. */
async function exchangeMessages(peers: Peers, compressed: boolean): Promise<void> {
  const { client, local, observed } = peers;
  client.send(TEXT_SMALL);
  client.send(TEXT_16);
  // The same text again: with context takeover it compresses to references into the previous message.
  client.send(TEXT_16);
  client.send(BINARY_64);
  client.send('first fragment, ', { fin: false });
  client.send('second fragment', { fin: true });
  client.ping(Buffer.from('are you there'));
  local.send(TEXT_BIG);
  local.send(Buffer.from([1, 2, 3]));
  await waitFor(() => peers.localReceived.length === 5 && peers.clientReceived.length === 2, 10_000, 'the messages');
  local.close(4001, 'bye for now');
  await waitFor(() => observed.filter((entry) => entry.message.opcode === WsOpcode.CLOSE).length === 2, 10_000, 'both close frames observed');

  const inbound = observed.filter((entry) => entry.direction === 'in').map((entry) => entry.message);
  const outbound = observed.filter((entry) => entry.direction === 'out').map((entry) => entry.message);
  assert.deepEqual(inbound.map((message) => message.opcode), [1, 1, 1, 2, 1, 9, 8]);
  assert.deepEqual(outbound.map((message) => message.opcode), [1, 2, 10, 8]);

  const [small, sixteen, again, binary, fragmented, ping, clientClose] = inbound as [ObservedWsMessage, ObservedWsMessage, ObservedWsMessage, ObservedWsMessage, ObservedWsMessage, ObservedWsMessage, ObservedWsMessage];
  assert.equal(again.data.toString(), TEXT_16);
  assert.equal(small.data.toString(), TEXT_SMALL);
  assert.equal(small.truncated, false);
  assert.equal(sixteen.data.toString(), TEXT_16);
  assert.equal(binary.size, BINARY_64.length, 'the real length of a message over the cap');
  assert.equal(binary.truncated, true);
  assert.ok(binary.data.equals(BINARY_64.subarray(0, CAP)), 'the first cap bytes, unmasked');
  assert.equal(fragmented.data.toString(), 'first fragment, second fragment');
  assert.equal(fragmented.frames, 2);
  assert.equal(ping.data.toString(), 'are you there');
  assert.equal(ping.compressed, false, 'control frames are never compressed');
  assert.equal(clientClose.closeCode, 4001, 'the client echoes the close code');

  const [big, bytes, pong, serverClose] = outbound as [ObservedWsMessage, ObservedWsMessage, ObservedWsMessage, ObservedWsMessage];
  assert.equal(pong.data.toString(), 'are you there', "the local server's pong");
  assert.equal(big.size, TEXT_BIG.length);
  assert.equal(big.data.toString(), TEXT_BIG.slice(0, CAP));
  assert.equal(big.truncated, true);
  assert.deepEqual([...bytes.data], [1, 2, 3]);
  assert.equal(serverClose.closeCode, 4001);
  assert.equal(serverClose.closeReason, 'bye for now');

  for (const message of [small, sixteen, again, binary, fragmented, big, bytes]) {
    assert.equal(message.compressed, compressed, `compressed: ${message.data.subarray(0, 20).toString()}`);
    assert.equal(message.note, '');
  }
  if (compressed) assert.ok(big.wireSize < big.size / 10, `the wire carried ${big.wireSize} compressed bytes of ${big.size}`);
  else assert.equal(big.wireSize, big.size);

  // The traffic itself was never touched.
  assert.equal(peers.localReceived[0]!.data.toString(), TEXT_SMALL);
  assert.ok(peers.localReceived[3]!.data.equals(BINARY_64));
  assert.equal(peers.clientReceived[0]!.data.toString(), TEXT_BIG);
}

describe('real ws peers through the local hop, one handshake end to end', () => {
  const open: Peers[] = [];
  after(async () => {
    for (const peers of open) await peers.close();
  });

  test('without permessage-deflate', { timeout: 30_000 }, async () => {
    const peers = await connect(false);
    open.push(peers);
    await exchangeMessages(peers, false);
  });

  test('with permessage-deflate, each side keeping its context', { timeout: 30_000 }, async () => {
    const peers = await connect({ threshold: 0 });
    open.push(peers);
    assert.match(peers.client.extensions, /permessage-deflate/, 'negotiated end to end');
    assert.doesNotMatch(peers.answer.join('\n'), /no_context_takeover/);
    await exchangeMessages(peers, true);
  });

  test('with permessage-deflate and no context takeover either way', { timeout: 30_000 }, async () => {
    const peers = await connect({ threshold: 0, serverNoContextTakeover: true, clientNoContextTakeover: true, serverMaxWindowBits: 10 });
    open.push(peers);
    assert.match(peers.client.extensions, /permessage-deflate/, 'negotiated end to end');
    assert.match(peers.answer.join('\n'), /Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10/);
    await exchangeMessages(peers, true);
  });
});

describe('the frame reader alone', () => {
  /** Frames as a client sends them (masked), built by hand. */
  function frame(opcode: number, payload: Buffer, options: { fin?: boolean; rsv1?: boolean; mask?: boolean } = {}): Buffer {
    const fin = options.fin ?? true;
    const mask = options.mask ?? true;
    const first = (fin ? 0x80 : 0) | (options.rsv1 === true ? 0x40 : 0) | opcode;
    let header: Buffer;
    if (payload.length < 126) header = Buffer.from([first, (mask ? 0x80 : 0) | payload.length]);
    else if (payload.length < 65536) header = Buffer.from([first, (mask ? 0x80 : 0) | 126, payload.length >> 8, payload.length & 0xff]);
    else {
      header = Buffer.alloc(10);
      header[0] = first;
      header[1] = (mask ? 0x80 : 0) | 127;
      header.writeUInt32BE(Math.floor(payload.length / 2 ** 32), 2);
      header.writeUInt32BE(payload.length >>> 0, 6);
    }
    if (!mask) return Buffer.concat([header, payload]);
    const key = randomBytes(4);
    const masked = Buffer.from(payload.map((byte, i) => byte ^ key[i & 3]!));
    return Buffer.concat([header, key, masked]);
  }

  test('the same messages whatever the chunks: one byte at a time, or all at once; the input unchanged', () => {
    const stream = Buffer.concat([
      frame(WsOpcode.TEXT, Buffer.from('one')),
      frame(WsOpcode.BINARY, randomBytes(300), { fin: false }),
      frame(WsOpcode.PING, Buffer.from('between fragments')),
      frame(WsOpcode.CONTINUATION, randomBytes(70_000)),
      frame(WsOpcode.TEXT, Buffer.alloc(0)),
      frame(WsOpcode.CLOSE, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from('done ✓')])),
    ]);
    const copy = Buffer.from(stream);
    const whole: ObservedWsMessage[] = [];
    new WsFrameReader(CAP, null, (message) => whole.push(message)).push(stream);
    const bytewise: ObservedWsMessage[] = [];
    const reader = new WsFrameReader(CAP, null, (message) => bytewise.push(message));
    for (let i = 0; i < stream.length; i++) reader.push(stream.subarray(i, i + 1));
    assert.ok(stream.equals(copy), 'the bytes it read are as they were');
    assert.deepEqual(bytewise, whole);
    assert.deepEqual(whole.map((message) => [message.opcode, message.size, message.frames]), [[1, 3, 1], [9, 17, 1], [2, 70_300, 2], [1, 0, 1], [8, 10, 1]]);
    assert.equal(whole[4]!.closeCode, 1000);
    assert.equal(whole[4]!.closeReason, 'done ✓');
  });

  test('compressed bytes that do not inflate are shown as they are, with a note; the next message still reads', async () => {
    const messages: ObservedWsMessage[] = [];
    const reader = new WsFrameReader(CAP, { noContextTakeover: true, maxWindowBits: 15 }, (message) => messages.push(message));
    reader.push(frame(WsOpcode.TEXT, Buffer.from([0xff, 0xfe, 0xfd, 0xfc]), { rsv1: true }));
    reader.push(frame(WsOpcode.TEXT, Buffer.from('plain after it')));
    await waitFor(() => messages.length === 2, 5_000, 'both messages');
    assert.equal(messages[0]!.compressed, true);
    assert.deepEqual([...messages[0]!.data], [0xff, 0xfe, 0xfd, 0xfc]);
    assert.match(messages[0]!.note, /could not be inflated/);
    assert.equal(messages[1]!.data.toString(), 'plain after it');
  });

  test('with context takeover, a message after one that did not inflate is shown compressed too (its context is lost)', async () => {
    const messages: ObservedWsMessage[] = [];
    const reader = new WsFrameReader(CAP, { noContextTakeover: false, maxWindowBits: 15 }, (message) => messages.push(message));
    reader.push(frame(WsOpcode.BINARY, Buffer.from([0xff, 0xfe, 0xfd, 0xfc]), { rsv1: true }));
    await waitFor(() => messages.length === 1, 5_000, 'the first message');
    reader.push(frame(WsOpcode.TEXT, deflateRaw('later', { finishFlush: zlib.Z_SYNC_FLUSH }).subarray(0, -4), { rsv1: true }));
    await waitFor(() => messages.length === 2, 5_000, 'the second message');
    assert.match(messages[0]!.note, /could not be inflated/);
    assert.match(messages[1]!.note, /an earlier message of this direction could not be/);
    assert.equal(messages[1]!.compressed, true);
  });

  test('RSV1 without a negotiated permessage-deflate: shown as sent, with a note', () => {
    const messages: ObservedWsMessage[] = [];
    new WsFrameReader(CAP, null, (message) => messages.push(message)).push(frame(WsOpcode.TEXT, Buffer.from('xyz'), { rsv1: true, mask: false }));
    assert.equal(messages[0]!.data.toString(), 'xyz');
    assert.match(messages[0]!.note, /negotiated no permessage-deflate/);
  });

  test('bytes that are not frames stop the reader, which says why', () => {
    const reader = new WsFrameReader(CAP, null, () => {});
    reader.push(Buffer.from([0x83, 0x00]));
    assert.match(reader.stopped, /reserved opcode 3/);
  });

  test('the negotiated parameters are read from the 101 as sent', () => {
    assert.deepEqual(negotiatedDeflate(['Sec-WebSocket-Extensions', 'permessage-deflate; client_max_window_bits=10; Server_No_Context_Takeover']), {
      client: { noContextTakeover: false, maxWindowBits: 10 },
      server: { noContextTakeover: true, maxWindowBits: 15 },
    });
    assert.equal(negotiatedDeflate(['Upgrade', 'websocket']), null);
    assert.equal(negotiatedDeflate(['sec-websocket-extensions', 'x-other']), null);
  });
});
