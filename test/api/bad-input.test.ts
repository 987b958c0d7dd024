/**
 * Bad input of every kind against a real edge: malformed and non-JSON bodies, wrong types, oversized
 * bodies (also chunked), odd Authorization values, hostile Host headers and raw garbage on the socket.
 * Each answer is the spec's error shape (or a closed connection for what is not HTTP), and afterwards the
 * edge still serves and the stored accounts and tokens are exactly as before.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { assertApiError, call, createAccount, startEdge, type TestAccount, type TestEdge } from '../helpers.js';
import type { ErrorCode } from '../../src/errors.js';

let target: TestEdge;
let alice: TestAccount;
let bob: TestAccount;
let snapshot: unknown;

/** What the API shows of the stored data: compared before and after the abuse. */
async function storedData(): Promise<unknown> {
  const view = async (account: TestAccount) => ({
    me: (await call(target, 'GET', '/api/v1/auth/me', { token: account.token })).json,
    tokens: (await call(target, 'GET', '/api/v1/tokens', { token: account.token })).json,
    reserved: (await call(target, 'GET', '/api/v1/reserved-subdomains', { token: account.token })).json,
  });
  // last_used_at moves with every use; everything else must not.
  const strip = (data: any) => ({ ...data, tokens: data.tokens.tokens.map((t: any) => ({ ...t, last_used_at: undefined })) });
  return { accounts: target.edge.store.countAccounts(), alice: strip(await view(alice)), bob: strip(await view(bob)) };
}

/**
 * Sends raw bytes on a fresh connection and collects whatever comes back until the edge closes it (the
 * requests ask for Connection: close; `end` half-closes our side, after which the edge closes too) or
 * two seconds have passed. Write errors are expected when the edge answers early and closes.
 */
function rawExchange(bytes: Buffer | string, { end = false } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(target.port, '127.0.0.1');
    let received = '';
    const timer = setTimeout(() => socket.destroy(), 2_000);
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
    socket.write(bytes);
    if (end) socket.end();
  });
}

function parseRaw(text: string): { status: number; headers: Record<string, string>; json: any } {
  const [head = '', body = ''] = text.split('\r\n\r\n', 2);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, json: body === '' ? undefined : JSON.parse(body) };
}

before(async () => {
  target = await startEdge({ authFailureLimit: 1_000_000, rateLimit: 1_000_000 });
  alice = await createAccount(target);
  bob = await createAccount(target, 'PRO');
  await call(target, 'POST', '/api/v1/tokens', { token: alice.token, body: { label: 'second' } });
  await call(target, 'POST', '/api/v1/reserved-subdomains', { token: bob.token, body: { subdomain: 'bob-hooks' } });
  snapshot = await storedData();
});

after(async () => {
  // The edge still serves, and nothing stored changed.
  assert.equal((await call(target, 'GET', '/api/v1/instance')).status, 200);
  assert.deepEqual(await storedData(), snapshot);
  await target.close();
});

const postTokens = (rawBody: string | Buffer, contentType = 'application/json', token = alice.token) =>
  call(target, 'POST', '/api/v1/tokens', { token, rawBody, headers: { 'content-type': contentType } });

describe('bodies of POST /api/v1/tokens', () => {
  const invalid: [name: string, body: string | Buffer][] = [
    ['an empty body', ''],
    ['only whitespace', '   \n'],
    ['an open brace', '{'],
    ['a missing value', '{"label":}'],
    ['single quotes', "{'label':'x'}"],
    ['a trailing comma', '{"label":"x",}'],
    ['an unterminated string', '{"label":"x'],
    ['two objects', '{"label":"a"}{"label":"b"}'],
    ['a comment', '{"label":"x" /* hi */}'],
    ['NaN', '{"label":NaN}'],
    ['JSON null', 'null'],
    ['a JSON array', '[{"label":"x"}]'],
    ['a JSON string', '"label"'],
    ['a JSON number', '42'],
    ['JSON true', 'true'],
    ['form encoding', 'label=x'],
    ['binary bytes', Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x7b, 0x80])],
    ['a NUL byte', '\u0000'],
    ['a BOM before the object', '\ufeff{"label":"x"}'],
    ['deep nesting', `${'['.repeat(30_000)}${']'.repeat(30_000)}`],
    ['label: 5', '{"label":5}'],
    ['label: null', '{"label":null}'],
    ['label: []', '{"label":[]}'],
    ['label: {}', '{"label":{}}'],
    ['label: false', '{"label":false}'],
    ['an empty label', '{"label":""}'],
    ['a label of 65 characters', JSON.stringify({ label: 'x'.repeat(65) })],
    ['a label of 60 KiB', JSON.stringify({ label: 'x'.repeat(60 * 1024) })],
    ['an unknown field', '{"label":"x","admin":true}'],
    ['a __proto__ field', '{"label":"x","__proto__":{"admin":true}}'],
    ['a constructor field', '{"label":"x","constructor":{"prototype":{"admin":true}}}'],
    ['no label but other fields', '{"name":"x"}'],
    ['an escaped NUL in the label', '{"label":"a\\u0000b"}'],
  ];
  for (const [name, body] of invalid) {
    test(`${name}: 400 INVALID_REQUEST`, async () => {
      assertApiError(await postTokens(body), 'INVALID_REQUEST');
    });
  }

  test('the prototype of plain objects is untouched after a __proto__ body', () => {
    assert.equal(({} as Record<string, unknown>).admin, undefined);
  });

  const unsupported: [name: string, contentType: string][] = [
    ['text/plain', 'text/plain'],
    ['form encoding', 'application/x-www-form-urlencoded'],
    ['a JSON look-alike', 'application/json5'],
    ['an empty type', ''],
    ['garbage', ';;;'],
  ];
  for (const [name, contentType] of unsupported) {
    test(`a JSON body labelled ${name}: 415 UNSUPPORTED_MEDIA_TYPE`, async () => {
      assertApiError(await postTokens('{"label":"x"}', contentType), 'UNSUPPORTED_MEDIA_TYPE');
    });
  }

  test('a 3 MiB body with Content-Length: 413 PAYLOAD_TOO_LARGE before it is read', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024, 0x20);
    const head = `POST /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${alice.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const response = parseRaw(await rawExchange(Buffer.concat([Buffer.from(head), body])));
    assert.equal(response.status, 413);
    assert.equal(response.json.error.code, 'PAYLOAD_TOO_LARGE');
  });

  test('a 3 MiB chunked body: 413 PAYLOAD_TOO_LARGE once the limit is passed', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const parts: Buffer[] = [Buffer.from(`POST /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${alice.token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`)];
    for (let i = 0; i < 48; i++) parts.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n'));
    parts.push(Buffer.from('0\r\n\r\n'));
    const response = parseRaw(await rawExchange(Buffer.concat(parts)));
    assert.equal(response.status, 413);
    assert.equal(response.json.error.code, 'PAYLOAD_TOO_LARGE');
  });

  test('a 3 MiB body through an ordinary HTTP client: 413 PAYLOAD_TOO_LARGE', async () => {
    assertApiError(await postTokens(Buffer.alloc(3 * 1024 * 1024, 0x20)), 'PAYLOAD_TOO_LARGE');
  });

  test('a small chunked body is read whole', async () => {
    const body = '{"label":"chunked"}';
    const request = `POST /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${bob.token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
      `5\r\n${body.slice(0, 5)}\r\n${(body.length - 5).toString(16)}\r\n${body.slice(5)}\r\n0\r\n\r\n`;
    const response = parseRaw(await rawExchange(request));
    assert.equal(response.status, 201);
    assert.equal(response.json.label, 'chunked');
    assert.equal((await call(target, 'DELETE', `/api/v1/tokens/${response.json.id}`, { token: bob.token })).status, 204);
  });

  test('a body on a GET is ignored', async () => {
    const response = await call(target, 'GET', '/api/v1/auth/me', { token: alice.token, rawBody: '{"x":1}', headers: { 'content-type': 'application/json' } });
    assert.equal(response.status, 200);
  });
});

describe('odd Authorization values', () => {
  const refused: [name: string, header: () => string][] = [
    ['the token without a scheme', () => alice.token],
    ['Basic credentials', () => 'Basic x'],
    ['Basic with the token', () => `Basic ${alice.token}`],
    ['"Bearer" alone', () => 'Bearer'],
    ['"Bearer" and a space', () => 'Bearer '],
    ['a token after a tab', () => `Bearer\t${alice.token}`],
    ['two tokens', () => `Bearer ${alice.token} ${alice.token}`],
    ['the token and junk', () => `Bearer ${alice.token} x`],
    ['a 10 KB value', () => `Bearer ${'a'.repeat(10 * 1024)}`],
    ['the right id with a wrong secret', () => `Bearer ${alice.token.slice(0, 17)}${'0'.repeat(36)}`],
    ['the right secret with another id', () => `Bearer svc_pat_ffffffff_${alice.token.slice(-36)}`],
    ['the token in upper case', () => `Bearer ${alice.token.toUpperCase()}`],
    ['the token cut short', () => `Bearer ${alice.token.slice(0, -1)}`],
    ['the token with a character more', () => `Bearer ${alice.token}a`],
    ['only the prefix', () => `Bearer ${alice.token.slice(0, 16)}`],
    ['another scheme name', () => `Token ${alice.token}`],
    ['non-ASCII', () => 'Bearer t\u00f6ken'],
    ['the token quoted', () => `Bearer "${alice.token}"`],
  ];
  for (const [name, header] of refused) {
    test(`${name}: 401 UNAUTHORIZED`, async () => {
      assertApiError(await call(target, 'GET', '/api/v1/auth/me', { headers: { authorization: header() } }), 'UNAUTHORIZED');
    });
  }

  const accepted: [name: string, header: () => string][] = [
    ['lower-case "bearer"', () => `bearer ${alice.token}`],
    ['upper-case "BEARER"', () => `BEARER ${alice.token}`],
    ['extra spaces after the scheme', () => `Bearer    ${alice.token}`],
    ['trailing spaces', () => `Bearer ${alice.token}   `],
  ];
  for (const [name, header] of accepted) {
    test(`${name}: accepted`, async () => {
      const response = await call(target, 'GET', '/api/v1/auth/me', { headers: { authorization: header() } });
      assert.equal(response.status, 200, response.text);
      assert.equal(response.json.id, alice.id);
    });
  }

  test('a token in the query string is not a credential', async () => {
    assertApiError(await call(target, 'GET', `/api/v1/auth/me?access_token=${alice.token}`), 'UNAUTHORIZED');
  });
});

describe('hostile Host headers', () => {
  const hosts: [name: string, host: string, code: ErrorCode | null][] = [
    ['a very long name', `${'a'.repeat(5_000)}.localhost`, 'NOT_FOUND'],
    ['a very long label', `${'a'.repeat(64)}.localhost`, 'NOT_FOUND'],
    ['unicode', 'b\u00fccher.localhost', 'NOT_FOUND'],
    ['path characters', 'localhost/../../etc', 'NOT_FOUND'],
    ['a query in the host', 'localhost?x=1', 'NOT_FOUND'],
    ['user info', 'user@localhost', 'NOT_FOUND'],
    ['another domain', 'evil.example', 'NOT_FOUND'],
    ['our domain as a prefix', 'localhost.evil.example', 'NOT_FOUND'],
    ['a port out of range', 'localhost:999999', 'NOT_FOUND'],
    ['two ports', 'localhost:80:80', 'NOT_FOUND'],
    ['a tunnel name with an underscore', 'no_such.localhost', 'NOT_FOUND'],
    ['a free tunnel name', 'free-name.localhost', 'TUNNEL_NOT_FOUND'],
    ['empty (answered as the API)', '', null],
  ];
  for (const [name, host, code] of hosts) {
    test(`${name}: ${code ?? 'the API'}`, async () => {
      const response = await call(target, 'GET', '/api/v1/auth/me', { token: alice.token, host });
      if (code === null) assert.equal(response.status, 200);
      else assertApiError(response, code);
    });
  }

  // What an HTTP client would not send: written raw. A Host that names no site is 404; what the parser
  // refuses (a NUL) and two Host headers (a framing refusal: issue 11, the request-framing table) are 400.
  const rawHosts: [name: string, hostLines: string, status: number, code: ErrorCode][] = [
    ['a broken IPv6 literal', 'Host: [::1\r\n', 404, 'NOT_FOUND'],
    ['a Host with a space', 'Host: local host\r\n', 404, 'NOT_FOUND'],
    ['a NUL in the Host', 'Host: localhost\u0000.evil\r\n', 400, 'INVALID_REQUEST'],
    ['a second Host naming another domain', 'Host: evil.example\r\nHost: localhost\r\n', 400, 'INVALID_REQUEST'],
  ];
  for (const [name, hostLines, status, code] of rawHosts) {
    test(`raw: ${name}: ${status} ${code}`, async () => {
      const text = await rawExchange(`GET /api/v1/auth/me HTTP/1.1\r\n${hostLines}Authorization: Bearer ${alice.token}\r\nConnection: close\r\n\r\n`, { end: true });
      const response = parseRaw(text);
      assert.equal(response.status, status, text);
      assert.equal(response.json.error.code, code);
    });
  }
});

describe('not quite HTTP', () => {
  const garbage: [name: string, bytes: string | Buffer][] = [
    ['a word', 'GARBAGE\r\n\r\n'],
    ['binary', Buffer.from([0x00, 0x01, 0xff, 0xfe, 0x0d, 0x0a, 0x0d, 0x0a])],
    ['HTTP/1.1 without Host', 'GET /api/v1/instance HTTP/1.1\r\n\r\n'],
    ['a lower-case method', 'get /api/v1/instance HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    ['an invalid Content-Length', 'POST /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n{}'],
    ['Content-Length and chunked together', 'POST /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['a header without a colon', 'GET /api/v1/instance HTTP/1.1\r\nHost: localhost\r\nNoColonHere\r\n\r\n'],
    ['a truncated request line', 'GET /api/v1/ins'],
  ];
  for (const [name, bytes] of garbage) {
    test(`${name}: refused or closed, never a crash`, async () => {
      const text = await rawExchange(bytes, { end: true });
      if (text !== '') assert.match(text, /^HTTP\/1\.1 [45]\d\d /);
      assert.equal((await call(target, 'GET', '/api/v1/instance')).status, 200);
    });
  }

  test('a 100 KB path: 431 HEADERS_TOO_LARGE (the head is over 32 KiB), without echoing the path', async () => {
    const response = await call(target, 'GET', `/${'x'.repeat(100_000)}`);
    assertApiError(response, 'HEADERS_TOO_LARGE');
    assert.ok(response.text.length < 1_000, `the answer is ${response.text.length} bytes`);
  });

  test('a 20 KB path: 404 NOT_FOUND, without echoing the whole path', async () => {
    const response = await call(target, 'GET', `/${'x'.repeat(20_000)}`);
    assertApiError(response, 'NOT_FOUND');
    assert.ok(response.text.length < 1_000, `the answer is ${response.text.length} bytes`);
  });

  test('a dot-dot path is not resolved: 404 NOT_FOUND', async () => {
    const text = await rawExchange(`GET /api/v1/../v1/auth/me HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${alice.token}\r\nConnection: close\r\n\r\n`);
    const response = parseRaw(text);
    assert.equal(response.status, 404, text);
    assert.equal(response.json.error.code, 'NOT_FOUND');
  });

  test('a method llhttp does not know is refused 400, never answered by a route', async () => {
    const text = await rawExchange(`BREW /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${alice.token}\r\nConnection: close\r\n\r\n`, { end: true });
    const response = parseRaw(text);
    assert.equal(response.status, 400, text);
    assert.equal(response.json.error.code, 'INVALID_REQUEST');
  });

  const paths: [name: string, method: string, path: string, code: ErrorCode][] = [
    ['an encoded dot-dot token id', 'DELETE', '/api/v1/tokens/%2e%2e', 'NOT_FOUND'],
    ['an encoded slash in a token id', 'DELETE', `/api/v1/tokens/tok_1%2F..%2F`, 'NOT_FOUND'],
    ['a broken escape in a token id', 'DELETE', '/api/v1/tokens/%E0%A4%A', 'NOT_FOUND'],
    ['a 10 KB token id', 'DELETE', `/api/v1/tokens/${'a'.repeat(10_000)}`, 'NOT_FOUND'],
    ['unicode in a tunnel name', 'GET', '/api/v1/tunnels/%F0%9F%A6%A1', 'NOT_FOUND'],
    ['a bad escape in the query', 'GET', '/api/v1/requests?subdomain=%ZZ', 'NOT_FOUND'],
    ['a repeated query parameter', 'GET', '/api/v1/requests?subdomain=a-b-c&subdomain=d-e-f', 'NOT_FOUND'],
    ['a huge limit', 'GET', '/api/v1/requests?subdomain=abc&limit=99999999999999999999', 'INVALID_REQUEST'],
  ];
  for (const [name, method, path, code] of paths) {
    test(`${name}: ${code}`, async () => {
      assertApiError(await call(target, method, path, { token: alice.token }), code);
    });
  }
});
