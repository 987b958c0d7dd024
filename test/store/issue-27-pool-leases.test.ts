/**
 * Issue 27, item 4 in cluster mode, at the lease: a name granted to `--pool` is recorded as a pool; pool
 * members of any client process of the account attach beside each other (one attachment per edge, shared
 * by the members there); a client without --pool is refused 'online' naming the pool, and a --pool client
 * is refused on a name that is no pool; another account never gets it; a replace takes it over from every
 * edge attached and the old members' edges lose it. A member's `drop` of another edge's attachment keeps it
 * (other members may be there) and names it for the claiming edge to ask.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RedisLeases, type LeaseClaim } from '../../src/store/redis-leases.js';
import { redisSkip, testRedisClient } from '../redis-server.js';

const { client } = await testRedisClient();
let counter = 0;

const A = { nodeId: 'a', advertise: 'http://127.0.0.1:1', boot: 'boot-a' };
const B = { nodeId: 'b', advertise: 'http://127.0.0.1:2', boot: 'boot-b' };

function claim(subdomain: string, accountId: string, node: typeof A, extra: Partial<LeaseClaim> = {}): LeaseClaim {
  return {
    subdomain,
    accountId,
    tokenId: `tok_${accountId}`,
    port: 3000,
    startedAt: Date.now(),
    publicUrl: `http://${subdomain}.localhost`,
    cap: 1,
    instance: '',
    clientAddress: '127.0.0.1',
    replace: false,
    ...node,
    ...extra,
  };
}

test('a pool lease: members of any client attach beside each other, one attachment per edge; no second owner of another kind, no other account', { skip: redisSkip }, async () => {
  const leases = new RedisLeases(client, `pool${++counter}:`);
  const member = (instance: string): Partial<LeaseClaim> => ({ instance, pool: true });
  const first = await leases.claim(claim('pooled', 'usr_1', A, member('member-one')));
  assert.ok(first.granted);
  assert.equal((await leases.owner('pooled'))?.pool, true, 'the lease records the pool');
  const second = await leases.claim(claim('pooled', 'usr_1', B, member('member-two')));
  assert.ok(second.granted, 'another client joins the pool on another edge, within a cap of one tunnel');
  assert.equal(second.ownerFence, first.fence, 'the same grant');
  assert.ok(second.fence > first.fence);
  const third = await leases.claim(claim('pooled', 'usr_1', A, member('member-three')));
  assert.ok(third.granted);
  assert.equal(third.fence, first.fence, "a member on an edge already attached shares that edge's attachment");
  assert.deepEqual((await leases.owner('pooled'))?.attachments.map((attachment) => [attachment.nodeId, attachment.fence]), [['a', first.fence], ['b', second.fence]]);
  // A member's reconnect naming its old session on B in `drop`: B's attachment stays (other members may be
  // there), and is returned for the claiming edge to ask B to end that client's member alone.
  const moved = await leases.claim(claim('pooled', 'usr_1', A, { ...member('member-two'), drop: [second.fence] }));
  assert.ok(moved.granted);
  assert.equal(moved.fence, first.fence);
  assert.deepEqual(moved.dropped, []);
  assert.deepEqual(moved.leave, [{ ...B, fence: second.fence }]);
  assert.deepEqual((await leases.owner('pooled'))?.attachments.map((attachment) => [attachment.nodeId, attachment.fence]), [['a', first.fence], ['b', second.fence]]);

  // A client without --pool is refused, told that the name is a pool; another account is refused outright.
  const plain = await leases.claim(claim('pooled', 'usr_1', B, { instance: 'plain-client' }));
  assert.ok(!plain.granted && plain.reason === 'online');
  assert.equal(plain.holder.pool, true);
  assert.equal(plain.holder.instance, 'member-one');
  assert.deepEqual(await leases.claim(claim('pooled', 'usr_2', B, member('stranger'))), { granted: false, reason: 'taken', state: 'live' });

  // A name granted without --pool is not joined by a pool member: never a second owner of a lone tunnel.
  const lone = await leases.claim(claim('lone', 'usr_3', A, { instance: 'lone-client' }));
  assert.ok(lone.granted);
  const joining = await leases.claim(claim('lone', 'usr_3', B, member('would-be-member')));
  assert.ok(!joining.granted && joining.reason === 'online');
  assert.equal(joining.holder.pool, false);
  assert.deepEqual((await leases.owner('lone'))?.attachments.map((attachment) => attachment.nodeId), ['a']);

  // Each edge renews its attachment by its fence, whichever member's instance it names.
  const renew = (node: typeof A, fence: number, instance: string): Promise<unknown> => leases.renew(node, [{ subdomain: 'pooled', fence, accountId: 'usr_1', instance }]);
  assert.deepEqual(await renew(A, first.fence, 'member-three'), ['ok']);
  assert.deepEqual(await renew(B, second.fence, 'member-two'), ['ok']);

  // The last member on A leaves: A's attachment goes, the pool lives on B.
  assert.equal(await leases.hold('pooled', 'usr_1', first.fence, 'a', 60_000), true);
  const afterLeave = await leases.owner('pooled');
  assert.equal(afterLeave?.state, 'live');
  assert.deepEqual(afterLeave?.attachments.map((attachment) => attachment.nodeId), ['b']);

  // --replace takes the whole pool over: every edge attached is asked first, then the name is a new grant.
  const takeover = await leases.claim(claim('pooled', 'usr_1', A, { instance: 'replacer', replace: true }));
  assert.deepEqual(takeover, { granted: false, reason: 'takeover', holders: [{ ...B, fence: second.fence }], fence: second.fence });
  const taken = await leases.claim(claim('pooled', 'usr_1', A, { instance: 'replacer', replace: true, fromFence: second.fence }));
  assert.ok(taken.granted && taken.ownerFence > first.fence);
  assert.equal((await leases.owner('pooled'))?.pool, false, 'the replacement serves alone');
  assert.deepEqual(await renew(B, second.fence, 'member-two'), ['lost'], "the old members' edge lost it");
  const lateMember = await leases.claim(claim('pooled', 'usr_1', B, member('member-two')));
  assert.ok(!lateMember.granted && lateMember.reason === 'online', 'a member is not let in beside the replacement');

  // The last member of a pool leaves: the name is held for its account, then a plain client may have it.
  const held = await leases.claim(claim('held-pool', 'usr_4', A, member('member-one')));
  assert.ok(held.granted);
  assert.equal(await leases.hold('held-pool', 'usr_4', held.fence, 'a', 60_000), true);
  assert.equal((await leases.owner('held-pool'))?.state, 'held');
  const plainAfter = await leases.claim(claim('held-pool', 'usr_4', B, { instance: 'plain-client' }));
  assert.ok(plainAfter.granted);
  assert.equal((await leases.owner('held-pool'))?.pool, false);
});
