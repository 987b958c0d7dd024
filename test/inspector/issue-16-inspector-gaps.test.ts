/**
 * Issue 16, point 6 (the inspector against ngrok's), through the JSON API on a real tunnel: search
 * inside bodies, the client address, copy as curl (run for real by bash against the local target and
 * the public URL), HAR export, removing a header in a replay, WebSocket connections with their
 * messages, and an edge timeout told apart from a cancellation (point 5's label).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { call, tempDir, waitFor } from '../helpers.js';
import { inspect, startStack, type Stack } from './fixture.js';

const run = promisify(execFile);

describe('issue 16: inspector gaps (API)', () => {
  let stack: Stack;
  let work: string;

  before(async () => {
    stack = await startStack({}, 1024 * 1024, { requestTimeoutMs: 400 });
    work = tempDir('burrow-curl-');
  });

  after(async () => {
    await stack.close();
    rmSync(work, { recursive: true, force: true });
  });

  const newest = async (): Promise<any> => (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests[0];

  test('the filter searches inside request and response bodies and headers, every word', async () => {
    await stack.send('POST', '/hooks/stripe', { body: '{"id":"evt_1Q2w3E4rNeedle","type":"charge.succeeded"}', headers: { 'content-type': 'application/json' } });
    await stack.send('POST', '/hooks/stripe', { body: '{"id":"evt_other","type":"charge.failed"}', headers: { 'content-type': 'application/json', 'x-trace': 'Trace-Marker-77' } });
    await stack.send('GET', '/plain');
    const search = async (q: string): Promise<string[]> =>
      (await inspect(stack.inspector, 'GET', `/api/requests?summary=1&q=${encodeURIComponent(q)}`)).json.requests.map((item: any) => item.path + ' ' + item.status);
    assert.deepEqual(await search('evt_1q2w3e4rneedle'), ['/hooks/stripe 200'], 'an event id inside the JSON body, case-insensitively');
    assert.deepEqual(await search('trace-marker-77'), ['/hooks/stripe 200'], 'a header value');
    assert.deepEqual(await search('charge stripe'), ['/hooks/stripe 200', '/hooks/stripe 200'], 'words across path and body');
    assert.deepEqual(await search('charge plain'), [], 'every word must match');
    // The local server echoes the body in its response: the response body is searched too.
    const local = (await inspect(stack.inspector, 'GET', '/api/requests?summary=1&q=%22url%22%3A%22%2Fplain%22')).json.requests;
    assert.equal(local.length, 1);
    assert.equal(local[0].path, '/plain');
  });

  test('each exchange carries the public client address', async () => {
    await stack.send('GET', '/address');
    const item = await newest();
    assert.equal(item.path, '/address');
    assert.equal(item.client_address, '127.0.0.1');
    const detail = (await inspect(stack.inspector, 'GET', `/api/requests/${item.id}`)).json;
    assert.equal(detail.client_address, '127.0.0.1');
  });

  test('copy as curl: the local-target command sends the same method, path, headers and bytes', async () => {
    const body = `{"a":"it's \\"quoted\\" $HOME \`x\` ; rm -rf /","b":"ünï"}\n`;
    await stack.send('POST', '/curl/text?x=1&y=$HOME', { body, headers: { 'content-type': 'application/json', 'x-sig': "t=1,v1='abc'" } });
    const item = await newest();
    const answer = await inspect(stack.inspector, 'GET', `/api/requests/${item.id}/curl?target=local`);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.target, 'local');
    assert.equal(answer.json.url, `http://localhost:${stack.local.port}/curl/text?x=1&y=$HOME`);
    const count = stack.seen.length;
    await run('bash', ['-c', answer.json.command], { cwd: work });
    assert.equal(stack.seen.length, count + 1);
    const got = stack.seen.at(-1)!;
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/curl/text?x=1&y=$HOME');
    assert.equal(got.body, body);
    assert.equal(got.headers['x-sig'], "t=1,v1='abc'");
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['user-agent'], stack.seen[count - 1]!.headers['user-agent']);
  });

  test('copy as curl: a binary body with NUL bytes goes through a file; the public URL works too', async () => {
    const bytes = Buffer.from([0, 1, 2, 0x27, 0x5c, 0x25, 0x0a, 0xff, 0xfe, 0x80, 0x24, 0x60, 0x22, 0]);
    await stack.send('PUT', '/curl/binary', { body: bytes, headers: { 'content-type': 'application/octet-stream' } });
    const item = await newest();
    for (const target of ['local', 'public']) {
      const answer = await inspect(stack.inspector, 'GET', `/api/requests/${item.id}/curl?target=${target}`);
      assert.equal(answer.status, 200, answer.text);
      assert.match(answer.json.command, /--data-binary @burrow-req_[0-9a-f]+\.body/);
      if (target === 'public') assert.equal(answer.json.url, `${stack.client.publicUrl}/curl/binary`);
      const count = stack.seen.length;
      await run('bash', ['-c', answer.json.command], { cwd: work });
      assert.equal(stack.seen.length, count + 1, target);
      const got = stack.seen.at(-1)!;
      assert.equal(got.method, 'PUT');
      assert.deepEqual(got.raw, bytes, target);
    }
    // Binary without NUL: one command with $'...' quoting.
    const noNul = Buffer.from([0xff, 0x01, 0x27, 0x5c, 0x0a, 0x41]);
    await stack.send('POST', '/curl/ansi', { body: noNul, headers: { 'content-type': 'application/octet-stream' } });
    const ansi = await inspect(stack.inspector, 'GET', `/api/requests/${(await newest()).id}/curl`);
    assert.match(ansi.json.command, /--data-binary \$'\\xff\\x01\\'\\\\\\x0aA'/);
    const count = stack.seen.length;
    await run('bash', ['-c', ansi.json.command], { cwd: work });
    assert.deepEqual(stack.seen[count]!.raw, noNul);
    const bad = await inspect(stack.inspector, 'GET', `/api/requests/${item.id}/curl?target=elsewhere`);
    assert.equal(bad.status, 400);
  });

  test('export as HAR 1.2: one request or all, as a download', async () => {
    await stack.send('POST', '/har/one?k=v', { body: '{"har":true}', headers: { 'content-type': 'application/json' } });
    const item = await newest();
    const one = await inspect(stack.inspector, 'GET', `/api/har?id=${item.id}`);
    assert.equal(one.status, 200);
    assert.match(String(one.headers['content-disposition']), /^attachment; filename="burrow-.*\.har"$/);
    const log = one.json.log;
    assert.equal(log.version, '1.2');
    assert.equal(log.creator.name, 'Burrow inspector');
    assert.equal(log.entries.length, 1);
    const entry = log.entries[0];
    assert.equal(entry.request.method, 'POST');
    assert.equal(entry.request.url, `${stack.client.publicUrl}/har/one?k=v`);
    assert.deepEqual(entry.request.queryString, [{ name: 'k', value: 'v' }]);
    assert.equal(entry.request.postData.text, '{"har":true}');
    assert.equal(entry.request.postData.mimeType, 'application/json');
    assert.equal(entry.response.status, 200);
    assert.match(entry.response.content.text, /"url":"\/har\/one\?k=v"/);
    assert.equal(entry.response.content.mimeType, 'application/json');
    assert.ok(entry.request.headers.some((h: any) => h.name === 'content-type'));
    assert.equal(entry._id, item.id);
    assert.equal(entry._clientAddress, '127.0.0.1');
    assert.ok(!Number.isNaN(Date.parse(entry.startedDateTime)));
    assert.equal(typeof entry.time, 'number');
    assert.deepEqual(Object.keys(entry.timings).sort(), ['receive', 'send', 'wait']);

    const all = await inspect(stack.inspector, 'GET', '/api/har');
    assert.equal(all.json.log.entries.length, stack.inspector.ring.size);
    const times = all.json.log.entries.map((e: any) => Date.parse(e.startedDateTime));
    assert.deepEqual(times, [...times].sort((a, b) => a - b), 'oldest first');
    const binary = all.json.log.entries.find((e: any) => e.request.url.endsWith('/curl/binary'));
    assert.equal(binary.request.postData._encoding, 'base64');
    const missing = await inspect(stack.inspector, 'GET', '/api/har?id=req_00000000000000000000');
    assert.equal(missing.status, 404);
  });

  test('edit and replay can remove a header (null), and the edge API can too', async () => {
    await stack.send('POST', '/remove', { body: 'x', headers: { 'content-type': 'text/plain', 'x-drop-me': 'yes', 'x-keep': 'k' } });
    const item = await newest();
    const answer = await inspect(stack.inspector, 'POST', `/api/requests/${item.id}/replay`, { body: { headers: { 'x-drop-me': null, 'x-new': 'n' } } });
    assert.equal(answer.status, 200, answer.text);
    const got = stack.seen.at(-1)!;
    assert.equal(got.url, '/remove');
    assert.equal(got.headers['x-drop-me'], undefined);
    assert.equal(got.headers['x-keep'], 'k');
    assert.equal(got.headers['x-new'], 'n');
    const badValue = await inspect(stack.inspector, 'POST', `/api/requests/${item.id}/replay`, { body: { headers: { 'x-drop-me': 5 } } });
    assert.equal(badValue.status, 400);
    const edge = await call(stack.edge, 'POST', `/api/v1/requests/${item.id}/replay`, { token: stack.account.token, body: { headers: { 'x-keep': null } } });
    assert.equal(edge.status, 200, edge.text);
    assert.equal(stack.seen.at(-1)!.headers['x-keep'], undefined);
    assert.equal(stack.seen.at(-1)!.headers['x-drop-me'], 'yes');
  });

  test('a WebSocket connection is listed with status 101, its messages, open and close time and close code', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${stack.edge.port}/socket/path?room=1`, { headers: { host: stack.host } });
    const received: string[] = [];
    socket.on('message', (data: Buffer, isBinary: boolean) => received.push(isBinary ? `binary:${data.toString('hex')}` : data.toString('utf8')));
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    socket.send('hello <script>alert(1)</script>');
    socket.send(Buffer.from([1, 2, 3]));
    await waitFor(() => received.length === 2, 5_000, 'the echoes');
    const open = (await inspect(stack.inspector, 'GET', '/api/requests?summary=1&q=websocket')).json.requests;
    assert.equal(open.length, 1);
    assert.equal(open[0].kind, 'websocket');
    assert.equal(open[0].status, 101);
    assert.equal(open[0].path, '/socket/path?room=1');
    assert.equal(open[0].websocket.closed_at, null);
    socket.close(4001, 'bye');
    await waitFor(async () => (await inspect(stack.inspector, 'GET', `/api/requests/${open[0].id}`)).json.websocket.closed_at !== null, 5_000, 'the close');
    const detail = (await inspect(stack.inspector, 'GET', `/api/requests/${open[0].id}`)).json;
    assert.equal(detail.websocket.close_code, 4001);
    assert.equal(detail.websocket.close_reason, 'bye');
    assert.equal(detail.websocket.messages_in, 2);
    assert.equal(detail.websocket.messages_out, 2);
    assert.ok(Date.parse(detail.websocket.closed_at) >= Date.parse(detail.websocket.opened_at));
    assert.equal(detail.client_address, '127.0.0.1');
    const messages = detail.messages.map((m: any) => [m.direction, m.binary, m.size, m.data_encoding === 'base64' ? Buffer.from(m.data, 'base64').toString('hex') : m.data]);
    assert.deepEqual(
      messages.sort((a: any, b: any) => String(a).localeCompare(String(b))),
      [
        ['in', false, 31, 'hello <script>alert(1)</script>'],
        // Binary messages are always base64, even when their bytes happen to be valid UTF-8 (issue 29).
        ['in', true, 3, '010203'],
        ['out', false, 36, 'echo:hello <script>alert(1)</script>'],
        ['out', true, 3, '010203'],
      ].sort((a, b) => String(a).localeCompare(String(b))),
    );
  });

  test('an exchange the edge timed out (504 LOCAL_TIMEOUT) says so, not "cancelled by the edge"', async () => {
    const answer = await stack.send('GET', '/silent');
    assert.equal(answer.status, 504);
    await waitFor(async () => (await newest()).path === '/silent', 5_000, 'the timed-out exchange');
    const item = await newest();
    assert.equal(item.status, 0);
    assert.match(item.error, /^timed out at the edge \(504 LOCAL_TIMEOUT\)/);
    assert.doesNotMatch(item.error, /cancelled/);
  });
});
