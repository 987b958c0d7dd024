/**
 * Micro-benchmark of the client's request build (tinybench): what the tunnel client does between an OPEN
 * frame arriving and the local hop taking the request: decode the frame, pick the local port by route, make
 * the stream, filter the headers and start the exchange. The local hop's pool is replaced by one that
 * takes the request and does nothing, so the numbers are the client's own work, not the local round trip
 * (bench/client/local-hop.ts measures the local hop itself).
 * Also the response side's build: a small local response turned into one RESPONSE frame.
 *
 * Run: npx tsc -p . && node dist/bench/client/request.bench.js [--time MS]
 */
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { ClientHttpStream } from '../../src/client/http-stream.js';
import type { TargetPool } from '../../src/client/local-hop/pool.js';
import type { MessageHead } from '../../src/http1/parser.js';
import { RouteTable } from '../../src/client/routes.js';
import type { FlushableStream, StreamHost } from '../../src/client/stream-host.js';
import type { Exchange } from '../../src/client/exchange.js';
import { decode, encode, type OpenFrame } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType } from '../../src/protocol/constants.js';
import { SendCredit } from '../../src/protocol/flow.js';
import { printBenchTable } from '../micro-table.js';

const { values } = parseArgs({ options: { time: { type: 'string', default: '1000' } } });
const time = Number(values.time);

const body = Buffer.alloc(1024, 0x61);
const headers = [
  'host', 'quiet-river-42.localhost:8080',
  'user-agent', 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
  'content-type', 'application/json; charset=utf-8',
  'content-length', '1024',
  'accept', '*/*; q=0.5, application/xml',
  'stripe-signature', 't=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd',
  'x-forwarded-for', '54.187.174.169',
  'x-forwarded-proto', 'https',
  'x-forwarded-host', 'quiet-river-42.localhost:8080',
];
const openMessage = encode([FrameType.OPEN, 7, 'req_00000001000000000029', 'POST', '/webhooks/stripe?attempt=1', headers, '54.187.174.169', body, true, false]);

let taken = 0;
const sink = { request: () => ((taken += 1), null) } as unknown as TargetPool;
let sent = 0;
const host: StreamHost = {
  settings: DEFAULT_SETTINGS,
  routes: new RouteTable(3000, [{ prefix: '/api', port: 4000 }, { prefix: '/webhooks/github', port: 5000 }]),
  hostHeader: 'keep',
  recordLimit: 0,
  connectionSend: new SendCredit(2 ** 30),
  blocked: new Set<FlushableStream>(),
  observed: false,
  pool: () => sink,
  send: (frame: Buffer) => {
    sent += frame.byteLength;
  },
  // The response builds below end in the turn they start: nothing is left for the turn's end.
  atTurnEnd: () => {},
  consumedConnection: () => {},
  endStream: () => {},
  count: () => {},
  record: (_exchange: Exchange) => {},
  protocolError: (message: string) => {
    throw new Error(message);
  },
};

const responseHead = {
  status: 200,
  reason: 'OK',
  fields: ['Content-Type', 'application/json', 'Content-Length', '16', 'Date', 'Sat, 21 Nov 2026 20:44:29 GMT', 'Connection', 'keep-alive', 'Keep-Alive', 'timeout=5'],
} as MessageHead;
const responseBody = Buffer.from('{"received":true}');

const bench = new Bench({ time, warmupTime: Math.min(250, time) });
bench.add('request build: OPEN 1 KiB decoded to a local hop request', () => {
  const frame = decode(Buffer.from(openMessage)) as OpenFrame;
  const [, id, requestId, method, path, list, clientAddress, inline, end, upgrade] = frame;
  const stream = new ClientHttpStream(id, host, { requestId, method, path, headers: list, clientAddress, replayOf: null, upgrade });
  stream.start(inline, end);
});
bench.add('response build: small local answer to one RESPONSE frame', () => {
  const stream = new ClientHttpStream(9, host, { requestId: 'req_1', method: 'GET', path: '/', headers: [], clientAddress: '127.0.0.1', replayOf: null, upgrade: false });
  stream.onHead(responseHead, 1, 16);
  stream.onBody(responseBody);
  stream.onEnd();
});

await bench.run();
printBenchTable('client request build', bench, `${time} ms per task; the local hop replaced by a no-op pool (${taken} requests, ${sent} bytes framed)`);
