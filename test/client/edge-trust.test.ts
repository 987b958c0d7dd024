/**
 * The client never sends its token in clear text to an edge off this machine without --insecure
 * (issue 14): which names count as loopback (decided from the name, without DNS), the refusal before
 * any connection, and --insecure sending it anyway.
 */
import '../wildcard-dns.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { cleartextRefusal, isLoopbackHost } from '../../src/client/edge-trust.js';
import { runCli, tempDirs } from '../helpers.js';
import { wildcardDnsEnv } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const freshDir = tempDirs('burrow-edge-trust-');
const TOKEN = 'svc_pat_00000000_000000000000000000000000000000000000';

test('loopback is decided from the name alone', () => {
  const table: [string, boolean][] = [
    ['localhost', true],
    ['LOCALHOST', true],
    ['localhost.', true],
    ['edge.localhost', true],
    ['127.0.0.1', true],
    ['127.0.0.2', true],
    ['127.255.255.254', true],
    ['[::1]', true],
    ['::1', true],
    ['[::ffff:127.0.0.1]', true],
    ['[::ffff:7f00:1]', true],
    ['edge.invalid', false],
    ['burrow.test', false],
    ['localhost.example.com', false],
    ['127.0.0.1.nip.io', false],
    ['128.0.0.1', false],
    ['10.0.0.1', false],
    ['[::2]', false],
    ['0.0.0.0', false],
  ];
  for (const [host, loopback] of table) assert.equal(isLoopbackHost(host), loopback, host);
});

test('a token over plain http:// is refused for a non-loopback edge unless insecure; https and loopback pass', () => {
  assert.match(cleartextRefusal('http://edge.invalid:8080', false) ?? '', /^refusing to send the token in clear text to edge\.invalid:8080/);
  assert.equal(cleartextRefusal('http://edge.invalid:8080', true), null);
  assert.equal(cleartextRefusal('https://edge.invalid', false), null);
  assert.equal(cleartextRefusal('http://127.0.0.2:8080', false), null);
  assert.equal(cleartextRefusal('http://localhost:8080', false), null);
});

test('burrow http refuses before connecting: edge.invalid needs no DNS, and a listening burrow.test sees no connection', async () => {
  const env = { XDG_CONFIG_HOME: join(freshDir(), 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', ...wildcardDnsEnv() };
  const invalid = await runCli(['http', '3000', '--no-inspect', '--token', TOKEN, '--edge', 'http://edge.invalid:8080'], env);
  assert.equal(invalid.code, 1);
  assert.equal(
    invalid.stderr,
    'burrow: refusing to send the token in clear text to edge.invalid:8080: the edge URL is http://, not https://; use https://, or --insecure to send it anyway\n',
  );

  // burrow.test resolves to 127.0.0.1 (wildcard-dns), yet its name is not loopback: nothing may reach it.
  const received: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk: Buffer) => received.push(chunk.toString('latin1')));
    socket.on('data', () => socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 56\r\n\r\n{"error":{"code":"UNAUTHORIZED","message":"Bad token."}}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  try {
    const refused = await runCli(['http', '3000', '--no-inspect', '--token', TOKEN, '--edge', `http://${TEST_DOMAIN}:${port}`], env);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /refusing to send the token in clear text/);
    assert.equal(sockets.size, 0, 'no connection was made');

    const insecure = await runCli(['http', '3000', '--no-inspect', '--insecure', '--token', TOKEN, '--edge', `http://${TEST_DOMAIN}:${port}`], env);
    assert.equal(insecure.code, 1);
    assert.match(insecure.stderr, /UNAUTHORIZED: Bad token\./);
    assert.match(received.join(''), new RegExp(`authorization: Bearer ${TOKEN}`, 'i'), 'with --insecure the token is sent');
  } finally {
    for (const socket of sockets) socket.destroy();
    server.close();
  }
});

test('burrow login refuses to send the token in clear text to a non-loopback edge without --insecure', async () => {
  const env = { XDG_CONFIG_HOME: join(freshDir(), 'config'), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const refused = await runCli(['login', TOKEN, '--edge', 'http://edge.invalid:8080'], env);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^burrow: refusing to send the token in clear text to edge\.invalid:8080: .* --insecure to send it anyway\n$/);
  // With --insecure it tries (and, with no DNS for .invalid, cannot reach it).
  const insecure = await runCli(['login', TOKEN, '--edge', 'http://edge.invalid:8080', '--insecure'], env);
  assert.equal(insecure.code, 1);
  assert.match(insecure.stderr, /cannot reach the edge at http:\/\/edge\.invalid:8080/);
});
