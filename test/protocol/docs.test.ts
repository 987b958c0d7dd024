/**
 * docs/protocol.md stays true to the code: its constants summary matches constants.ts, and every hex
 * dump in it decodes to the frame the worked example describes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { decode } from '../../src/protocol/codec.js';
import { CLOSE_CODE_BASE, CONNECT_PATH, DEFAULT_SETTINGS, FINAL_GOAWAY_CODES, FrameType, GoAwayCode, NoticeCode, PROTOCOL_HEADER, PROTOCOL_VERSION, ResetCode, RETIRED_FRAME_TYPES } from '../../src/protocol/constants.js';

const doc = readFileSync(new URL('../../../docs/protocol.md', import.meta.url), 'utf8');
const glance = doc.slice(doc.indexOf('## 15. Constants at a glance'));

test('the constants summary matches constants.ts', () => {
  assert.match(glance, new RegExp(`PROTOCOL_VERSION = ${PROTOCOL_VERSION}\\b`));
  assert.ok(glance.includes(`header: ${PROTOCOL_HEADER}`));
  assert.ok(glance.includes(`path: ${CONNECT_PATH}`));
  for (const [name, value] of [...Object.entries(FrameType), ...Object.entries(ResetCode), ...Object.entries(GoAwayCode), ...Object.entries(NoticeCode)]) {
    assert.match(glance, new RegExp(`\\b${name} ${value}\\b`), `${name} ${value}`);
  }
  assert.ok(glance.includes(`${CLOSE_CODE_BASE} + GOAWAY code`));
  assert.ok(glance.includes(`Final (no reconnect): ${[...FINAL_GOAWAY_CODES].sort().join(', ')}`));
  for (const [name, value] of Object.entries(DEFAULT_SETTINGS)) assert.match(glance, new RegExp(`${name} ${value}\\b`), name);
});

test('the frame table lists every type with its number', () => {
  for (const [name, value] of Object.entries(FrameType)) assert.match(doc, new RegExp(`\\| ${value} \\| ${name} \\|`), name);
});

test('the hex dumps of the worked example decode to the frames it describes', () => {
  // Runs of lines that are nothing but hex digits, inside fenced blocks.
  const dumps: Buffer[] = [];
  let run = '';
  for (const line of doc.split('\n')) {
    if (/^[0-9a-f]+$/.test(line)) {
      run += line;
    } else if (run !== '') {
      dumps.push(Buffer.from(run, 'hex'));
      run = '';
    }
  }
  assert.equal(dumps.length, 2);
  const open = decode(dumps[0]!);
  assert.equal(open[0], FrameType.OPEN);
  assert.equal(Buffer.from(open[7] as Uint8Array).toString(), '{"zen":"Keep it logically awesome."}');
  assert.equal(open[8], true);
  assert.equal(open[9], false);
  assert.deepEqual(open[5], [
    'Host', 'quiet-river-42.burrow.example', 'User-Agent', 'GitHub-Hookshot/5a1b3c7', 'Content-Type', 'application/json', 'Content-Length', '36',
    'X-GitHub-Event', 'ping', 'X-Forwarded-For', '192.30.252.44', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'quiet-river-42.burrow.example',
  ]);
  const response = decode(dumps[1]!);
  assert.deepEqual(response, [FrameType.RESPONSE, 1, 200, 'OK', ['Content-Type', 'text/plain', 'Content-Length', '2'], Buffer.from('ok'), true]);
});

test('the retired frame types are listed as retired, never as frames', () => {
  for (const [type, name] of Object.entries(RETIRED_FRAME_TYPES)) {
    assert.ok(glance.includes(`${type} ${name}`), `${type} ${name} in the constants summary`);
    assert.doesNotMatch(doc, new RegExp(`\\| ${type} \\| ${name} \\|`), `${name} is not in the frame table`);
  }
});
