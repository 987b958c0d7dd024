/**
 * HTTPS connections read into the public listener's shared buffer (src/http1/server.ts,
 * `withSharedTlsReads`), as plain ones do: the TLS handle decrypts each record into that buffer and the
 * connection parses it there, copying only what it keeps past the read. Checked with real TLS against an
 * in-process edge and a real client: a head and body that arrive one byte per TLS record, pipelined
 * requests in one record, more pipelined requests than the edge queues (the rest of the read kept while
 * another connection's read lands in the same buffer), and uploads of 4 MiB on two connections at once that a slow local server makes
 * the edge stop reading and start again; each answer the same, byte for byte, as the local server gives directly. The Node
 * internals the step uses are pinned: on this Node the fields are found (else TLS reads fall back to
 * 'data' events, which these cases would not tell apart).
 */
import '../wildcard-dns.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { Agent, request } from 'undici';
import { TLS_SHARED_READS } from '../../src/http1/server.js';
import { startClient, startEdge, startLocal, tempDirs } from '../helpers.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const freshDir = tempDirs('burrow-tls-reads-');

/** Answers with what it was sent: method, target, body length and SHA-256; reads slowly under `/slow`. */
function echoDigest(req: IncomingMessage, res: ServerResponse): void {
  const hash = createHash('sha256');
  let length = 0;
  req.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    length += chunk.length;
    if (req.url === '/slow') {
      req.pause();
      setTimeout(() => req.resume(), 2);
    }
  });
  req.on('end', () => {
    res.setHeader('content-type', 'text/plain');
    const text = `${req.method} ${req.url} ${length} ${hash.digest('hex')}`;
    // Answers under /wait/ take a while: a connection's pipelined requests queue up at the edge meanwhile.
    if (req.url?.startsWith('/wait/') === true) setTimeout(() => res.end(text), 5);
    else res.end(text);
  });
}

/** Reads from a TLS socket until `count` answers with content-length have arrived; their bodies. */
async function readAnswers(socket: TLSSocket, count: number): Promise<string[]> {
  let text = '';
  const bodies: string[] = [];
  for await (const chunk of socket) {
    text += (chunk as Buffer).toString('latin1');
    for (;;) {
      const headEnd = text.indexOf('\r\n\r\n');
      if (headEnd === -1) break;
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, headEnd))?.[1]);
      if (text.length < headEnd + 4 + length) break;
      bodies.push(text.slice(headEnd + 4, headEnd + 4 + length));
      text = text.slice(headEnd + 4 + length);
    }
    if (bodies.length === count) break;
  }
  return bodies;
}

test('HTTPS reads in the shared buffer: one byte a record, pipelined requests, more than the queue holds beside another connection, 4 MiB uploads under backpressure; answers as direct', async () => {
  assert.equal(TLS_SHARED_READS, true, "this Node's onread fields (kBuffer, kBufferCb, kBufferGen) were not found");
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const caPem = readFileSync(ca.cert, 'utf8');
  const target = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key } });
  const local = await startLocal(echoDigest);
  const trust = new Agent({ connect: { ca: caPem } });
  const { token } = await target.edge.store.createAccount('tls-reads@example.test', 'FREE', 'test');
  const { client, subdomain } = await startClient(target, token.token, local.port, { edge: `https://${TEST_DOMAIN}:${target.port}`, ca: Buffer.from(caPem) });
  const host = `${subdomain}.${TEST_DOMAIN}`;
  const direct = async (method: string, path: string, body?: Buffer): Promise<string> => (await request(`http://127.0.0.1:${local.port}${path}`, { method, body })).body.text();
  const open = async (): Promise<TLSSocket> => {
    const socket = tlsConnect({ host: '127.0.0.1', port: target.port, servername: host, ca: caPem });
    await once(socket, 'secureConnect');
    socket.setNoDelay(true);
    return socket;
  };
  try {
    // A request whose every byte is a TLS record of its own: the head is parsed across reads.
    const body = Buffer.from('x'.repeat(300));
    const single = await open();
    const whole = Buffer.concat([Buffer.from(`POST /bytes?a=1 HTTP/1.1\r\nHost: ${host}\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
    const answer = readAnswers(single, 1);
    for (const byte of whole) {
      single.write(Buffer.of(byte));
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.deepEqual(await answer, [await direct('POST', '/bytes?a=1', body)]);
    single.destroy();

    // Three requests in one record, answered in order.
    const piped = await open();
    const three = readAnswers(piped, 3);
    piped.write(`GET /one HTTP/1.1\r\nHost: ${host}\r\n\r\nPOST /two HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 5\r\n\r\nhelloGET /three HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    assert.deepEqual(await three, [await direct('GET', '/one'), await direct('POST', '/two', Buffer.from('hello')), await direct('GET', '/three')]);
    piped.destroy();

    // 40 requests in one record: the edge queues 16 and keeps the rest of the read while their answers
    // wait; meanwhile another connection's 4 KB request lands in the same shared buffer over those bytes.
    const queued = await open();
    const forty = readAnswers(queued, 40);
    queued.write(Array.from({ length: 40 }, (_, i) => `GET /wait/${i} HTTP/1.1\r\nHost: ${host}\r\n\r\n`).join(''));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const other = await open();
    const otherAnswer = readAnswers(other, 1);
    const otherBody = Buffer.alloc(4096, 0x6f);
    other.write(Buffer.concat([Buffer.from(`POST /other HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${otherBody.length}\r\n\r\n`), otherBody]));
    assert.deepEqual(await otherAnswer, [await direct('POST', '/other', otherBody)]);
    const expected = await Promise.all(Array.from({ length: 40 }, (_, i) => direct('GET', `/wait/${i}`)));
    assert.deepEqual(await forty, expected);
    queued.destroy();
    other.destroy();

    // 4 MiB on each of two connections at once, to a local server that reads a chunk every 2 ms: the edge
    // stops reading each TLS socket and resumes, and bytes it read before a pause wait while the other
    // connection's reads pass through the same buffer.
    const uploads = [31, 57].map((step) => {
      const upload = Buffer.alloc(4 * 1024 * 1024);
      for (let i = 0; i < upload.length; i++) upload[i] = (i * step) & 0xff;
      return upload;
    });
    const answers = await Promise.all(
      uploads.map(async (upload) => {
        const answer = await request(`https://${host}:${target.port}/slow`, { method: 'POST', body: upload, dispatcher: trust });
        assert.equal(answer.statusCode, 200);
        return answer.body.text();
      }),
    );
    assert.deepEqual(answers, [await direct('POST', '/slow', uploads[0]), await direct('POST', '/slow', uploads[1])]);
  } finally {
    await client.close();
    await trust.close();
    await local.close();
    await target.close();
  }
});
