/**
 * The capture of an upload larger than one frame, now that the edge keeps views of the DATA frames its
 * bytes went out in and the copy of the bytes that waited for credit, instead of a second copy of every
 * chunk. Each case checks the captured body byte for byte (text whose every line says where it is,
 * so a piece out of place shows) against what the local server read: a Content-Length body too big for
 * OPEN, a chunked one, both with a stream window small enough that most of the body waits for credit,
 * and one cut by the capture limit in the middle of a frame.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { call, createAccount, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const CAPTURE_LIMIT = 300 * 1024;

let target: TestEdge;
let owner: TestAccount;
let local: LocalServer;
let started: Awaited<ReturnType<typeof startClient>>;
const received = new Map<string, Buffer>();

/** `size` bytes of numbered lines. */
function numbered(size: number): Buffer {
  let text = '';
  for (let line = 0; text.length < size; line++) text += `line ${String(line).padStart(7, '0')} of the upload\n`;
  return Buffer.from(text.slice(0, size));
}

before(async () => {
  target = await startEdge({ captureBodyLimit: CAPTURE_LIMIT, settings: { streamWindow: 32 * 1024, maxFrameBody: 16 * 1024 } });
  owner = await createAccount(target, 'PRO');
  local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      received.set(req.url!, body);
      res.end(`read ${body.byteLength}`);
    });
  });
  started = await startClient(target, owner.token, local.port);
});

after(async () => {
  await started.client.close();
  await local.close();
  await target.close();
});

async function captureOf(path: string): Promise<{ body: string; body_size: number; truncated: boolean }> {
  let found: { id: string } | undefined;
  await waitFor(async () => {
    const list = await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}&limit=20`, { token: owner.token });
    found = (list.json.requests as { id: string; path: string }[]).find((entry) => entry.path === path);
    return found !== undefined;
  }, 5_000, `the capture of ${path}`);
  const detail = await call(target, 'GET', `/api/v1/requests/${found!.id}`, { token: owner.token });
  assert.equal(detail.status, 200);
  return detail.json.request;
}

/** A chunked upload in pieces of `piece` bytes, from a raw socket. */
async function chunkedUpload(path: string, body: Buffer, piece: number): Promise<string> {
  const socket = connect(target.port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let answer = '';
  socket.setEncoding('latin1');
  socket.on('data', (text: string) => {
    answer += text;
  });
  socket.write(`POST ${path} HTTP/1.1\r\nHost: ${started.host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
  for (let offset = 0; offset < body.byteLength; offset += piece) {
    const part = body.subarray(offset, Math.min(offset + piece, body.byteLength));
    socket.write(`${part.byteLength.toString(16)}\r\n`);
    socket.write(part);
    socket.write('\r\n');
  }
  socket.write('0\r\n\r\n');
  await new Promise((resolve) => socket.once('close', resolve));
  return answer;
}

/** The local server read `body` whole, and the capture holds its first CAPTURE_LIMIT bytes, flagged when cut. */
async function assertCaptured(path: string, body: Buffer): Promise<void> {
  assert.deepEqual(received.get(path), body);
  const capture = await captureOf(path);
  assert.equal(capture.body, body.subarray(0, CAPTURE_LIMIT).toString());
  assert.equal(capture.body_size, body.byteLength);
  assert.equal(capture.truncated, body.byteLength > CAPTURE_LIMIT);
}

test('a Content-Length upload too big for OPEN is captured whole and in order', async () => {
  const body = numbered(200 * 1024);
  const response = await call(target, 'POST', '/length', { host: started.host, rawBody: body });
  assert.equal(response.text, `read ${body.byteLength}`);
  await assertCaptured('/length', body);
});

test('a chunked upload, mostly waiting for credit, is captured whole and in order', async () => {
  const body = numbered(250 * 1024);
  assert.match(await chunkedUpload('/chunked', body, 10_000), /^HTTP\/1\.1 200 /);
  await assertCaptured('/chunked', body);
});

test('an upload over the capture limit is captured up to it, cut inside a frame, and flagged', async () => {
  const body = numbered(CAPTURE_LIMIT + 50_000);
  assert.match(await chunkedUpload('/over', body, 7_000), /^HTTP\/1\.1 200 /);
  await assertCaptured('/over', body);
});
