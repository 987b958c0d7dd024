/**
 * Issue 23, lower item: after Redis restarted empty, a new edge made its own internal hop secret and
 * nothing said so, while the edges started before kept the old one (their hops to and from it refused).
 * An edge that makes the secret now says so in one log line; one that finds it, or has
 * --cluster-secret-file, says nothing of the kind.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { NEW_SECRET_LINE } from '../../src/edge/cluster/connection.js';
import { redisSkip, TestRedis } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;

test('an edge that makes the hop secret says so in one line; after Redis restarts empty the next edge says it again', { skip: redisSkip }, async () => {
  const logs: Record<string, string[]> = { a: [], b: [], c: [], d: [] };
  const start = (name: string, secret?: string) =>
    startClusterEdge(redis!.url, name, {
      log: (line) => logs[name]!.push(line),
      ...(secret === undefined ? {} : { cluster: { redis: redis!.url, nodeId: name, advertise: '', secret } }),
    });
  const a = await start('a');
  const edges = [a];
  try {
    assert.deepEqual(logs.a!.filter((line) => line === NEW_SECRET_LINE), [NEW_SECRET_LINE], 'the first edge of a new cluster');
    edges.push(await start('d', 'a configured secret of enough length'));
    assert.ok(!logs.d!.includes(NEW_SECRET_LINE), 'a configured secret is nobody else\'s business');

    // Redis restarts with nothing on disk: the secret (and everything else) is gone.
    await redis!.kill();
    for (const entry of readdirSync(redis!.dir)) rmSync(join(redis!.dir, entry), { recursive: true, force: true });
    await redis!.restart();

    const b = await start('b');
    edges.push(b);
    assert.deepEqual(logs.b!.filter((line) => line === NEW_SECRET_LINE), [NEW_SECRET_LINE]);
    assert.notEqual(b.edge.clusterSecret, a.edge.clusterSecret, 'what the line warns of: two secrets in one cluster');
    const c = await start('c');
    edges.push(c);
    assert.ok(!logs.c!.includes(NEW_SECRET_LINE), 'found the stored one');
    assert.equal(c.edge.clusterSecret, b.edge.clusterSecret);
    assert.equal(NEW_SECRET_LINE.includes('\n'), false);
  } finally {
    for (const edge of edges.reverse()) await edge.close();
  }
});
