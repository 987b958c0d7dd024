/**
 * The error registry (src/errors.ts) against its documentation (docs/errors.md) and the spec: the same
 * codes in both directions, each with the same HTTP status, so code and docs cannot drift.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BurrowError, defaultErrorJson, ERROR_CODES, isErrorCode, type ErrorCode } from '../src/errors.js';
import { ROOT } from './helpers.js';

interface DocumentedCode {
  status: number;
  meaning: string;
  where: string;
}

/** The rows of the table in docs/errors.md: | `CODE` | status | meaning | where it is returned |. */
function documentedCodes(): Map<string, DocumentedCode> {
  const text = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
  const rows = new Map<string, DocumentedCode>();
  for (const line of text.split('\n')) {
    const match = /^\|\s*`([A-Z_]+)`\s*\|\s*(\d{3})\s*\|(.*)\|(.*)\|\s*$/.exec(line);
    if (match === null) continue;
    assert.equal(rows.has(match[1]!), false, `${match[1]} is listed twice in docs/errors.md`);
    rows.set(match[1]!, { status: Number(match[2]), meaning: match[3]!.trim(), where: match[4]!.trim() });
  }
  return rows;
}

const registry = Object.keys(ERROR_CODES) as ErrorCode[];
const documented = documentedCodes();

test('every code of the registry is in docs/errors.md', () => {
  const missing = registry.filter((code) => !documented.has(code));
  assert.deepEqual(missing, [], 'add these to the table in docs/errors.md');
});

test('every code in docs/errors.md is in the registry', () => {
  const unknown = [...documented.keys()].filter((code) => !isErrorCode(code));
  assert.deepEqual(unknown, [], 'docs/errors.md lists codes that src/errors.ts does not have');
});

test('the table lists the codes in the registry order', () => {
  assert.deepEqual([...documented.keys()], registry);
});

for (const code of registry) {
  test(`${code}: the documented status is the registry status (${ERROR_CODES[code].status}), with a meaning and where it is returned`, () => {
    const row = documented.get(code);
    assert.ok(row, `${code} is not documented`);
    assert.equal(row.status, ERROR_CODES[code].status);
    assert.ok(row.meaning.length > 0, 'a meaning');
    assert.ok(row.where.length > 0, 'where it is returned');
  });
}

test("the spec's six codes keep the spec's statuses (spec section 7)", () => {
  const spec: Record<string, number> = {
    UNAUTHORIZED: 401,
    TOKEN_LIMIT_REACHED: 403,
    TUNNEL_LIMIT_REACHED: 403,
    SUBDOMAIN_TAKEN: 409,
    NOT_FOUND: 404,
    RATE_LIMITED: 429,
  };
  for (const [code, status] of Object.entries(spec)) {
    assert.ok(isErrorCode(code), `${code} is missing from the registry`);
    assert.equal(ERROR_CODES[code].status, status, code);
  }
});

test("Burrow's additions keep the statuses of DESIGN.md section 4", () => {
  const design: Record<string, number> = {
    INVALID_REQUEST: 400,
    PAYLOAD_TOO_LARGE: 413,
    METHOD_NOT_ALLOWED: 405,
    TUNNEL_NOT_FOUND: 404,
    TUNNEL_CLOSED: 502,
    LOCAL_UNREACHABLE: 502,
    LOCAL_TIMEOUT: 504,
  };
  for (const [code, status] of Object.entries(design)) assert.equal(ERROR_CODES[code as ErrorCode].status, status, code);
});

test('every code is an upper-case name with an error status and a default message', () => {
  for (const code of registry) {
    assert.match(code, /^[A-Z][A-Z_]*[A-Z]$/);
    const { status, message } = ERROR_CODES[code];
    assert.ok(status >= 400 && status <= 599, `${code}: ${status}`);
    assert.ok(message.length > 0 && message.endsWith('.'), `${code}: a sentence`);
  }
});

test('BurrowError carries code, status, headers and the spec body shape', () => {
  for (const code of registry) {
    const plain = new BurrowError(code);
    assert.equal(plain.code, code);
    assert.equal(plain.status, ERROR_CODES[code].status);
    assert.equal(plain.message, ERROR_CODES[code].message);
    assert.deepEqual(plain.headers, {});
    assert.deepEqual(plain.toBody(), { error: { code, message: ERROR_CODES[code].message } });
    assert.equal(defaultErrorJson(code), JSON.stringify(plain.toBody()));
    assert.ok(plain instanceof Error);
  }
  const custom = new BurrowError('RATE_LIMITED', 'Slow down.', { 'Retry-After': '3' });
  assert.deepEqual(custom.toBody(), { error: { code: 'RATE_LIMITED', message: 'Slow down.' } });
  assert.deepEqual(custom.headers, { 'Retry-After': '3' });
});

test('isErrorCode accepts registry codes only', () => {
  for (const value of ['NOT_FOUND', 'UNAUTHORIZED']) assert.equal(isErrorCode(value), true);
  for (const value of ['not_found', 'toString', '__proto__', 'constructor', '', 404, null, undefined]) assert.equal(isErrorCode(value), false, String(value));
});
