/**
 * The last-known owner map (src/edge/cluster/owner-map.ts) on its own, with a clock the test moves: what
 * Redis pushes is ordered by fence whatever order it arrives in, and a lookup answers the owner, "none"
 * or "cannot know" as the edge's state with Redis says.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OwnerMap, SUSPECT_MS } from '../../src/edge/cluster/owner-map.js';
import type { Attachment, LeaseOwner } from '../../src/store/redis-leases.js';

const TTL = 10_000;
const IN_STEP_LONG = TTL * 2;
const OUT_OF_STEP = -1;

function owner(subdomain: string, fence: number): LeaseOwner {
  return { subdomain, fence, accountId: 'usr_1', tokenId: 'tok_1', port: 3000, startedAt: 0, publicUrl: '', instance: 'client-1', clientAddress: '', policy: '', pool: false, state: 'live', expiresAt: 0 };
}

function attachment(nodeId: string, fence: number, boot = `boot-${nodeId}`): Attachment {
  return { nodeId, fence, boot, advertise: `http://${nodeId}`, expiresAt: 0 };
}

/** A new grant whose first attachment has the grant's fence (as the claim script makes it). */
function grant(map: OwnerMap, subdomain: string, nodeId: string, fence: number, boot?: string): void {
  map.granted(owner(subdomain, fence), attachment(nodeId, fence, boot), TTL);
}

function fixture(): { map: OwnerMap; advance(ms: number): void } {
  let now = 1_000;
  return { map: new OwnerMap(TTL, () => now), advance: (ms) => (now += ms) };
}

test('a release outranks the grant of the same fence and anything older, in whatever order they arrive', () => {
  const { map } = fixture();
  map.released('name', 'a', 5);
  grant(map, 'name', 'a', 5); // a snapshot read before the release
  assert.equal(map.lookup('name', IN_STEP_LONG), null);
  grant(map, 'name', 'b', 4); // an older grant, late
  assert.equal(map.lookup('name', IN_STEP_LONG), null);
  grant(map, 'name', 'c', 6);
  assert.equal(map.lookup('name', IN_STEP_LONG)?.nodeId, 'c');
  map.released('name', 'a', 5); // a late release of an older grant
  assert.equal(map.lookup('name', IN_STEP_LONG)?.nodeId, 'c');
});

test('while Redis is away the last-known owner is answered past its validity, and an unknown name cannot be known', () => {
  const { map, advance } = fixture();
  grant(map, 'held', 'a', 1);
  map.released('gone', 'a', 2);
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
  grant(map, 'one', 'a', 1);
  grant(map, 'old', 'a', 2, 'earlier-boot');
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
  grant(map, 'name', 'a', 3);
  assert.equal(map.needsCheck('name'), false);
  map.doubt('name');
  assert.equal(map.needsCheck('name'), true);
  map.checked('name', { owner: owner('name', 3), attachments: [{ attachment: attachment('a', 3), remainingMs: TTL }] }, map.factCount);
  map.doubt('name');
  assert.equal(map.needsCheck('name'), false, 'asked less than a second ago');
  advance(1_000);
  assert.equal(map.needsCheck('name'), true);
  map.checked('name', null, map.factCount);
  assert.equal(map.lookup('name', IN_STEP_LONG), null);
});

test('sweep forgets releases after a lease period and lapsed owners only once in step for a lease period', () => {
  const { map, advance } = fixture();
  grant(map, 'lapsed', 'a', 1);
  map.released('released', 'a', 2);
  advance(TTL * 2 + 1);
  map.sweep(0);
  assert.equal(map.size, 1, 'the release is forgotten; the lapsed owner is kept while just back in step');
  map.sweep(TTL);
  assert.equal(map.size, 0);
});

test('a client on several edges: each attachment is ordered by its own fence, lookups take them in turn and avoid the one that refused', () => {
  const { map, advance } = fixture();
  grant(map, 'pair', 'a', 10);
  map.granted(owner('pair', 10), attachment('b', 12), TTL);
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) seen.add(map.lookup('pair', IN_STEP_LONG, 'c')!.nodeId);
  assert.deepEqual([...seen].sort(), ['a', 'b'], 'forwarded requests spread over both edges');
  assert.equal(map.lookup('pair', IN_STEP_LONG, 'a')?.nodeId, 'b', 'an edge forwarding asks for another edge than itself');
  map.suspect('a');
  for (let i = 0; i < 4; i++) assert.equal(map.lookup('pair', IN_STEP_LONG, 'c')?.nodeId, 'b', 'the edge that refused is avoided');
  advance(SUSPECT_MS + 1);
  map.sweep(IN_STEP_LONG);
  map.released('pair', 'b', 12);
  map.granted(owner('pair', 10), attachment('b', 12), TTL); // a snapshot read before b let go
  for (let i = 0; i < 4; i++) assert.equal(map.lookup('pair', IN_STEP_LONG, 'c')?.nodeId, 'a');
  // Another client takes the name over: everything known of the old one goes.
  grant(map, 'pair', 'c', 20);
  assert.equal(map.lookup('pair', IN_STEP_LONG, 'x')?.nodeId, 'c');
  assert.equal(map.lookup('pair', IN_STEP_LONG, 'x')?.fence, 20);
  map.granted(owner('pair', 10), attachment('a', 13), TTL); // late news of the old owner
  assert.equal(map.lookup('pair', IN_STEP_LONG, 'x')?.nodeId, 'c');
});

test('what Redis answers for a doubted name drops the attachments it no longer has', () => {
  const { map } = fixture();
  grant(map, 'pair', 'a', 10);
  map.granted(owner('pair', 10), attachment('b', 12), TTL);
  map.doubt('pair');
  map.checked('pair', { owner: owner('pair', 10), attachments: [{ attachment: attachment('b', 12), remainingMs: TTL }] }, map.factCount);
  for (let i = 0; i < 4; i++) assert.equal(map.lookup('pair', IN_STEP_LONG, 'c')?.nodeId, 'b');
});

test('an answer from Redis read before a grant does not undo it: what the map learnt after the read began stays', () => {
  const { map } = fixture();
  // No owner yet; a read of the name goes to Redis, and the name is granted here before the answer comes.
  const readFrom = map.factCount;
  grant(map, 'race', 'b', 7);
  map.checked('race', null, readFrom);
  assert.equal(map.lookup('race', IN_STEP_LONG)?.nodeId, 'b');
  // The same answer read after the grant (the name was let go since) does take it away.
  map.checked('race', null, map.factCount);
  assert.equal(map.lookup('race', IN_STEP_LONG), null);

  // A live answer that lacks an attachment made after the read began keeps that attachment.
  grant(map, 'pair', 'a', 10);
  const before = map.factCount;
  map.granted(owner('pair', 10), attachment('c', 11), TTL);
  map.checked('pair', { owner: owner('pair', 10), attachments: [{ attachment: attachment('a', 10), remainingMs: TTL }] }, before);
  const seen = new Set<string | undefined>();
  for (let i = 0; i < 4; i++) seen.add(map.lookup('pair', IN_STEP_LONG, 'z')?.nodeId);
  assert.deepEqual([...seen].sort(), ['a', 'c']);
});
