import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BurrowError } from '../../src/errors.js';
import { MAX_CLUSTER_NODE_NUMBER } from '../../src/store/captures.js';
import { RedisLeases, type ClusterCommand, type LeaseClaim } from '../../src/store/redis-leases.js';
import { redisSkip, testRedisClient } from '../redis-server.js';

const { server, client } = await testRedisClient();
let counter = 0;

function fresh(): RedisLeases {
  return new RedisLeases(client, `test${++counter}:`);
}

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
    cap: 3,
    instance: '',
    clientAddress: '127.0.0.1',
    replace: false,
    ...node,
    ...extra,
  };
}

test('a name is granted once; another account is refused while it is live and while it is held', { skip: redisSkip }, async () => {
  const leases = fresh();
  const first = await leases.claim(claim('alpha', 'usr_1', A));
  assert.ok(first.granted);
  assert.deepEqual(await leases.claim(claim('alpha', 'usr_2', B)), { granted: false, reason: 'taken', state: 'live' });
  assert.equal(await leases.hold('alpha', 'usr_1', first.fence, 'a', 60_000), true);
  assert.deepEqual(await leases.claim(claim('alpha', 'usr_2', B)), { granted: false, reason: 'taken', state: 'held' });
  // Its owner gets it back from the hold, on any edge, with a larger fence.
  const again = await leases.claim(claim('alpha', 'usr_1', B));
  assert.ok(again.granted && again.fence > first.fence);
  const owner = await leases.owner('alpha');
  assert.deepEqual(owner?.attachments.map((attachment) => attachment.nodeId), ['b']);
  assert.equal(owner?.state, 'live');
  // Dropped (closed through the API): free for anyone.
  assert.equal(await leases.drop('alpha', 'usr_1', again.fence, 'b'), true);
  assert.equal(await leases.owner('alpha'), null);
  assert.ok((await leases.claim(claim('alpha', 'usr_2', A))).granted);
});

test('the same account live on another edge is a takeover, done only from the fence it was told', { skip: redisSkip }, async () => {
  const leases = fresh();
  const first = await leases.claim(claim('beta', 'usr_1', A));
  assert.ok(first.granted);
  const answer = await leases.claim(claim('beta', 'usr_1', B));
  assert.deepEqual(answer, { granted: false, reason: 'takeover', holders: [{ ...A, fence: first.fence }], fence: first.fence });
  // A stale fence is not enough.
  assert.equal((await leases.claim(claim('beta', 'usr_1', B, { fromFence: first.fence - 1 }))).granted, false);
  const taken = await leases.claim(claim('beta', 'usr_1', B, { fromFence: first.fence }));
  assert.ok(taken.granted);
  // The old holder's hold and drop fail: its attachment is gone (a renewal would find it missing and claim again, as this client).
  assert.deepEqual(await leases.renew(A, [{ subdomain: 'beta', fence: first.fence, accountId: 'usr_1', instance: 'another-client' }]), ['lost']);
  assert.equal(await leases.hold('beta', 'usr_1', first.fence, 'a', 60_000), false);
  assert.equal(await leases.drop('beta', 'usr_1', first.fence, 'a'), false);
  assert.equal((await leases.owner('beta'))?.fence, taken.fence);
  assert.deepEqual(await leases.renew(B, [{ subdomain: 'beta', fence: taken.fence, accountId: 'usr_1', instance: '' }]), ['ok']);
  // A reconnect on the edge that holds it is granted at once (the edge replaces its own session).
  assert.ok((await leases.claim(claim('beta', 'usr_1', B))).granted);
});

test('one client on several edges: attached beside each other, refused twice on one edge, its old sessions dropped by name; another client takes over from all of them', { skip: redisSkip }, async () => {
  const leases = fresh();
  const C = { nodeId: 'c', advertise: 'http://127.0.0.1:3', boot: 'boot-c' };
  const mine = { instance: 'client-one', cap: 1 };
  const first = await leases.claim(claim('pair', 'usr_1', A, mine));
  assert.ok(first.granted);
  const second = await leases.claim(claim('pair', 'usr_1', B, mine));
  assert.ok(second.granted, 'the same client is attached to a second edge, within a cap of one tunnel');
  assert.equal(second.ownerFence, first.fence, 'the same grant');
  assert.ok(second.fence > first.fence);
  assert.deepEqual((await leases.owner('pair'))?.attachments.map((attachment) => attachment.nodeId), ['a', 'b']);
  assert.deepEqual(await leases.claim(claim('pair', 'usr_1', A, mine)), { granted: false, reason: 'attached', fence: first.fence });
  // Each edge renews its own attachment; another client of the account is refused while it is online.
  const renew = (node: typeof A, fence: number, instance = 'client-one'): Promise<unknown> => leases.renew(node, [{ subdomain: 'pair', fence, accountId: 'usr_1', instance }]);
  assert.deepEqual(await renew(A, first.fence), ['ok']);
  assert.deepEqual(await renew(B, second.fence), ['ok']);
  assert.equal((await leases.claim(claim('pair', 'usr_1', C, { instance: 'client-two' }))).granted, false);
  // The session on A died; the client's reconnect through C names it: A's attachment goes in the same step.
  const moved = await leases.claim(claim('pair', 'usr_1', C, { ...mine, drop: [first.fence] }));
  assert.ok(moved.granted);
  assert.deepEqual(moved.dropped, [{ ...A, fence: first.fence }]);
  assert.deepEqual((await leases.owner('pair'))?.attachments.map((attachment) => attachment.nodeId), ['b', 'c']);
  assert.deepEqual(await renew(A, first.fence), ['missing'], 'A may attach again for the same client, if its session is still there');
  assert.equal(await leases.hold('pair', 'usr_1', first.fence, 'a', 60_000), false);
  // One session ends: the name stays live on the other edge.
  assert.equal(await leases.hold('pair', 'usr_1', second.fence, 'b', 60_000), true);
  assert.equal((await leases.owner('pair'))?.state, 'live');
  // A replace takes it over from every edge attached, and only once all of them were asked (the newest fence).
  const takeover = await leases.claim(claim('pair', 'usr_1', A, { instance: 'client-two', replace: true }));
  assert.deepEqual(takeover, { granted: false, reason: 'takeover', holders: [{ ...C, fence: moved.fence }], fence: moved.fence });
  const attachedMeanwhile = await leases.claim(claim('pair', 'usr_1', B, mine));
  assert.ok(attachedMeanwhile.granted);
  const stale = await leases.claim(claim('pair', 'usr_1', A, { instance: 'client-two', replace: true, fromFence: moved.fence }));
  assert.equal(stale.granted, false, 'an attachment made after the takeover was answered must be asked too');
  const taken = await leases.claim(claim('pair', 'usr_1', A, { instance: 'client-two', replace: true, fromFence: attachedMeanwhile.fence }));
  assert.ok(taken.granted);
  assert.ok(taken.ownerFence > first.fence, 'a new grant');
  assert.deepEqual(await renew(B, attachedMeanwhile.fence), ['lost'], 'the old client lost it');
  assert.deepEqual(await renew(A, taken.fence, 'client-two'), ['ok']);
});

test('the tunnel cap counts live names over every edge, a name of its own once', { skip: redisSkip }, async () => {
  const leases = fresh();
  assert.ok((await leases.claim(claim('one', 'usr_1', A, { cap: 2 }))).granted);
  assert.ok((await leases.claim(claim('two', 'usr_1', B, { cap: 2 }))).granted);
  assert.deepEqual(await leases.claim(claim('three', 'usr_1', A, { cap: 2 })), { granted: false, reason: 'cap', active: 2 });
  // Reconnecting on a name it holds is not a third tunnel.
  const own = await leases.claim(claim('two', 'usr_1', B, { cap: 2 }));
  assert.ok(own.granted);
  assert.equal(await leases.liveCount('usr_1'), 2);
  assert.deepEqual((await leases.listLive('usr_1')).map((lease) => lease.subdomain).sort(), ['one', 'two']);
  // A held name does not count.
  assert.ok(await leases.hold('two', 'usr_1', own.fence, 'b', 60_000));
  assert.ok((await leases.claim(claim('three', 'usr_1', A, { cap: 2 }))).granted);
});

test('an expired lease is missing on renewal, and expired leases leave the cap', { skip: redisSkip }, async () => {
  const leases = fresh();
  const short = await leases.claim(claim('gamma', 'usr_1', A, { cap: 1 }), 150);
  assert.ok(short.granted);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(await leases.renew(A, [{ subdomain: 'gamma', fence: short.fence, accountId: 'usr_1', instance: '' }]), ['missing']);
  assert.equal(await leases.liveCount('usr_1'), 0);
  assert.ok((await leases.claim(claim('delta', 'usr_1', B, { cap: 1 }))).granted);
});

test('heartbeats list the live edges; the secret is the first one stored', { skip: redisSkip }, async () => {
  const leases = fresh();
  await leases.renew(A, []);
  await leases.renew(B, [], 15_000, 150);
  assert.deepEqual((await leases.peers()).map((peer) => peer.nodeId), ['a', 'b']);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual((await leases.peers()).map(({ nodeId, advertise, boot }) => ({ nodeId, advertise, boot })), [A]);
  assert.deepEqual(await leases.sharedSecret('first'), { secret: 'first', stored: true });
  assert.deepEqual(await leases.sharedSecret('second'), { secret: 'first', stored: false });
});

test('each node id gets a number of its own, drawn once and kept across calls (its span of capture ring ids)', { skip: redisSkip }, async () => {
  const leases = fresh();
  const a = await leases.nodeNumber('a', MAX_CLUSTER_NODE_NUMBER);
  const b = await leases.nodeNumber('b', MAX_CLUSTER_NODE_NUMBER);
  assert.ok(Number.isInteger(a) && a >= 1 && Number.isInteger(b) && b >= 1);
  assert.notEqual(a, b);
  assert.equal(await leases.nodeNumber('a', MAX_CLUSTER_NODE_NUMBER), a, 'a restarted edge keeps its number');
  assert.equal(await fresh().nodeNumber('a', MAX_CLUSTER_NODE_NUMBER), 1, 'numbers are per cluster prefix');
});

test('commands reach every subscriber', { skip: redisSkip }, async () => {
  const leases = fresh();
  const subscriber = client.duplicate({ enableOfflineQueue: true });
  try {
    const received: unknown[] = [];
    await RedisLeases.subscribe(subscriber, leases.channel, (command) => received.push(command));
    await leases.publish({ type: 'revoke', tokenId: 'tok_1' });
    for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(received, [{ type: 'revoke', tokenId: 'tok_1' }]);
  } finally {
    subscriber.disconnect();
  }
});

test('every grant, release and renewal round is pushed to every edge by its own script; a snapshot lists the live leases', { skip: redisSkip }, async () => {
  const leases = fresh();
  const subscriber = client.duplicate({ enableOfflineQueue: true });
  try {
    const received: ClusterCommand[] = [];
    await RedisLeases.subscribe(subscriber, leases.channel, (command) => received.push(command));
    const granted = await leases.claim(claim('pushed', 'usr_1', A), 5_000);
    assert.ok(granted.granted);
    await leases.renew(A, [{ subdomain: 'pushed', fence: granted.fence, accountId: 'usr_1', instance: '' }], 5_000);
    const snapshot = await leases.snapshot();
    assert.deepEqual(snapshot.leases.map((lease) => [lease.subdomain, lease.attachments.map((attachment) => attachment.nodeId), lease.fence, lease.state]), [['pushed', ['a'], granted.fence, 'live']]);
    assert.ok(snapshot.leases[0]!.expiresAt - snapshot.redisNow > 4_000, 'the snapshot gives the remaining time on Redis\'s clock');
    await leases.hold('pushed', 'usr_1', granted.fence, 'a', 1_000);
    assert.deepEqual((await leases.snapshot()).leases, [], 'a held name has no owner');
    for (let i = 0; i < 100 && received.length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const [grant, renewal, release] = received;
    assert.equal(grant?.type, 'granted');
    if (grant?.type === 'granted') {
      assert.deepEqual([grant.lease.subdomain, grant.attachment.nodeId, grant.attachment.boot, grant.attachment.advertise, grant.attachment.fence, grant.lease.fence, grant.lease.port, grant.ttlMs], ['pushed', 'a', 'boot-a', A.advertise, granted.fence, granted.fence, 3000, 5_000]);
    }
    assert.deepEqual(renewal, { type: 'renewed', nodeId: 'a', boot: 'boot-a', advertise: A.advertise, ttlMs: 5_000 });
    assert.deepEqual(release, { type: 'released', subdomain: 'pushed', nodeId: 'a', fence: granted.fence });
  } finally {
    subscriber.disconnect();
  }
});

test('with replicas asked for, a grant no replica acknowledges is dropped and refused, and so is a renewal', { skip: redisSkip }, async () => {
  // This Redis has no replica: WAIT answers 0.
  const leases = new RedisLeases(client, `test${++counter}:`, { replicas: 1, replicaTimeoutMs: 50 });
  const refusal = await leases.claim(claim('unacknowledged', 'usr_1', A)).catch((error: unknown) => error);
  assert.ok(refusal instanceof BurrowError && refusal.code === 'STORE_UNAVAILABLE', String(refusal));
  assert.match((refusal as BurrowError).message, /not acknowledged by 1 replica/);
  assert.equal(await leases.owner('unacknowledged'), null, 'the unacknowledged grant is gone');
  const plain = new RedisLeases(client, leases.prefix);
  const granted = await plain.claim(claim('unacknowledged', 'usr_1', A));
  assert.ok(granted.granted);
  const renewal = await leases.renew(A, [{ subdomain: 'unacknowledged', fence: granted.fence, accountId: 'usr_1', instance: '' }]).catch((error: unknown) => error);
  assert.ok(renewal instanceof BurrowError && renewal.code === 'STORE_UNAVAILABLE', String(renewal));
});

test('Redis down: every lease call is 503 STORE_UNAVAILABLE with Retry-After; it recovers when Redis is back', { skip: redisSkip }, async () => {
  const leases = fresh();
  const granted = await leases.claim(claim('epsilon', 'usr_1', A));
  assert.ok(granted.granted);
  await server.kill();
  const refused = await leases.claim(claim('zeta', 'usr_1', A)).then(
    () => assert.fail('a claim succeeded with Redis down'),
    (error: unknown) => error,
  );
  assert.ok(refused instanceof BurrowError);
  assert.equal(refused.code, 'STORE_UNAVAILABLE');
  assert.equal(refused.status, 503);
  assert.equal(refused.headers['Retry-After'], '2');
  await assert.rejects(leases.renew(A, [{ subdomain: 'epsilon', fence: granted.fence, accountId: 'usr_1', instance: '' }]), { code: 'STORE_UNAVAILABLE' });
  await assert.rejects(leases.owner('epsilon'), { code: 'STORE_UNAVAILABLE' });
  await server.restart();
  await new Promise<void>((resolve) => (client.status === 'ready' ? resolve() : client.once('ready', () => resolve())));
  // The append-only file kept the lease: its holder renews it as before.
  assert.deepEqual(await leases.renew(A, [{ subdomain: 'epsilon', fence: granted.fence, accountId: 'usr_1', instance: '' }]), ['ok']);
});

// Issue 27, item 4 in cluster mode, at the lease: a name granted to `--pool` is recorded as a pool; pool
// members of any client process of the account attach beside each other (one attachment per edge, shared
// by the members there); a client without --pool is refused 'online' naming the pool, and a --pool client
// is refused on a name that is no pool; another account never gets it; a replace takes it over from every
// edge attached and the old members' edges lose it. A member's `drop` of another edge's attachment keeps it
// (other members may be there) and names it for the claiming edge to ask.
test('a pool lease: members of any client attach beside each other, one attachment per edge; no second owner of another kind, no other account', { skip: redisSkip }, async () => {
  const leases = fresh();
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
