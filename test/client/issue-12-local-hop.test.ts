/**
 * Issue 12, finding 1: the local hop survives any local server behaviour. Each case's local server
 * misbehaves (or behaves unusually) in one way; the stream must end with the right bytes or with a
 * RESET, never with a short body marked whole, and the next request on the tunnel must work.
 * The real client against a frame-level edge (frame-edge.ts) that grants credit a turn late, so big
 * bodies pause undici the way a real public reader does.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { ResetCode } from '../../src/protocol/constants.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { FrameEdge, header } from './frame-edge.js';
import { OK, startRawLocal, type RawLocal, type Script } from './raw-local.js';

const BIG = randomBytes(3_000_000);
const SMALL = randomBytes(1000);

function head(lines: string[]): string {
  return `${lines.join('\r\n')}\r\n\r\n`;
}

interface Case {
  name: string;
  script: Script;
  expect: { ending: 'end'; status: number; body: Buffer; absent?: string[] } | { ending: 'reset' };
}

const CASES: Case[] = [
  {
    name: 'Connection: close after a big response with Content-Length',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'connection: close', `content-length: ${BIG.length}`])), BIG])), 'done'),
    expect: { ending: 'end', status: 200, body: BIG },
  },
  {
    name: 'a big close-delimited body (no length, Connection: close)',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'connection: close'])), BIG])), 'done'),
    expect: { ending: 'end', status: 200, body: BIG },
  },
  {
    name: 'an HTTP/1.0 response, close-delimited (python http.server style)',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.0 200 OK', 'server: SimpleHTTP/0.6'])), BIG])), 'done'),
    expect: { ending: 'end', status: 200, body: BIG },
  },
  {
    name: 'half-close right after a whole keep-alive response',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', `content-length: ${BIG.length}`])), BIG])), 'done'),
    expect: { ending: 'end', status: 200, body: BIG },
  },
  {
    name: 'a reset in the middle of a Content-Length body',
    script: (s) => {
      s.write(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', `content-length: ${BIG.length}`])), BIG.subarray(0, 1_000_000)]), () => setTimeout(() => s.resetAndDestroy(), 20));
      return 'done';
    },
    expect: { ending: 'reset' },
  },
  {
    name: 'a reset in the middle of a chunked body',
    script: (s) => {
      s.write(`${head(['HTTP/1.1 200 OK', 'transfer-encoding: chunked'])}${(1_000_000).toString(16)}\r\n`);
      s.write(BIG.subarray(0, 500_000), () => setTimeout(() => s.resetAndDestroy(), 20));
      return 'done';
    },
    expect: { ending: 'reset' },
  },
  {
    name: 'Content-Length longer than the body, big (the connection closes early)',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', `content-length: ${BIG.length + 1000}`])), BIG])), 'done'),
    expect: { ending: 'reset' },
  },
  {
    name: 'Content-Length longer than the body, small (the one-frame path)',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'content-length: 2000'])), SMALL])), 'done'),
    expect: { ending: 'reset' },
  },
  {
    name: 'Content-Length shorter than the body: exactly the declared bytes, as direct',
    script: (s) => (s.write(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'content-length: 600'])), SMALL])), 'keep'),
    expect: { ending: 'end', status: 200, body: SMALL.subarray(0, 600) },
  },
  {
    name: 'a chunked body cut short by the end of the connection',
    script: (s) => (s.end(`${head(['HTTP/1.1 200 OK', 'transfer-encoding: chunked'])}64\r\nonly part of it`), 'done'),
    expect: { ending: 'reset' },
  },
  {
    // undici refuses any 100 it did not ask for (it never sends Expect; the edge answers the public
    // client's Expect itself), so an unrequested 100 fails the stream cleanly; docs/protocol.md says so.
    name: 'an unrequested 100 Continue before the final status: a clean RESET',
    script: (s) => (s.write(`HTTP/1.1 100 Continue\r\n\r\n${head(['HTTP/1.1 201 Created', 'content-length: 2'])}hi`), 'keep'),
    expect: { ending: 'reset' },
  },
  {
    // With no length, only the kind of ending tells a cut body from a whole one: a reset the kernel
    // reports as ECONNRESET is an error (undici alone would take it for the end, as on macOS).
    name: 'a reset in the middle of a close-delimited body',
    script: (s) => {
      s.write(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'connection: close'])), SMALL]), () => setTimeout(() => s.resetAndDestroy(), 50));
      return 'done';
    },
    expect: { ending: 'reset' },
  },
  {
    name: '103 Early Hints before the final status (its headers stay out of the final ones)',
    script: (s) => (s.write(`${head(['HTTP/1.1 103 Early Hints', 'link: </style.css>; rel=preload'])}${head(['HTTP/1.1 200 OK', 'content-length: 2'])}hi`), 'keep'),
    expect: { ending: 'end', status: 200, body: Buffer.from('hi'), absent: ['link'] },
  },
  {
    name: 'trailers after a chunked body',
    script: (s) => (s.write(`${head(['HTTP/1.1 200 OK', 'transfer-encoding: chunked', 'trailer: x-checksum'])}5\r\nhello\r\n0\r\nx-checksum: abc\r\n\r\n`), 'keep'),
    expect: { ending: 'end', status: 200, body: Buffer.from('hello'), absent: ['x-checksum'] },
  },
  {
    name: 'a status line that is not HTTP',
    script: (s) => (s.end('SSH-2.0-OpenSSH_9.6\r\n'), 'done'),
    expect: { ending: 'reset' },
  },
];

let edge: FrameEdge;
let local: RawLocal;
let client: TunnelClient;

before(async () => {
  const scripts: Record<string, Script> = { '/ok': OK };
  CASES.forEach((entry, index) => (scripts[`/case-${index}`] = entry.script));
  local = await startRawLocal(scripts);
  edge = await FrameEdge.start();
  // A public reader slower than the local server: undici is paused often, also when the socket ends.
  edge.creditDelayMs = 1;
  edge.streamWindow = 16 * 1024;
  client = await edge.client(local.port);
});

after(async () => {
  await client.close();
  await edge.close();
  await local.close();
});

CASES.forEach((entry, index) => {
  test(`local hop: ${entry.name}`, { timeout: 30_000 }, async () => {
    const result = await edge.request('GET', `/case-${index}`, ['host', 'frames.localhost']);
    if (entry.expect.ending === 'reset') {
      assert.equal(result.ending, 'reset', `a RESET, not a response marked whole (got ${result.body.length} bytes, status ${result.status})`);
      assert.ok(result.resetCode === ResetCode.LOCAL_ERROR || result.resetCode === ResetCode.LOCAL_UNREACHABLE, `reset code ${result.resetCode}`);
      assert.match(result.resetMessage, /local server at http:\/\/localhost:\d+: /);
    } else {
      assert.equal(result.ending, 'end', `ended whole, not reset: ${result.resetMessage}`);
      assert.equal(result.status, entry.expect.status);
      assert.equal(result.body.length, entry.expect.body.length);
      assert.ok(result.body.equals(entry.expect.body), 'the same bytes');
      for (const name of entry.expect.absent ?? []) assert.equal(header(result.headers, name), undefined, `${name} is not a final header`);
    }
    // The tunnel is still up and the next request works.
    const next = await edge.request('GET', '/ok', ['host', 'frames.localhost']);
    assert.equal(next.ending, 'end');
    assert.equal(next.body.toString(), 'ok');
    assert.ok(client.connected, 'the tunnel is still connected');
  });
});
