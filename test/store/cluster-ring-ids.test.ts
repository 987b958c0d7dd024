/**
 * Request ids in a cluster (issue 17): each edge keeps its captures in its own LMDB, so two edges must
 * never hand out the same id. Edge number n numbers its rings from n × 2^20; an id names the edge that
 * stored it; a data directory that joins a cluster keeps its older rings' ids.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CaptureStore, captureId, clusterRingIds, MAX_CLUSTER_NODE_NUMBER, nodeNumberOfCaptureId } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-ring-ids-');

test('two cluster edges with fresh stores give their first rings different ids, each naming its edge', async () => {
  const a = CaptureStore.open(freshDir(), { ringIds: clusterRingIds(1) });
  const b = CaptureStore.open(freshDir(), { ringIds: clusterRingIds(2) });
  try {
    const ringA = a.ring('acct_1', 'quiet-river-42', 10);
    const ringB = b.ring('acct_1', 'quiet-river-42', 10);
    assert.notEqual(ringA.ringId, ringB.ringId);
    assert.equal(nodeNumberOfCaptureId(captureId(ringA.ringId, 1)), 1);
    assert.equal(nodeNumberOfCaptureId(captureId(ringB.ringId, 1)), 2);
    assert.equal(a.ring('acct_1', 'other', 10).ringId, ringA.ringId + 1);
  } finally {
    await a.close();
    await b.close();
  }
});

test('a single-edge store joining a cluster keeps its old rings and numbers new ones in its span', async () => {
  const dir = freshDir();
  const single = CaptureStore.open(dir);
  const old = single.ring('acct_1', 'before', 10).ringId;
  await single.close();
  const joined = CaptureStore.open(dir, { ringIds: clusterRingIds(3) });
  try {
    assert.equal(joined.ring('acct_1', 'before', 10).ringId, old);
    assert.equal(nodeNumberOfCaptureId(captureId(old, 1)), 0);
    assert.equal(nodeNumberOfCaptureId(captureId(joined.ring('acct_1', 'after', 10).ringId, 1)), 3);
  } finally {
    await joined.close();
  }
});

test('edge numbers outside 1..MAX_CLUSTER_NODE_NUMBER are refused, and the last span ends at the last 8-hex-digit ring id', () => {
  assert.throws(() => clusterRingIds(0), /1 to 4094/);
  assert.throws(() => clusterRingIds(MAX_CLUSTER_NODE_NUMBER + 1));
  assert.ok(clusterRingIds(MAX_CLUSTER_NODE_NUMBER).last <= 0xffffffff);
  assert.equal(nodeNumberOfCaptureId('req_nothex'), null);
});
