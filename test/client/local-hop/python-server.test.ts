/**
 * The local hop against python3's http.server (test/conformance/python_app.py), which answers HTTP/1.0
 * and closes the connection after each response: bodies with and without Content-Length, its Latin-1
 * header byte, repeated Set-Cookie fields, a chunked upload (the app reads chunked bodies itself), and
 * never a connection used twice.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { LocalHop, type TargetPool } from '../../../src/client/local-hop/pool.js';
import { ResponseFraming } from '../../../src/client/local-hop/exchange.js';
import { localTarget } from '../../../src/client/routes.js';
import { tempDirs } from '../../helpers.js';
import { startPythonApp, type PythonApp } from '../../conformance/python-app.js';
import { field, send } from './record.js';

const freshDir = tempDirs('burrow-local-hop-python-');
const HOST = ['Host', 'app.example'];

let app: PythonApp;
let hop: LocalHop;
let pool: TargetPool;

before(async () => {
  app = await startPythonApp(freshDir());
  const target = localTarget(app.port, '127.0.0.1');
  hop = new LocalHop([target]);
  pool = hop.pool(target);
});

after(async () => {
  hop.close();
  await app.close();
});

test('HTTP/1.0 answers with a length: status, reason, field case, body; each on its own connection', async () => {
  const opened = pool.stats.opened;
  for (let i = 0; i < 3; i++) {
    const outcome = await send(pool, { method: 'GET', target: '/text', fields: HOST });
    assert.equal(outcome.error, null, outcome.error?.message);
    assert.equal(outcome.head?.versionMinor, 0);
    assert.equal(outcome.head?.keepAlive, false);
    assert.equal(outcome.head?.reason, 'OK');
    assert.equal(outcome.framing, ResponseFraming.LENGTH);
    assert.equal(field(outcome.head!.fields, 'server')?.startsWith('ConformanceApp/1.0'), true);
    assert.ok(outcome.head!.fields.includes('Content-Type'), 'names in the case python wrote them');
    assert.equal(outcome.body.toString(), 'hello, world\n');
  }
  assert.equal(pool.stats.opened - opened, 3, 'python closes after each response: no reuse');
  assert.equal(pool.stats.open, 0);
});

test('a body delimited by the end of the connection', async () => {
  const outcome = await send(pool, { method: 'GET', target: '/close-delimited', fields: HOST });
  assert.equal(outcome.framing, ResponseFraming.CLOSE);
  assert.equal(outcome.body.toString(), 'no length: the body runs to the end of the connection');
});

test('a large body, a Latin-1 header byte, and repeated Set-Cookie fields in order', async () => {
  const big = await send(pool, { method: 'GET', target: '/bytes/3000000', fields: HOST });
  assert.equal(big.body.length, 3_000_000);
  for (const i of [0, 255, 256, 2_999_999]) assert.equal(big.body[i], (i * 7 + (i >> 8)) & 0xff, `byte ${i}`);
  const latin = await send(pool, { method: 'GET', target: '/latin1-header', fields: HOST });
  assert.equal(field(latin.head!.fields, 'x-word'), 'caf\xe9');
  const cookies = await send(pool, { method: 'GET', target: '/cookies', fields: HOST });
  const setCookies = cookies.head!.fields.filter((_, i) => i % 2 === 1 && cookies.head!.fields[i - 1] === 'Set-Cookie');
  assert.deepEqual(setCookies, ['session=abc123; Path=/; HttpOnly', 'theme=dark; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/']);
});

test('a chunked upload of unknown length, and the request head as python recorded it', async () => {
  const parts = ['first part, ', 'second part'];
  const outcome = await send(pool, { method: 'POST', target: '/upload', fields: [...HOST, 'X-Case', 'MiXeD', 'X-Utf8', Buffer.from('✓').toString('latin1')] }, parts[0]!, (exchange) => {
    exchange.write(Buffer.from(parts[1]!));
    exchange.end();
  });
  assert.equal(outcome.head?.status, 201);
  assert.equal(outcome.head?.reason, 'Created');
  assert.equal(JSON.parse(outcome.body.toString()).length, parts.join('').length);
  const last = await send(pool, { method: 'GET', target: '/__last', fields: HOST });
  const record = JSON.parse(last.body.toString()) as { headers: [string, string][] };
  assert.deepEqual(record.headers, [['Host', 'app.example'], ['X-Case', 'MiXeD'], ['X-Utf8', Buffer.from('✓').toString('latin1')], ['Transfer-Encoding', 'chunked']]);
});

test('HEAD and a status without a body', async () => {
  const head = await send(pool, { method: 'HEAD', target: '/text', fields: HOST });
  assert.equal(head.framing, ResponseFraming.NONE);
  assert.equal(field(head.head!.fields, 'content-length'), '13');
  assert.equal(head.body.length, 0);
  const noContent = await send(pool, { method: 'GET', target: '/status/204', fields: HOST });
  assert.equal(noContent.head?.status, 204);
  assert.equal(noContent.ended, true);
});
