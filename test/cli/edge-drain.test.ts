/**
 * Graceful restart of a real `burrow edge` process: on SIGTERM /healthz turns 503 at once and stays so
 * while an in-flight request finishes, the tunnel gets GOAWAY (the client reconnects), the access log is
 * flushed and the edge exits 0; with a short --drain a request that never ends is cut (502) and the
 * edge still exits 0. The real CLI, client and local server.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { runCli, spawnCli, startLocal, tempDirs, waitFor, type LocalServer } from '../helpers.js';

const tempDir = tempDirs('burrow-edge-drain-');
const READY = /listening on http:\/\/localhost:(\d+)[\s\S]*admin on http:\/\/127\.0\.0\.1:(\d+) /;

async function health(adminPort: number): Promise<number> {
  const response = await request(`http://127.0.0.1:${adminPort}/healthz`);
  await response.body.text();
  return response.statusCode;
}

describe('SIGTERM drains', () => {
  let local: LocalServer;
  const held: (() => void)[] = [];

  before(async () => {
    local = await startLocal((req, res) => {
      if (req.url === '/slow') held.push(() => res.end('finally'));
      else res.end('ok');
    });
  });

  after(async () => {
    await local.close();
  });

  async function startEdgeProcess(drainMs: number) {
    const dataDir = tempDir();
    const accessLog = join(dataDir, 'access.log');
    const env = { XDG_CONFIG_HOME: tempDir() };
    const edge = await spawnCli(
      ['edge', '--port', '0', '--data', dataDir, '--admin', '0', '--access-log', accessLog, '--drain', String(drainMs)],
      env,
      READY,
    );
    const port = Number(edge.match[1]);
    const adminPort = Number(edge.match[2]);
    const created = await runCli(['admin', 'create-account', '--email', 'drain@example.test', '--data', dataDir, '--json'], env);
    const token = JSON.parse(created.stdout).token.token as string;
    const client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port), minBackoffMs: 50, maxBackoffMs: 300 });
    const ready = await client.start();
    return { edge, port, adminPort, accessLog, client, subdomain: ready.subdomain };
  }

  test('/healthz is 503 from the start of the drain; the in-flight request completes; GOAWAY; exit 0', async () => {
    const { edge, port, adminPort, accessLog, client, subdomain } = await startEdgeProcess(20_000);
    assert.equal(await health(adminPort), 200);
    const slow = request(`http://127.0.0.1:${port}/slow`, { headers: { host: `${subdomain}.localhost:${port}` } });
    await waitFor(() => held.length === 1, 5_000, 'the slow request at the local server');
    const goaway = once(client, 'reconnecting');

    edge.child.kill('SIGTERM');
    await waitFor(async () => (await health(adminPort)) === 503, 5_000, '/healthz to answer 503');
    const metrics = await (await request(`http://127.0.0.1:${adminPort}/metrics`)).body.text();
    assert.match(metrics, /^burrow_draining 1$/m);
    assert.match(metrics, /^burrow_streams_open 1$/m);
    // Still draining: the request is in flight, so the edge waits for it.
    assert.equal(await health(adminPort), 503);

    held.shift()!();
    const response = await slow;
    assert.equal(response.statusCode, 200);
    assert.equal(await response.body.text(), 'finally');
    assert.equal(await edge.exited, 0);
    await goaway;
    await client.close();

    const output = edge.output();
    assert.match(output, new RegExp(`tunnel ${subdomain} connected \\(account usr_\\w+, token tok_\\w+, port ${local.port}\\)`));
    assert.match(output, new RegExp(`tunnel ${subdomain} disconnected: the edge is shutting down \\(4001\\)`));
    const lines = readFileSync(accessLog, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    assert.equal(lines.length, 1);
    assert.equal(lines[0].path, '/slow');
    assert.equal(lines[0].status, 200);
  });

  test('--drain bounds the wait: a request that never ends is cut with 502 and the edge exits 0', async () => {
    const { edge, port, accessLog, client, subdomain } = await startEdgeProcess(300);
    const slow = request(`http://127.0.0.1:${port}/slow`, { headers: { host: `${subdomain}.localhost:${port}` } });
    await waitFor(() => held.length === 1, 5_000, 'the slow request at the local server');
    edge.child.kill('SIGTERM');
    const response = await slow;
    assert.equal(response.statusCode, 502);
    assert.equal(response.headers['burrow-error'], 'TUNNEL_CLOSED');
    await response.body.text();
    assert.equal(await edge.exited, 0);
    held.shift()!();
    await client.close();
    const lines = readFileSync(accessLog, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((line) => [line.path, line.status, line.error]),
      [['/slow', 502, 'TUNNEL_CLOSED']],
    );
  });
});

describe('burrow edge flags', () => {
  test('--help lists --admin, --access-log and --drain', async () => {
    const help = await runCli(['edge', '--help']);
    assert.equal(help.code, 0);
    for (const flag of ['--admin [HOST:]PORT', '--access-log FILE|-', '--drain MS']) assert.ok(help.stdout.includes(flag), flag);
  });

  test('--access-log - writes the lines to standard output', async () => {
    const edge = await spawnCli(['edge', '--port', '0', '--data', tempDir(), '--access-log', '-'], { XDG_CONFIG_HOME: tempDir() }, /listening on http:\/\/localhost:(\d+)/);
    const port = Number(edge.match[1]);
    const response = await request(`http://127.0.0.1:${port}/nobody`, { headers: { host: `ghost.localhost:${port}` } });
    await response.body.text();
    assert.equal(response.statusCode, 404);
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
    const lines = edge
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((line) => [line.subdomain, line.path, line.status, line.error]),
      [['ghost', '/nobody', 404, 'TUNNEL_NOT_FOUND']],
    );
  });

  test('a bad --admin address is a usage error naming the flag', async () => {
    const result = await runCli(['edge', '--admin', 'nowhere:', '--data', tempDir()]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /--admin: expected \[HOST:\]PORT/);
    assert.equal(result.stderr.trim().split('\n').length, 1);
  });
});
