/**
 * `--access-log`: exactly one JSON line per public request (through the tunnel, refused by the edge,
 * abandoned by the client), none for API calls, with the documented fields; and the edge's log lines
 * for tunnel connects and disconnects with their reasons. A real edge, client and local server.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import { accessLogLine } from '../../src/edge/access-log.js';
import { call, createAccount, echo, startClient, startEdge, startLocal, tempDirs, waitFor, type LocalServer } from '../helpers.js';

const tempDir = tempDirs('burrow-access-log-');
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const FIELDS = ['time', 'subdomain', 'method', 'path', 'status', 'bytes_in', 'bytes_out', 'duration_ms', 'client', 'request_id', 'error'];

describe('--access-log FILE', () => {
  let local: LocalServer;
  let held: (() => void) | null = null;

  before(async () => {
    local = await startLocal((req, res) => {
      if (req.url === '/fail') {
        res.statusCode = 500;
        res.end('broken');
      } else if (req.url === '/hold') {
        held = () => res.destroy();
      } else {
        echo(req, res);
      }
    });
  });

  after(async () => {
    await local.close();
  });

  test('one line per public request, with the documented fields, flushed when the edge closes', async () => {
    const file = join(tempDir(), 'access.log');
    const target = await startEdge({ accessLog: file, maxRequestBody: 1000 });
    const account = await createAccount(target);
    const started = await startClient(target, account.token, local.port);
    const sub = started.subdomain;

    assert.equal((await call(target, 'GET', '/hello?x=1&y="q"', { host: started.host })).status, 200);
    assert.equal((await call(target, 'POST', '/upload', { host: started.host, rawBody: 'z'.repeat(321) })).status, 200);
    assert.equal((await call(target, 'GET', '/fail', { host: started.host })).status, 500);
    assert.equal((await call(target, 'GET', '/nothing', { host: `ghost.localhost:${target.port}` })).status, 404);
    assert.equal((await call(target, 'PUT', '/big', { host: started.host, rawBody: 'b'.repeat(2000) })).status, 413);
    // The public client gives up before the local server answers.
    const abandoned = new AbortController();
    const pending = request(`${target.base}/hold`, { headers: { host: started.host }, signal: abandoned.signal }).catch(() => 'aborted');
    await waitFor(() => held !== null, 5_000, 'the held request at the local server');
    abandoned.abort();
    assert.equal(await pending, 'aborted');
    await waitFor(() => target.edge.registry.session(sub)!.streams.size === 0, 5_000, 'the abandoned stream to end');
    held!();
    // API calls are not public requests.
    assert.equal((await call(target, 'GET', '/api/v1/tunnels', { token: account.token })).status, 200);

    await started.client.close();
    await target.close();
    const lines = readFileSync(file, 'utf8').split('\n');
    assert.equal(lines.pop(), '', 'the file ends with a newline');
    assert.equal(lines.length, 6, lines.join('\n'));
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    for (const entry of entries) {
      assert.deepEqual(Object.keys(entry), FIELDS);
      assert.match(String(entry.time), ISO);
      assert.equal(entry.client, '127.0.0.1');
      assert.equal(typeof entry.duration_ms, 'number');
      assert.ok((entry.duration_ms as number) >= 0);
    }
    const [hello, upload, fail, ghost, big, gone] = entries as Record<string, any>[];
    assert.deepEqual(
      entries.map((entry) => [entry.subdomain, entry.method, entry.path, entry.status, entry.error]),
      [
        [sub, 'GET', '/hello?x=1&y=%22q%22', 200, null],
        [sub, 'POST', '/upload', 200, null],
        [sub, 'GET', '/fail', 500, null],
        ['ghost', 'GET', '/nothing', 404, 'TUNNEL_NOT_FOUND'],
        [sub, 'PUT', '/big', 413, 'PAYLOAD_TOO_LARGE'],
        [sub, 'GET', '/hold', 499, 'CLIENT_CLOSED'],
      ],
    );
    assert.equal(upload!.bytes_in, 321);
    assert.ok(upload!.bytes_out > 321, 'the echo of the body');
    assert.equal(fail!.bytes_out, 'broken'.length);
    assert.equal(hello!.bytes_in, 0);
    for (const entry of [hello, upload, fail, gone]) assert.match(entry!.request_id, /^req_/);
    assert.equal(ghost!.request_id, null);
    assert.equal(big!.request_id, null);
    // The request ids are the captures' ids.
    assert.notEqual(hello!.request_id, upload!.request_id);
  });

  test('a public WebSocket is one line when it ends: 101, the bytes that passed each way after it', async () => {
    const file = join(tempDir(), 'access.log');
    const target = await startEdge({ accessLog: file });
    const wsLocal = await startLocal((_req, res) => res.end('plain'));
    const wss = new WebSocketServer({ server: wsLocal.server });
    wss.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(Buffer.concat([data as Buffer, data as Buffer]), { binary: isBinary })));
    const account = await createAccount(target);
    const started = await startClient(target, account.token, wsLocal.port);
    const socket = new WebSocket(`ws://127.0.0.1:${target.port}/live?room=1`, { headers: { host: started.host } });
    await once(socket, 'open');
    socket.send('hello');
    const [echoed] = (await once(socket, 'message')) as [Buffer];
    assert.equal(echoed.toString(), 'hellohello');
    socket.close(1000);
    await once(socket, 'close');
    await waitFor(() => target.edge.registry.session(started.subdomain)!.streams.size === 0, 5_000, 'the passthrough to end');
    await started.client.close();
    await target.close();
    wss.close();
    await wsLocal.close();
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.deepEqual(
      [lines[0].subdomain, lines[0].method, lines[0].path, lines[0].status, lines[0].error],
      [started.subdomain, 'GET', '/live?room=1', 101, null],
    );
    // Raw bytes after the 101 (protocol 2): the frames, masked from the client, with the close frames.
    // 'hello' masked is 11 bytes and a close with a code 8; 'hellohello' unmasked is 12 and a close 4.
    assert.deepEqual([lines[0].bytes_in, lines[0].bytes_out], [11 + 8, 12 + 4]);
    assert.match(lines[0].request_id, /^req_/);
  });

  test('an access log that cannot be opened stops the start with the reason', async () => {
    await assert.rejects(startEdge({ accessLog: join(tempDir(), 'missing-dir', 'access.log') }), /cannot open the access log: ENOENT/);
  });

  test('a line escapes what it must', () => {
    const sample = {
      receivedAt: 0,
      subdomain: 'a',
      method: 'GET',
      path: '/"\\\n',
      status: 200,
      bytesIn: 0,
      bytesOut: 0,
      durationMs: 1.23456,
      clientAddress: '::1',
      requestId: null,
      error: null,
    };
    const line = accessLogLine(sample);
    assert.ok(line.endsWith('\n') && !line.slice(0, -1).includes('\n'));
    const entry = JSON.parse(line);
    assert.equal(entry.path, '/"\\\n');
    assert.equal(entry.duration_ms, 1.235);
    assert.equal(entry.time, '1970-01-01T00:00:00.000Z');
    for (const time of [5, 1795535218009, 1795535218090, 1795535218123, 1795535219000, 1795535218999]) {
      const { time: written } = JSON.parse(accessLogLine({ ...sample, receivedAt: time }));
      assert.equal(written, new Date(time).toISOString());
    }
  });
});

describe('tunnel connect and disconnect log lines', () => {
  test('name the tunnel, account, token and port, and the reason it ended', async () => {
    const lines: string[] = [];
    const target = await startEdge({ log: (line) => lines.push(line) });
    const local = await startLocal(echo);
    try {
      const account = await createAccount(target);
      const first = await startClient(target, account.token, local.port);
      assert.ok(
        lines.includes(`tunnel ${first.subdomain} connected (account ${account.id}, token ${account.tokenId}, port ${local.port})`),
        lines.join('\n'),
      );
      await first.client.close();
      await waitFor(() => lines.some((line) => line.startsWith(`tunnel ${first.subdomain} disconnected: `)), 5_000, 'the disconnect line');
      assert.match(lines.find((line) => line.startsWith(`tunnel ${first.subdomain} disconnected`))!, /disconnected: .*client.* \(4006\)$/);

      const second = await startClient(target, account.token, local.port);
      assert.equal((await call(target, 'DELETE', `/api/v1/tunnels/${second.subdomain}`, { token: account.token })).status, 204);
      await waitFor(() => lines.some((line) => line.startsWith(`tunnel ${second.subdomain} disconnected: `)), 5_000, 'the disconnect line');
      assert.ok(lines.includes(`tunnel ${second.subdomain} disconnected: the tunnel was closed through the API (4002)`), lines.join('\n'));
      await second.client.close();

      const third = await startClient(target, account.token, local.port);
      target.edge.registry.session(third.subdomain)!.connection.ws!.close();
      await waitFor(() => lines.some((line) => line.startsWith(`tunnel ${third.subdomain} disconnected: `)), 5_000, 'the disconnect line');
      assert.ok(lines.includes(`tunnel ${third.subdomain} disconnected: connection lost (no close frame; network drop, process killed or ping timeout) (1006)`), lines.join('\n'));
      await waitFor(() => target.edge.registry.session(third.subdomain) !== undefined, 5_000, 'the reconnect');
      await target.close();
      assert.ok(lines.includes(`tunnel ${third.subdomain} disconnected: the edge is shutting down (4001)`), lines.join('\n'));
      await third.client.close();
    } finally {
      await target.close();
      await local.close();
    }
  });
});
