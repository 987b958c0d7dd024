/**
 * The local hop against a server written byte by byte (raw-local.ts): every row of the local-hop table
 * in docs/protocol.md section 6 (whole bodies of each framing, extra bytes past Content-Length, cut and
 * reset bodies, half-close, bytes that are not HTTP, an unrequested 100), response bytes passed through
 * exactly (reason phrases and values in UTF-8 and Latin-1), a refused upgrade's body, the two kinds of
 * failure (could not connect vs failed mid-exchange), idle connections the server closes, and the retry
 * rule for a request that meets a reused connection closing.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { LocalHop, type TargetPool } from '../../../src/client/local-hop/pool.js';
import { ResponseFraming, type ResponseFramingValue } from '../../../src/client/local-hop/exchange.js';
import { localTarget, type LocalTarget } from '../../../src/client/routes.js';
import { ResetCode } from '../../../src/protocol/constants.js';
import { freePort, waitFor } from '../../helpers.js';
import { OK, startRawLocal, type RawLocal, type Script } from '../raw-local.js';
import { field, send, withPool, type Outcome } from './record.js';

const BIG = randomBytes(2_000_000);
const SMALL = randomBytes(1000);
const HOST = ['Host', 'app.example'];

function head(lines: string[]): string {
  return `${lines.join('\r\n')}\r\n\r\n`;
}

function reset(socket: Socket, first: Buffer | string): 'done' {
  socket.write(first, () => setTimeout(() => socket.resetAndDestroy(), 30));
  return 'done';
}

type Expect = { ending: 'end'; body: Buffer; framing: ResponseFramingValue } | { ending: 'error'; message: RegExp };

interface Row {
  name: string;
  script: Script;
  expect: Expect;
}

/** docs/protocol.md section 6, "The local hop": one row each, plus the cases around them. */
const ROWS: Row[] = [
  {
    name: 'a whole Content-Length body, then Connection: close',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'Connection: close', `Content-Length: ${BIG.length}`])), BIG])), 'done'),
    expect: { ending: 'end', body: BIG, framing: ResponseFraming.LENGTH },
  },
  {
    name: 'a body delimited by closing the connection',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'Connection: close'])), BIG])), 'done'),
    expect: { ending: 'end', body: BIG, framing: ResponseFraming.CLOSE },
  },
  {
    name: 'an HTTP/1.0 answer, close-delimited',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.0 200 OK', 'Server: SimpleHTTP/0.6'])), SMALL])), 'done'),
    expect: { ending: 'end', body: SMALL, framing: ResponseFraming.CLOSE },
  },
  {
    name: 'a whole chunked body, then half-close',
    script: (s) => (s.end(`${head(['HTTP/1.1 200 OK', 'Transfer-Encoding: chunked'])}5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n`), 'done'),
    expect: { ending: 'end', body: Buffer.from('hello world'), framing: ResponseFraming.CHUNKED },
  },
  {
    name: 'half-close right after a whole keep-alive response',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', `Content-Length: ${SMALL.length}`])), SMALL])), 'done'),
    expect: { ending: 'end', body: SMALL, framing: ResponseFraming.LENGTH },
  },
  {
    name: 'more body bytes than its Content-Length: exactly Content-Length bytes, the rest discarded',
    script: (s) => (s.write(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'Content-Length: 600'])), SMALL])), 'keep'),
    expect: { ending: 'end', body: SMALL.subarray(0, 600), framing: ResponseFraming.LENGTH },
  },
  {
    name: 'closing before the Content-Length is reached',
    script: (s) => (s.end(Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', `Content-Length: ${BIG.length + 10}`])), BIG])), 'done'),
    expect: { ending: 'error', message: /closed before the body's end/ },
  },
  {
    name: 'closing inside a chunked body',
    script: (s) => (s.end(`${head(['HTTP/1.1 200 OK', 'Transfer-Encoding: chunked'])}64\r\nonly part of it`), 'done'),
    expect: { ending: 'error', message: /closed before the body's end/ },
  },
  {
    name: 'a reset in the middle of a Content-Length body',
    script: (s) => reset(s, Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', `Content-Length: ${BIG.length}`])), BIG.subarray(0, 500_000)])),
    expect: { ending: 'error', message: /reset/ },
  },
  {
    name: 'a reset in the middle of a chunked body',
    script: (s) => reset(s, `${head(['HTTP/1.1 200 OK', 'Transfer-Encoding: chunked'])}${(100_000).toString(16)}\r\n${'x'.repeat(50_000)}`),
    expect: { ending: 'error', message: /reset/ },
  },
  {
    name: 'a reset in the middle of a body without a length',
    script: (s) => reset(s, Buffer.concat([Buffer.from(head(['HTTP/1.1 200 OK', 'Connection: close'])), SMALL])),
    expect: { ending: 'error', message: /reset/ },
  },
  {
    name: 'bytes that are not an HTTP response',
    script: (s) => (s.end('SSH-2.0-OpenSSH_9.6\r\n'), 'done'),
    expect: { ending: 'error', message: /not an HTTP response \(HPE_/ },
  },
  {
    name: 'a 100 Continue the request did not ask for',
    script: (s) => (s.write(`HTTP/1.1 100 Continue\r\n\r\n${head(['HTTP/1.1 200 OK', 'Content-Length: 2'])}hi`), 'keep'),
    expect: { ending: 'error', message: /100 Continue the request did not ask for/ },
  },
  {
    name: 'a 101 to a request that did not ask to upgrade',
    script: (s) => (s.write(head(['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade'])), 'done'),
    expect: { ending: 'error', message: /did not ask to upgrade/ },
  },
  {
    name: 'a response head over the limit',
    script: (s) => (s.write(head(['HTTP/1.1 200 OK', `X-Big: ${'a'.repeat(40_000)}`, 'Content-Length: 0'])), 'done'),
    expect: { ending: 'error', message: /head over the limit/ },
  },
  {
    name: 'closing without any answer',
    script: (s) => (s.end(), 'done'),
    expect: { ending: 'error', message: /closed before any response/ },
  },
];

let local: RawLocal;
let hop: LocalHop;
let pool: TargetPool;

before(async () => {
  const scripts: Record<string, Script> = { '/ok': OK };
  ROWS.forEach((row, index) => (scripts[`/row-${index}`] = row.script));
  scripts['/bytes'] = (s) => {
    s.write(
      Buffer.concat([
        Buffer.from('HTTP/1.1 200 Gr'),
        Buffer.from('üß Gott ✓', 'utf8'),
        Buffer.from('\r\nX-Latin: caf'),
        Buffer.from([0xe9]),
        Buffer.from('\r\nx-UTF8: '),
        Buffer.from('résumé ✓', 'utf8'),
        Buffer.from('\r\nX-Empty:\r\nContent-Length: 2\r\n\r\nok'),
      ]),
    );
    return 'keep';
  };
  scripts['/latin1-reason'] = (s) => (s.write(Buffer.concat([Buffer.from('HTTP/1.1 404 Introuvable '), Buffer.from([0xe9]), Buffer.from('\r\nContent-Length: 0\r\n\r\n')])), 'keep');
  scripts['/refused-upgrade'] = (s) => (s.write(head(['HTTP/1.1 426 Upgrade Required', 'Content-Type: text/plain', 'Content-Length: 24']) + 'this server wants TLS 2.0'.slice(0, 24)), 'keep');
  local = await startRawLocal(scripts);
  const target = localTarget(local.port, '127.0.0.1');
  hop = new LocalHop([target]);
  pool = hop.pool(target);
});

after(async () => {
  hop.close();
  await local.close();
});

function check(outcome: Outcome, expect: Expect): void {
  if (expect.ending === 'end') {
    assert.equal(outcome.error, null, outcome.error?.message);
    assert.equal(outcome.ended, true);
    assert.equal(outcome.framing, expect.framing);
    assert.equal(outcome.body.length, expect.body.length);
    assert.ok(outcome.body.equals(expect.body), 'the same bytes');
    return;
  }
  assert.equal(outcome.ended, false, 'never a cut body passed off as whole');
  assert.ok(outcome.error !== null);
  assert.equal(outcome.error.resetCode, ResetCode.LOCAL_ERROR, outcome.error.message);
  assert.match(outcome.error.message, new RegExp(`^local server at http://127\\.0\\.0\\.1:${local.port}: `));
  assert.match(outcome.error.message, expect.message);
}

describe('the local-hop table (docs/protocol.md section 6)', () => {
  ROWS.forEach((row, index) => {
    test(row.name, { timeout: 30_000 }, async () => {
      check(await send(pool, { method: 'GET', target: `/row-${index}`, fields: HOST }), row.expect);
      const next = await send(pool, { method: 'GET', target: '/ok', fields: HOST });
      assert.equal(next.body.toString(), 'ok', 'the next request works');
      assert.equal(pool.stats.open, pool.stats.idle, 'no connection is left half-used');
    });
  });
});

test('reason phrases and field values reach the caller byte for byte (UTF-8, Latin-1, empty)', async () => {
  const outcome = await send(pool, { method: 'GET', target: '/bytes', fields: HOST });
  const head = outcome.head!;
  assert.ok(Buffer.from(head.reason, 'latin1').equals(Buffer.concat([Buffer.from('Gr'), Buffer.from('üß Gott ✓', 'utf8')])));
  assert.ok(Buffer.from(field(head.fields, 'x-latin')!, 'latin1').equals(Buffer.from([0x63, 0x61, 0x66, 0xe9])));
  assert.ok(Buffer.from(field(head.fields, 'x-utf8')!, 'latin1').equals(Buffer.from('résumé ✓', 'utf8')));
  assert.deepEqual(head.fields.filter((_, i) => i % 2 === 0), ['X-Latin', 'x-UTF8', 'X-Empty', 'Content-Length']);
  assert.equal(field(head.fields, 'x-empty'), '');
  const latin = await send(pool, { method: 'GET', target: '/latin1-reason', fields: HOST });
  assert.equal(latin.head?.reason, 'Introuvable \xe9');
});

test('request head bytes: fields in order and case, values as bytes, hop-by-hop ones dropped', async () => {
  const fields = ['Host', 'app.example', 'X-Case', 'MiXeD', 'X-Utf8', Buffer.from('café ✓').toString('latin1'), 'Connection', 'keep-alive, X-Private', 'X-Private', 'secret', 'Keep-Alive', 'timeout=5', 'TE', 'trailers', 'Upgrade', 'h2c', 'Proxy-Connection', 'keep-alive', 'x-last', '1'];
  await send(pool, { method: 'GET', target: '/ok?a=1', fields });
  const written = local.heads.at(-1)!;
  assert.ok(written.equals(Buffer.concat([Buffer.from('GET /ok?a=1 HTTP/1.1\r\nHost: app.example\r\nX-Case: MiXeD\r\nX-Utf8: '), Buffer.from('café ✓'), Buffer.from('\r\nx-last: 1\r\n\r\n')])), written.toString('latin1'));
});

test('a refused upgrade: its status and body reach the caller, and its connection is not used again', async () => {
  const connections = local.connections;
  const outcome = await send(pool, { method: 'GET', target: '/refused-upgrade', fields: [...HOST, 'Connection', 'Upgrade', 'Upgrade', 'websocket'], upgrade: true });
  assert.equal(outcome.head?.status, 426);
  assert.equal(outcome.body.toString(), 'this server wants TLS 2.');
  assert.equal(outcome.upgrade, null);
  assert.match(local.heads.at(-1)!.toString('latin1'), /\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n/);
  await send(pool, { method: 'GET', target: '/ok', fields: HOST });
  assert.equal(local.connections, connections + 1, 'a new connection after the refused upgrade');
});

describe('could not connect: LOCAL_UNREACHABLE, the message names the target', () => {
  const cases: [string, () => Promise<LocalTarget>, RegExp][] = [
    ['nothing listening', async () => localTarget(await freePort(), '127.0.0.1'), /^local server at http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/],
    ['localhost with nothing on either loopback', async () => localTarget(await freePort()), /^local server at http:\/\/localhost:\d+: .*ECONNREFUSED/],
    ['a name that does not resolve', async () => localTarget(80, 'nothing-here.invalid'), /^local server at http:\/\/nothing-here\.invalid:80: .*ENOTFOUND/],
  ];
  for (const [name, targetOf, message] of cases) {
    test(name, async () => {
      const outcome = await withPool(await targetOf(), (pool) => send(pool, { method: 'GET', target: '/', fields: HOST }));
      assert.equal(outcome.error?.resetCode, ResetCode.LOCAL_UNREACHABLE);
      assert.match(outcome.error!.message, message);
    });
  }
});

/**
 * A keep-alive server that answers GET and POST alike with "ok", and for each connection either closes
 * it after `idleCloseMs` of quiet, or closes it without an answer when its `closeOnRequest`-th request
 * arrives (the race: a server closing an idle connection just as a request is written on it).
 */
async function closingServer(options: { idleCloseMs?: number; closeOnRequest?: number }): Promise<{ port: number; connections: () => number; answered: () => number; close(): void }> {
  let connections = 0;
  let answered = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    let requests = 0;
    let idle: NodeJS.Timeout | null = null;
    const quiet = (): void => {
      if (options.idleCloseMs !== undefined) idle = setTimeout(() => socket.end(), options.idleCloseMs);
    };
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      if (idle !== null) clearTimeout(idle);
      buffered += chunk.toString('latin1');
      for (let end = buffered.indexOf('\r\n\r\n'); end !== -1; end = buffered.indexOf('\r\n\r\n')) {
        const length = /content-length: *(\d+)/i.exec(buffered.slice(0, end))?.[1];
        const total = end + 4 + Number(length ?? 0);
        if (buffered.length < total) return;
        buffered = buffered.slice(total);
        requests++;
        if (requests === options.closeOnRequest) {
          socket.destroy();
          return;
        }
        answered++;
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      }
      quiet();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    answered: () => answered,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('idle connections and the close race', () => {
  test('a connection the server closes while idle is replaced, and no request fails', async () => {
    const server = await closingServer({ idleCloseMs: 100 });
    await withPool(localTarget(server.port, '127.0.0.1'), async (pool) => {
      const first = await send(pool, { method: 'POST', target: '/', fields: HOST }, 'a');
      assert.equal(first.body.toString(), 'ok');
      await waitFor(() => pool.stats.idle === 0, 5_000, 'the server closing the idle connection');
      const second = await send(pool, { method: 'POST', target: '/', fields: HOST }, 'b');
      assert.equal(second.error, null, second.error?.message);
      assert.equal(second.body.toString(), 'ok');
      assert.equal(server.connections(), 2);
    }).finally(() => server.close());
  });

  test('an idempotent request that meets a reused connection closing is sent again on a new one', async () => {
    const server = await closingServer({ closeOnRequest: 2 });
    await withPool(localTarget(server.port, '127.0.0.1'), async (pool) => {
      assert.equal((await send(pool, { method: 'GET', target: '/', fields: HOST })).body.toString(), 'ok');
      const raced = await send(pool, { method: 'PUT', target: '/', fields: HOST }, 'replayable inline body');
      assert.equal(raced.error, null, raced.error?.message);
      assert.equal(raced.body.toString(), 'ok');
      assert.equal(server.connections(), 2, 'sent again on a second connection');
    }).finally(() => server.close());
  });

  test('a POST that meets it fails (a proxy must not retry it), and so does a streamed body', async () => {
    const server = await closingServer({ closeOnRequest: 2 });
    await withPool(localTarget(server.port, '127.0.0.1'), async (pool) => {
      assert.equal((await send(pool, { method: 'GET', target: '/', fields: HOST })).body.toString(), 'ok');
      const post = await send(pool, { method: 'POST', target: '/', fields: HOST }, 'not sent twice');
      assert.equal(post.error?.resetCode, ResetCode.LOCAL_ERROR);
      assert.equal(server.answered(), 1);
      assert.equal((await send(pool, { method: 'GET', target: '/', fields: HOST })).body.toString(), 'ok');
      const streamed = await send(pool, { method: 'PUT', target: '/', fields: [...HOST, 'Content-Length', '4'] }, null, (exchange) => {
        exchange.write(Buffer.from('part'));
        exchange.end();
      });
      assert.equal(streamed.error?.resetCode, ResetCode.LOCAL_ERROR, 'a streamed body is not kept to be sent again');
    }).finally(() => server.close());
  });

  test('a body held for 100 Continue goes after a second when the server does not answer the Expect', async () => {
    const server = createServer((socket) => {
      let buffered = '';
      socket.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('latin1');
        if (buffered.endsWith('\r\n\r\nhello')) socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${buffered.length}\r\n\r\n${buffered}`);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const target = localTarget((server.address() as AddressInfo).port, '127.0.0.1');
    const outcome = await withPool(target, (pool) => send(pool, { method: 'POST', target: '/', fields: [...HOST, 'Expect', '100-continue', 'Content-Length', '5'] }, 'hello'), { continueTimeoutMs: 200 }).finally(() => server.close());
    assert.equal(outcome.head?.status, 200);
    assert.match(outcome.body.toString(), /Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello$/);
  });
});
