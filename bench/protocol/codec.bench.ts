/**
 * Micro-benchmark of the frame codec (tinybench): encode and decode of the frames on the hot path.
 *   OPEN      a webhook: POST with ~10 headers and a 1 KiB JSON body inline (the fast path)
 *   RESPONSE  a small answer: 200, 3 headers, a short body, end=true
 *   DATA      a full 64 KiB body chunk (maxFrameBody)
 *   WINDOW    a credit grant
 * Decoding starts from an ArrayBuffer wrapped in a fresh Buffer each time, as the edge receives it.
 *
 * Run: npx tsc -p . && node dist/bench/protocol/codec.bench.js [--time MS]
 */
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { decode, encode, type Frame } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType } from '../../src/protocol/constants.js';
import { printBenchTable } from '../micro-table.js';

const { values } = parseArgs({ options: { time: { type: 'string', default: '1000' } } });
const time = Number(values.time);

const body1k = Buffer.from(JSON.stringify({ event: 'push', ref: 'refs/heads/main', payload: 'x'.repeat(960) }).slice(0, 1024));
const headers = [
  'host', 'quiet-river-42.burrow.example',
  'user-agent', 'GitHub-Hookshot/7c3b2f1',
  'content-type', 'application/json',
  'content-length', String(body1k.byteLength),
  'accept', '*/*',
  'x-github-event', 'push',
  'x-github-delivery', '72d3162e-cc78-11e3-81ab-4c9367dc0958',
  'x-hub-signature-256', 'sha256=d57c68ca6f92289e6987922ff26938930f6e66a2d161ef06abdf1859230aa23c',
  'x-forwarded-for', '192.30.252.44',
  'x-forwarded-proto', 'https',
  'x-forwarded-host', 'quiet-river-42.burrow.example',
];

const frames: [string, Frame][] = [
  ['OPEN 1 KiB, 11 headers', [FrameType.OPEN, 1, 'req_01HZX3K9Q2', 'POST', '/hooks/github', headers, '192.30.252.44', body1k, true, false]],
  ['RESPONSE small', [FrameType.RESPONSE, 1, 200, 'OK', ['content-type', 'application/json', 'x-request-id', 'abc123', 'cache-control', 'no-store'], Buffer.from('{"ok":true}'), true]],
  ['DATA 64 KiB', [FrameType.DATA, 3, Buffer.alloc(DEFAULT_SETTINGS.maxFrameBody, 0x61), false]],
  ['WINDOW', [FrameType.WINDOW, 3, 65_536]],
];

const bench = new Bench({ time, warmupTime: Math.min(250, time) });
let sink = 0;
for (const [name, frame] of frames) {
  bench.add(`encode ${name}`, () => {
    sink += encode(frame).byteLength;
  });
}
for (const [name, frame] of frames) {
  // A standalone ArrayBuffer holding exactly the message, as uWebSockets.js hands it over.
  const encoded = encode(frame);
  const message = encoded.buffer.slice(encoded.byteOffset, encoded.byteOffset + encoded.byteLength);
  bench.add(`decode ${name}`, () => {
    sink += decode(Buffer.from(message)).length;
  });
}

await bench.run();

const sizes = Object.fromEntries(frames.map(([name, frame]) => [name, encode(frame).byteLength]));

printBenchTable('frame codec', bench, `${time} ms per task; encoded sizes (bytes): ${JSON.stringify(sizes)}`);
if (sink === 0) console.log('(nothing was measured)');
