/**
 * Issue 23, lower item: C1 control characters (U+009B, CSI to many terminals) in a path reached the
 * terminal, `--json` output and the access log unescaped. Since issue 24 the public listener (llhttp, as
 * Node's own server) refuses a request target holding a byte outside printable ASCII: a raw C1 or C0
 * byte in a path is answered 400 and reaches nothing (the first test). A field value may hold any byte
 * but CR, LF and NUL, so a public client sends a C1 byte in a header through a real edge and tunnel,
 * with a path whose C1 characters are percent-encoded; then each output is read: the access log file,
 * `burrow requests` as a table, `--json` and `requests show` (real CLI subprocesses), and what `burrow
 * http` prints for the client's own record of the exchange and for a record holding C1 characters in
 * its path (its text line, JSON line and status block). None holds a control character but the line
 * feeds between lines; the text ones show `\xHH`, the JSON ones `\u00HH`, which parses back to exactly
 * what was sent.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Exchange } from '../../src/client/exchange.js';
import { jsonLine, renderStatus, textLine } from '../../src/cli/commands/http.js';
import { escapeControls, controlSafeJson } from '../../src/control-chars.js';
import { accessLogLine } from '../../src/edge/access-log.js';
import { createAccount, rawRequest, runCli, startClient, startEdge, tempDirs, waitFor, type TestAccount, type TestEdge } from '../helpers.js';
import { startRawLocal, type RawLocal } from '../client/raw-local.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';

const dirs = tempDirs('burrow-control-chars-');
/** Any control character but a line feed: what must never reach a terminal. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

let edge: TestEdge;
let local: RawLocal;
let alice: TestAccount;
let client: TunnelClient;
let logFile: string;
const exchanges: Exchange[] = [];
/** The path and the header value as the edge and the client saw them. */
const SENT_PATH = '/a%C2%9B2J%C2%85x/b';
const SENT_NOTE = 'before\u009b31m\u0085after';

before(async () => {
  logFile = join(dirs(), 'access.log');
  edge = await startEdge({ accessLog: logFile });
  // A byte-level local server: what reaches it is exactly what the edge forwarded.
  local = await startRawLocal({
    '*': (socket) => {
      socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
      return 'done';
    },
  });
  alice = await createAccount(edge);
  const started = await startClient(edge, alice.token, local.port, { subdomain: 'ctl' });
  client = started.client;
  client.on('exchange', (exchange: Exchange) => exchanges.push(exchange));
  // Raw C1 bytes in the path (UTF-8 for U+009B and U+0085): refused by the parser (the first test).
  // In a field value, raw C1 bytes (Latin-1 0x9B and 0x85) are legal bytes: forwarded as they are.
  const head = Buffer.concat([
    Buffer.from(`GET ${SENT_PATH} HTTP/1.1\r\nHost: ctl.localhost:${edge.port}\r\nX-Note: `, 'latin1'),
    Buffer.from(SENT_NOTE, 'latin1'),
    Buffer.from('\r\nConnection: close\r\n\r\n', 'latin1'),
  ]);
  const answer = await rawRequest(edge.port, head);
  assert.match(answer, /^HTTP\/1\.1 200 /, answer);
  await waitFor(() => exchanges.length === 1, 5_000, 'the client\'s record of the exchange');
  assert.equal(exchanges[0]!.path, SENT_PATH);
  assert.ok(local.heads[0]!.includes(Buffer.from(`X-Note: ${SENT_NOTE}\r\n`, 'latin1')), 'the C1 bytes reached the local server as sent');
});

after(async () => {
  client?.close();
  await local?.close();
  await edge?.close();
});

test('a raw C1 or C0 byte in the path is refused by the public listener (400, closed) and reaches nothing', async () => {
  const heads = local.heads.length;
  const seen = exchanges.length;
  for (const raw of [Buffer.from('\u009b2J\u0085x', 'utf8'), Buffer.from([0x9b]), Buffer.from([0x1b, 0x5b, 0x32, 0x4a])]) {
    const head = Buffer.concat([Buffer.from('GET /a', 'latin1'), raw, Buffer.from(`/b HTTP/1.1\r\nHost: ctl.localhost:${edge.port}\r\n\r\n`, 'latin1')]);
    const answer = await rawRequest(edge.port, head);
    assert.match(answer, /^HTTP\/1\.1 400 /, answer);
    assert.match(answer, /\r\nConnection: close\r\n/i, answer);
    assert.match(answer, /"code":"INVALID_REQUEST"/, answer);
    assert.doesNotMatch(answer.slice(answer.indexOf('\r\n\r\n') + 4), CONTROL, 'the refusal does not echo the bytes');
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(local.heads.length, heads, 'the local server got nothing');
  assert.equal(exchanges.length, seen, 'the client saw nothing');
  assert.doesNotMatch(readFileSync(logFile, 'utf8'), CONTROL);
});

test('the access log escapes them, and parses back to the path as received', async () => {
  await waitFor(() => readFileSync(logFile, 'utf8').includes('"subdomain":"ctl"'), 5_000, 'the access log line');
  const text = readFileSync(logFile, 'utf8');
  assert.doesNotMatch(text, CONTROL);
  const line = JSON.parse(text.trim().split('\n').at(-1)!);
  assert.equal(line.path, SENT_PATH);
  // Every C0 and C1 character and DEL, one line each way.
  const all = Array.from({ length: 0xa0 }, (_, code) => String.fromCharCode(code)).filter((c) => CONTROL.test(c) || c === '\n').join('');
  const built = accessLogLine({ receivedAt: 0, subdomain: 's', method: 'GET', path: `/${all}`, status: 200, bytesIn: 0, bytesOut: 0, durationMs: 0, clientAddress: '::1', requestId: null, error: null });
  assert.doesNotMatch(built.slice(0, -1), /[\u0000-\u001f\u007f-\u009f]/);
  assert.match(built, /\\u009b/);
  assert.equal(JSON.parse(built).path, `/${all}`);
});

test('burrow requests: the table and --json hold no control character, show escapes the header as \\xHH and --json as \\u00HH', async () => {
  const env = { XDG_CONFIG_HOME: dirs(), BURROW_TOKEN: alice.token, BURROW_EDGE: edge.url };
  const table = await runCli(['requests', 'ctl'], env);
  assert.equal(table.code, 0, table.stderr);
  assert.doesNotMatch(table.stdout, CONTROL);
  assert.ok(table.stdout.includes(SENT_PATH), table.stdout);

  const json = await runCli(['requests', 'ctl', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  assert.doesNotMatch(json.stdout, CONTROL);
  const [listed] = JSON.parse(json.stdout).requests;
  assert.equal(listed.path, SENT_PATH);

  const show = await runCli(['requests', 'show', listed.id], env);
  assert.equal(show.code, 0, show.stderr);
  assert.doesNotMatch(show.stdout, CONTROL);
  assert.ok(show.stdout.includes(`GET ${SENT_PATH}`), show.stdout);
  assert.ok(show.stdout.includes('X-Note: before\\x9B31m\\x85after'), show.stdout);
  const shown = await runCli(['requests', 'show', listed.id, '--json'], env);
  assert.doesNotMatch(shown.stdout, CONTROL);
  assert.match(shown.stdout, /before\\u009b31m\\u0085after/);
  assert.ok(JSON.parse(shown.stdout).request.headers.some(([name, value]: [string, string]) => name === 'X-Note' && value === SENT_NOTE));
});

test("burrow http: the request line, the --json line and the status block escape the client's record", () => {
  // The record of the real exchange, and one whose path holds C1 and C0 characters (a local record:
  // the edge lets none through a path any more, the CLI escapes them all the same).
  const real = exchanges[0]!;
  const hostilePath = '/a\u009b2J\u0085x\u001b[0m/b';
  for (const [exchange, shown] of [
    [real, SENT_PATH],
    [{ ...real, path: hostilePath }, '/a\\x9B2J\\x85x\\x1B[0m/b'],
  ] as const) {
    const text = textLine(exchange);
    assert.doesNotMatch(text.slice(0, -1), CONTROL);
    assert.ok(text.startsWith(`GET ${shown} 200 `), text);
    const json = jsonLine(exchange);
    assert.doesNotMatch(json.slice(0, -1), CONTROL);
    assert.equal(JSON.parse(json).path, exchange.path);
    const block = renderStatus(
      {
        session: 'online',
        detail: '',
        forwarding: ['http://ctl.localhost'],
        inspector: null,
        openStreams: 0,
        requests: 1,
        errors: 0,
        bytesIn: 0,
        bytesOut: 0,
        recent: [{ method: exchange.method, path: exchange.path, status: exchange.status, error: exchange.error, latencyMs: exchange.latencyMs }],
      },
      { color: false, width: 120 },
    );
    for (const line of block) assert.doesNotMatch(line, CONTROL);
    assert.ok(block.some((line) => line.includes(shown)), block.join('\n'));
  }
});

test('the escaping functions: C0, DEL and C1 escaped, other text untouched', () => {
  assert.equal(escapeControls('/plain/ü/日本/\\x'), '/plain/ü/日本/\\x');
  assert.equal(escapeControls('a\u001b[2Jb\u007fc\u009bd\u0080\u009f\u00a0'), 'a\\x1B[2Jb\\x7Fc\\x9Bd\\x80\\x9F\u00a0');
  assert.equal(escapeControls('line\n\tnext\r\u009b', true), 'line\n\tnext\\x0D\\x9B');
  assert.equal(controlSafeJson({ p: '\u009b\u001b\u007f' }), '{"p":"\\u009b\\u001b\\u007f"}');
});
