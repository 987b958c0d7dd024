/**
 * The last-known owner map (src/edge/cluster/owner-map.ts) on its own, with a clock the test moves: what
 * Redis pushes is ordered by fence whatever order it arrives in, and a lookup answers the owner, "none"
 * or "cannot know" as the edge's state with Redis says.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OwnerMap } from '../../src/edge/cluster/owner-map.js';
import type { TunnelLease } from '../../src/edge/cluster/types.js';

const TTL = 10_000;
const IN_STEP_LONG = TTL * 2;
const OUT_OF_STEP = -1;

function lease(subdomain: string, nodeId: string, fence: number, boot = `boot-${nodeId}`): TunnelLease {
  return { subdomain, nodeId, fence, boot, advertise: `http://${nodeId}`, accountId: 'usr_1', tokenId: 'tok_1', port: 3000, startedAt: 0, publicUrl: '' };
}

function fixture(): { map: OwnerMap; advance(ms: number): void } {
  let now = 1_000;
  return { map: new OwnerMap(TTL, () => now), advance: (ms) => (now += ms) };
}

test('a release outranks the grant of the same fence and anything older, in whatever order they arrive', () => {
  const { map } = fixture();
  map.released('name', 5);
  map.granted(lease('name', 'a', 5), TTL); // a snapshot read before the release
  assert.equal(map.lookup('name', IN_STEP_LONG), null);
  map.granted(lease('name', 'b', 4), TTL); // an older grant, late
  assert.equal(map.lookup('name', IN_STEP_LONG), null);
  map.granted(lease('name', 'c', 6), TTL);
  assert.equal(map.lookup('name', IN_STEP_LONG)?.nodeId, 'c');
  map.released('name', 5); // a late release of an older grant
  assert.equal(map.lookup('name', IN_STEP_LONG)?.nodeId, 'c');
});

test('while Redis is away the last-known owner is answered past its validity, and an unknown name cannot be known', () => {
  const { map, advance } = fixture();
  map.granted(lease('held', 'a', 1), TTL);
  map.released('gone', 2);
  advance(TTL * 3);
  assert.equal(map.lookup('held', OUT_OF_STEP)?.nodeId, 'a', 'the owner decides whether it still serves');
  assert.equal(map.lookup('unknown', OUT_OF_STEP), undefined);
  assert.equal(map.lookup('gone', OUT_OF_STEP), undefined, 'it may have been granted again elsewhere');
  // Back in step: the owner has a lease period to renew or claim again before the map gives up on it.
  assert.equal(map.lookup('held', 0)?.nodeId, 'a');
  assert.equal(map.lookup('unknown', 0), null);
  assert.equal(map.lookup('held', TTL), null, 'not renewed for a lease period while in step: Redis let it go');
});

test("a node's renewal round extends the validity of every lease of that boot, not of an earlier boot's", () => {
  const { map, advance } = fixture();
  map.granted(lease('one', 'a', 1), TTL);
  map.granted(lease('old', 'a', 2, 'earlier-boot'), TTL);
  advance(TTL - 1_000);
  map.renewed({ nodeId: 'a', boot: 'boot-a', advertise: 'http://a' }, TTL);
  advance(5_000);
  assert.equal(map.lookup('one', IN_STEP_LONG)?.nodeId, 'a');
  assert.equal(map.lookup('old', IN_STEP_LONG), null);
  assert.deepEqual(map.peers('b'), [{ nodeId: 'a', boot: 'boot-a', advertise: 'http://a' }]);
  assert.deepEqual(map.peers('a'), [], 'not itself');
});

test('a doubted owner is asked of Redis at most once a second, and what Redis says replaces it', () => {
  const { map, advance } = fixture();
  map.granted(lease('name', 'a', 3), TTL);
  assert.equal(map.needsCheck('name'), false);
  map.doubt('name');
  assert.equal(map.needsCheck('name'), true);
  map.checked('name', { lease: lease('name', 'a', 3), remainingMs: TTL });
  map.doubt('name');
  assert.equal(map.needsCheck('name'), false, 'asked less than a second ago');
  advance(1_000);
  assert.equal(map.needsCheck('name'), true);
  map.checked('name', null);
  assert.equal(map.lookup('name', IN_STEP_LONG), null);
});

test('sweep forgets releases after a lease period and lapsed owners only once in step for a lease period', () => {
  const { map, advance } = fixture();
  map.granted(lease('lapsed', 'a', 1), TTL);
  map.released('released', 2);
  advance(TTL * 2 + 1);
  map.sweep(0);
  assert.equal(map.size, 1, 'the release is forgotten; the lapsed owner is kept while just back in step');
  map.sweep(TTL);
  assert.equal(map.size, 0);
});
