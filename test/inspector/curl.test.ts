/**
 * Shell quoting for "copy as curl", checked by the shell itself: every word, however hostile, comes back
 * from bash (and sh for the single-quoted ones) exactly as it went in.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { ansiQuote, shellQuote } from '../../src/inspector/curl.js';

const WORDS = [
  'plain',
  '',
  "it's",
  "''",
  '$HOME `id` $(id) ; rm -rf / && echo',
  'a\\b\\\\c',
  'tab\there',
  'line\nbreak',
  'ünïcödé ✓',
  'ctrl\u0001\u001b[31m',
  '"double" and \'single\'',
  '!history !! ^x',
  '<script>alert(1)</script>',
  '*?[a-z]{x,y}~',
];

test('shellQuote: bash gives every word back unchanged', () => {
  for (const word of WORDS) {
    const out = execFileSync('bash', ['-c', `printf '%s' ${shellQuote(word)}`]);
    assert.equal(out.toString('utf8'), word, JSON.stringify(word));
  }
});

test('shellQuote: words without control characters need no bash, plain sh will do', () => {
  for (const word of WORDS.filter((w) => !/[\u0000-\u0008\u000b-\u001f]/.test(w))) {
    const out = execFileSync('sh', ['-c', `printf '%s' ${shellQuote(word)}`]);
    assert.equal(out.toString('utf8'), word, JSON.stringify(word));
  }
});

test('ansiQuote: any bytes but NUL come back from bash exactly', () => {
  const bytes = Buffer.from(Array.from({ length: 255 }, (_, i) => i + 1));
  const out = execFileSync('bash', ['-c', `printf '%s' ${ansiQuote(bytes)}`]);
  assert.deepEqual(out, bytes);
});
