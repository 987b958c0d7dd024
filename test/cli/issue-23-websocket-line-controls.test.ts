/**
 * Issue 23's rule (no control character a public client chose reaches a terminal or --json output)
 * against what issue 29 added beside it: the lines `burrow http` and `burrow start` print for each
 * WebSocket printed its path and close reason raw, and the --json event stream (request and websocket
 * events) and the WebSocket `--log json` line used plain JSON.stringify, which leaves DEL and the C1
 * controls (U+009B, CSI to many terminals) as they are. Each output is built here from an exchange
 * whose path and close reason carry them.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { Exchange } from '../../src/client/exchange.js';
import { jsonEvents, requestEvent, webSocketFields, webSocketJsonLine, webSocketLine, LINE_BATCH_MS } from '../../src/cli/commands/http.js';

/** Any control character but a line feed. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
const PATH = '/chat\u009b2J\u0085?\u007f';
const REASON = 'bye\u009b31m';

function webSocket(status: number, closed: boolean): Exchange {
  return {
    id: 'ws_0123456789abcdef0123',
    method: 'GET',
    path: PATH,
    port: 3000,
    requestHeaders: [],
    requestBody: null,
    requestBodySize: 0,
    requestTruncated: false,
    status,
    responseHeaders: [],
    responseBody: null,
    responseBodySize: 0,
    responseTruncated: false,
    startedAt: Date.UTC(2025, 0, 1),
    latencyMs: 1,
    error: null,
    replayOf: null,
    websocket: { openedAt: Date.UTC(2025, 0, 1), closedAt: closed ? Date.UTC(2025, 0, 1) + 1500 : null, closeCode: closed ? 1000 : null, closeReason: closed ? REASON : '', messagesIn: 1, messagesOut: 1, messages: [] },
  };
}

test('the WebSocket text lines show the path and close reason as \\xHH', () => {
  const lines = [webSocketLine(webSocket(101, false)), webSocketLine(webSocket(101, true)), webSocketLine(webSocket(403, false))];
  for (const line of lines) assert.doesNotMatch(line.slice(0, -1), CONTROL, line);
  assert.deepEqual(lines, [
    'WS /chat\\x9B2J\\x85?\\x7F 101 open\n',
    'WS /chat\\x9B2J\\x85?\\x7F closed 1000 bye\\x9B31m after 1.5 s (1 in, 1 out)\n',
    'WS /chat\\x9B2J\\x85?\\x7F 403\n',
  ]);
});

test('--log json and --json events hold no control character and parse back to what was sent', async () => {
  const line = webSocketJsonLine(webSocket(101, true));
  assert.doesNotMatch(line.slice(0, -1), CONTROL, line);
  assert.deepEqual(JSON.parse(line), webSocketFields(webSocket(101, true)));
  assert.equal(JSON.parse(line).close_reason, REASON);

  const out = new PassThrough();
  let written = '';
  out.on('data', (chunk: Buffer) => (written += chunk.toString('utf8')));
  const events = jsonEvents(out);
  events({ event: 'websocket', ...webSocketFields(webSocket(101, true)) });
  events(requestEvent({ ...webSocket(200, false), id: 'req_0123456789abcdef0123', websocket: undefined } as Exchange));
  // The writer batches request and WebSocket lines into one write, LINE_BATCH_MS after the first.
  await new Promise((resolve) => setTimeout(resolve, LINE_BATCH_MS * 4));
  const lines = written.trimEnd().split('\n');
  assert.equal(lines.length, 2);
  for (const each of lines) assert.doesNotMatch(each, CONTROL, each);
  assert.deepEqual(lines.map((each) => (JSON.parse(each) as { path: string }).path), [PATH, PATH]);
});
