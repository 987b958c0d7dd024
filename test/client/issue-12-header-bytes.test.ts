/**
 * Issue 12, finding 5 (client side): header values are bytes. Inside a frame a header value is a
 * string with one char per byte (latin1); the client must read the local server's bytes that way and
 * write the edge's values to the local server byte for byte. The real client against a frame-level edge
 * and a byte-level local server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from '../helpers.js';
import { FrameEdge, header } from './frame-edge.js';
import { startRawLocal } from './raw-local.js';

const RESUME_UTF8 = Buffer.from('attachment; filename="résumé.pdf"', 'utf8');

test('response header bytes reach the RESPONSE frame exactly: a raw Latin-1 byte and UTF-8 bytes', async () => {
  const local = await startRawLocal({
    '/bytes': (socket) => {
      socket.write(
        Buffer.concat([
          Buffer.from('HTTP/1.1 200 OK\r\nX-Word: caf'),
          Buffer.from([0xe9]),
          Buffer.from('\r\nContent-Disposition: '),
          RESUME_UTF8,
          Buffer.from('\r\ncontent-length: 2\r\n\r\nok'),
        ]),
      );
      return 'keep';
    },
  });
  const edge = await FrameEdge.start();
  const client = await edge.client(local.port);
  try {
    const result = await edge.request('GET', '/bytes', ['host', 'frames.localhost']);
    assert.equal(result.status, 200);
    assert.deepEqual(Buffer.from(header(result.headers, 'x-word')!, 'latin1'), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    assert.deepEqual(Buffer.from(header(result.headers, 'content-disposition')!, 'latin1'), RESUME_UTF8);
  } finally {
    await client.close();
    await edge.close();
    await local.close();
  }
});

test('request header values from the edge reach the local server byte for byte', async () => {
  const local = await startRawLocal({
    '/bytes': (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      return 'keep';
    },
  });
  const edge = await FrameEdge.start();
  const client = await edge.client(local.port);
  try {
    const utf8 = Buffer.from('café ✓', 'utf8').toString('latin1');
    const result = await edge.request('GET', '/bytes', ['host', 'frames.localhost', 'x-word', utf8, 'x-latin', 'caf\xe9', 'x-check', '\u2713']);
    // A value with a char above 0xFF breaks the convention: the stream fails cleanly, the tunnel stays.
    assert.equal(result.ending, 'reset');
    const good = await edge.request('GET', '/bytes', ['host', 'frames.localhost', 'x-word', utf8, 'x-latin', 'caf\xe9']);
    assert.equal(good.status, 200);
    const head = local.heads.at(-1)!;
    assert.ok(head.includes(Buffer.concat([Buffer.from('x-word: '), Buffer.from('café ✓', 'utf8'), Buffer.from('\r\n')])), head.toString('latin1'));
    assert.ok(head.includes(Buffer.concat([Buffer.from('x-latin: caf'), Buffer.from([0xe9]), Buffer.from('\r\n')])), head.toString('latin1'));
  } finally {
    await client.close();
    await edge.close();
    await local.close();
  }
});

test('an upgrade whose header is not bytes (a character above \\xFF) fails alone: the tunnel stays up', async () => {
  const local = await startRawLocal({
    '/bytes': (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      return 'keep';
    },
  });
  const edge = await FrameEdge.start();
  const client = await edge.client(local.port);
  try {
    const id = edge.openUpgrade('/live', ['host', 'frames.localhost', 'x-check', '\u2713', 'Upgrade', 'websocket', 'Connection', 'Upgrade']);
    await waitFor(() => edge.resets.has(id), 5_000, 'the RESET');
    assert.match(edge.resets.get(id)![1], /^request to local server at http:\/\/localhost:\d+: .*a character above U\+00FF/);
    const after = await edge.request('GET', '/bytes', ['host', 'frames.localhost']);
    assert.equal(after.status, 200);
    assert.ok(client.connected);
  } finally {
    await client.close();
    await edge.close();
    await local.close();
  }
});
