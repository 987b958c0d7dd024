/**
 * The request log's writer (`batchedWriter`, `jsonEvents`): lines wait up to LINE_BATCH_MS and go out in
 * one write; a control event is written at once after the lines before it; what waits when the process
 * exits is written (a real child process, its stdout a pipe and a file).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { batchedWriter, jsonEvents, LINE_BATCH_MS } from '../../src/cli/commands/http.js';

/** A stream that records each write it is given. */
function recorder(): { out: Writable; writes: string[] } {
  const writes: string[] = [];
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      writes.push(chunk.toString());
      done();
    },
  });
  return { out, writes };
}

const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test('lines wait for later ones and go out in one write, within LINE_BATCH_MS', async () => {
  const { out, writes } = recorder();
  const lines = batchedWriter(out);
  lines('GET / 200 1ms\n');
  lines('GET /a 200 1ms\n');
  // Not one write per line, and not at the turn's end: a request at a time would pay a syscall each.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(writes.length, 0);
  await wait(LINE_BATCH_MS * 4);
  assert.deepEqual(writes, ['GET / 200 1ms\nGET /a 200 1ms\n']);
  lines('GET /b 200 1ms\n');
  await wait(LINE_BATCH_MS * 4);
  assert.deepEqual(writes, ['GET / 200 1ms\nGET /a 200 1ms\n', 'GET /b 200 1ms\n']);
});

test('flush writes what waits now, once; a batch past 64 KiB goes out without waiting', () => {
  const { out, writes } = recorder();
  const lines = batchedWriter(out);
  lines('one\n');
  lines.flush();
  lines.flush();
  assert.deepEqual(writes, ['one\n']);
  const long = `${'x'.repeat(1023)}\n`;
  for (let i = 0; i < 64; i++) lines(long);
  assert.equal(writes.length, 2);
  assert.equal(writes[1], long.repeat(64));
});

test('--json: a control event is written at once, after the request events before it', () => {
  const { out, writes } = recorder();
  const events = jsonEvents(out);
  events({ event: 'request', id: 'req_1', path: '/a' });
  events({ event: 'websocket', id: 'req_2', path: '/ws' });
  assert.equal(writes.length, 0);
  events({ event: 'closed', by_user: true });
  assert.equal(writes.length, 1);
  assert.deepEqual(
    writes[0]!.trim().split('\n').map((line) => (JSON.parse(line) as { event: string }).event),
    ['request', 'websocket', 'closed'],
  );
});

test('lines still waiting when the process exits are written (a pipe and a file)', () => {
  const module = fileURLToPath(new URL('../../src/cli/commands/http.js', import.meta.url));
  const script = `
    const { batchedWriter } = await import(${JSON.stringify(module)});
    const lines = batchedWriter(process.stdout);
    for (let i = 0; i < 3; i++) lines('line ' + i + '\\n');
    process.exit(0);
  `;
  const piped = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(piped.status, 0, piped.stderr);
  assert.equal(piped.stdout, 'line 0\nline 1\nline 2\n');

  const dir = mkdtempSync(join(tmpdir(), 'burrow-lines-'));
  try {
    const file = join(dir, 'out.log');
    const natural = script.replace('process.exit(0);', '');
    const toFile = spawnSync('sh', ['-c', `"${process.execPath}" --input-type=module -e '${natural.replace(/'/g, "'\\''")}' > "${file}"`], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(toFile.status, 0, toFile.stderr);
    assert.equal(readFileSync(file, 'utf8'), 'line 0\nline 1\nline 2\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('writers share one exit hook: a process that makes many adds one listener, not one each', () => {
  const before = process.listenerCount('exit');
  const { out } = recorder();
  for (let i = 0; i < 20; i++) batchedWriter(out)('line\n');
  assert.ok(process.listenerCount('exit') <= Math.max(before, 1), `${process.listenerCount('exit')} exit listeners`);
});
