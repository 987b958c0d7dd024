/**
 * Issue 23 gave the edge a free-space floor (`--min-free-disk`, by default the larger of 256 MiB and 5%):
 * below it captures are skipped and held webhooks refused. A test's edge keeps its data in the machine's
 * temp file system, which on a CI runner may have less free than that: the helpers start every test edge
 * with the floor off unless the test sets one, so no test depends on the runner's free space.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startEdge, testEdgeArgs } from './helpers.js';

test('startEdge: the floor is off unless the test sets one', async () => {
  const plain = await startEdge();
  try {
    assert.equal(plain.edge.space.minFreeBytes, 0);
    assert.equal(plain.edge.space.low, false);
  } finally {
    await plain.close();
  }
  // More than any disk has free: a test that sets its own floor gets it.
  const floored = await startEdge({ minFreeDisk: { bytes: 2 ** 60 } });
  try {
    assert.equal(floored.edge.space.minFreeBytes, 2 ** 60);
    assert.equal(floored.edge.space.low, true);
  } finally {
    await floored.close();
  }
});

test('spawnCli and runCli: `burrow edge` gets --min-free-disk 0 and --agent-port 0 unless the test gives them; other commands and --help are left alone', () => {
  assert.deepEqual(testEdgeArgs(['edge', '--port', '0']), ['edge', '--port', '0', '--min-free-disk', '0', '--agent-port', '0']);
  assert.deepEqual(testEdgeArgs(['edge', '--min-free-disk', '24MiB']), ['edge', '--min-free-disk', '24MiB', '--agent-port', '0']);
  assert.deepEqual(testEdgeArgs(['edge', '--min-free-disk=5%']), ['edge', '--min-free-disk=5%', '--agent-port', '0']);
  // Issue 24: the agent port defaults to --port + 1, which another test may hold; a test that names one keeps it.
  assert.deepEqual(testEdgeArgs(['edge', '--port', '9000', '--agent-port', '9005']), ['edge', '--port', '9000', '--agent-port', '9005', '--min-free-disk', '0']);
  assert.deepEqual(testEdgeArgs(['edge', '--help']), ['edge', '--help']);
  assert.deepEqual(testEdgeArgs(['http', '3000']), ['http', '3000']);
});
