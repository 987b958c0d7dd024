import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { HEAP_GROWING_PERCENT, heapGrowingFlag } from '../../src/cli/heap.js';

test('the edge and the client grow their heaps to four times what is live, unless node was told otherwise', () => {
  assert.equal(HEAP_GROWING_PERCENT, 300);
  assert.equal(heapGrowingFlag([]), '--heap-growing-percent=300');
  assert.equal(heapGrowingFlag(['--enable-source-maps']), '--heap-growing-percent=300');
  assert.equal(heapGrowingFlag(['--heap-growing-percent=50']), null);
  assert.equal(heapGrowingFlag(['--heap_growing_percent=50']), null);
});

test('the flag is one V8 takes from inside a running process', () => {
  // setFlagsFromString ignores names it does not know without a word: a rename in a later V8 would
  // silently undo the tuning. V8 rejects an unknown flag on the command line, so ask it there.
  const known = spawnSync(process.execPath, [heapGrowingFlag([])!, '-e', '0'], { encoding: 'utf8' });
  assert.equal(known.status, 0, known.stderr);
  const unknown = spawnSync(process.execPath, ['--heap-growing-percent-not-a-flag=1', '-e', '0'], { encoding: 'utf8' });
  assert.notEqual(unknown.status, 0, 'node accepted an unknown V8 flag: this test cannot tell a renamed flag');
});
