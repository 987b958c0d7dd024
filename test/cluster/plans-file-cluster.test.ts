/**
 * `burrow edge --plans FILE` in a cluster (docs/deploy.md, "Plans and quotas"): two real edge processes on
 * one real Redis, each started with the same file capping FREE at one tunnel. The tunnel count lives in
 * the shared store, so a FREE account's first tunnel on one edge leaves no room for a second on the other
 * (the default FREE plan would take three); a PRO account, which the file leaves alone, keeps its
 * default and connects on both.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { freePort, runCli, spawnCli, startLocal, tempDirs, type SpawnedProcess } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';

const makeDir = tempDirs('burrow-plans-cluster-');

test('burrow edge --cluster --plans: the file caps FREE at one tunnel across both edges, and leaves PRO at its default', { skip: redisSkip, timeout: 60_000 }, async () => {
  const redis = await TestRedis.start();
  const dir = makeDir();
  const plans = join(dir, 'plans.yml');
  writeFileSync(plans, 'FREE:\n  active_tunnels: 1\n');
  const env = { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CONFIG: '' };
  const edges: SpawnedProcess[] = [];
  const ports: number[] = [];
  const clients: TunnelClient[] = [];
  const local = await startLocal((_request, response) => response.end('ok'));
  try {
    for (const nodeId of ['a', 'b']) {
      const port = await freePort();
      ports.push(port);
      edges.push(
        await spawnCli(
          ['edge', '--cluster', redis.url, '--node-id', nodeId, '--advertise', `http://127.0.0.1:${port}`, '--host', '127.0.0.1', '--port', String(port), '--data', makeDir(), '--plans', plans],
          env,
          /listening on/,
        ),
      );
    }
    const tokenOf = async (email: string, plan: string): Promise<string> => {
      const created = await runCli(['admin', 'create-account', '--email', email, '--plan', plan, '--cluster', redis.url, '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      const minted = await runCli(['admin', 'token', 'create', '--email', email, '--label', 'plans', '--cluster', redis.url, '--json'], env);
      assert.equal(minted.code, 0, minted.stderr);
      return (JSON.parse(minted.stdout) as { token: { token: string } }).token.token;
    };
    const connect = (token: string, port: number): TunnelClient => {
      const client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port, []), minBackoffMs: 50, maxBackoffMs: 200 });
      clients.push(client);
      return client;
    };

    const free = await tokenOf('free@plans.test', 'FREE');
    await connect(free, ports[0]!).start();
    await assert.rejects(connect(free, ports[1]!).start(), (error: Error & { code?: string; status?: number }) => {
      assert.equal(error.code, 'TUNNEL_LIMIT_REACHED');
      assert.equal(error.status, 403);
      return true;
    });

    const pro = await tokenOf('pro@plans.test', 'PRO');
    await connect(pro, ports[0]!).start();
    await connect(pro, ports[1]!).start();
  } finally {
    for (const client of clients) await client.close();
    await local.close();
    for (const edge of edges) {
      edge.child.kill('SIGTERM');
      assert.equal(await edge.exited, 0);
    }
  }
});
