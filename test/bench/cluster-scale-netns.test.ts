/**
 * The scale run's namespaces (bench/cluster-scale/netns.ts): names that fit Linux's 15-byte interface
 * names, only private 10.x subnets, and, where the test runs as root with iproute2, a set created and
 * removed again with nothing left behind (no namespace, no bridge, no veth end). No traffic is sent.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { createNamespaces, planNamespaces, remainingNamespaces, removeNamespaces, subnetInUse } from '../../bench/cluster-scale/netns.js';

const rootSkip =
  process.getuid?.() !== 0 ? 'not root (ip netns needs CAP_NET_ADMIN)' : spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status === 0 ? false : 'ip netns does not work here';

describe('the scale run namespaces', () => {
  test('one address per edge on the subnet, the host on .1, interface names within 15 bytes', () => {
    const set = planNamespaces('burrow-scale', '10.231.28', 3);
    assert.equal(set.hostAddress, '10.231.28.1');
    assert.deepEqual(
      set.namespaces.map((ns) => ns.address),
      ['10.231.28.11', '10.231.28.12', '10.231.28.13'],
    );
    assert.deepEqual(
      set.namespaces.map((ns) => ns.name),
      ['burrow-scale-e1', 'burrow-scale-e2', 'burrow-scale-e3'],
    );
    assert.ok(set.bridge.length <= 15, set.bridge);
  });

  test('only a private 10.x.y subnet', () => {
    for (const subnet of ['192.168.1', '10.1', '8.8.8', '10.0.0.1']) assert.throws(() => planNamespaces('burrow-scale', subnet, 3), /private 10\.x\.y/);
  });

  test('created, then removed with nothing left', { skip: rootSkip }, (t) => {
    const set = planNamespaces(`bt${process.pid % 100_000}`, '10.231.29', 2);
    if (subnetInUse(set)) return t.skip('10.231.29.0/24 is in use here');
    try {
      createNamespaces(set);
      assert.deepEqual(remainingNamespaces(set), set.namespaces.map((ns) => ns.name));
      const inside = execFileSync('ip', ['-n', set.namespaces[1]!.name, '-o', 'addr'], { encoding: 'utf8' });
      assert.match(inside, /inet 10\.231\.29\.12\/24/);
    } finally {
      assert.deepEqual(removeNamespaces(set), []);
    }
    assert.deepEqual(remainingNamespaces(set), []);
    const links = execFileSync('ip', ['-o', 'link'], { encoding: 'utf8' });
    assert.ok(!links.includes(set.bridge.slice(0, 10)), `links left: ${links}`);
    assert.equal(subnetInUse(set), false);
  });
});
