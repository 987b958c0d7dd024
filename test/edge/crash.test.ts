/**
 * "Nothing lost" (issue 4): under continuous traffic the edge process is killed with SIGKILL again and
 * again and restarted on the same data; every request whose response the public client received must
 * be listed afterwards. Real edge processes, the real client (which reconnects on its own), a real
 * local server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { freePort, runCli, spawnCli, startLocal, tempDir } from '../helpers.js';

const KILLS = 10;

test('kill -9 of the edge under load loses no request whose response was received', async () => {
  const dataDir = tempDir();
  const env = { XDG_CONFIG_HOME: tempDir() };
  const port = await freePort();
  const local = await startLocal((req, res) => {
    req.resume();
    req.on('end', () => res.end(`ok ${req.url}`));
  });
  const start = () => spawnCli(['edge', '--port', String(port), '--data', dataDir, '--grace', '60000'], env, /listening on/);
  let edge = await start();
  const created = await runCli(['admin', 'create-account', '--email', 'crash@example.test', '--plan', 'PRO', '--data', dataDir, '--json'], env);
  const token = JSON.parse(created.stdout).token.token as string;
  const client = new TunnelClient({
    edge: `http://localhost:${port}`,
    token,
    routes: new RouteTable(local.port),
    subdomain: 'crash-test',
    minBackoffMs: 20,
    maxBackoffMs: 200,
  });
  await client.start();
  const host = `crash-test.localhost:${port}`;
  const agent = new Agent({ connections: 8, keepAliveTimeout: 1_000 });
  const answered = new Set<string>();
  let sent = 0;
  let running = true;

  // Eight senders, each one request at a time, for as long as the test runs.
  const sender = async (lane: number): Promise<void> => {
    while (running) {
      const path = `/crash/${lane}/${sent++}`;
      try {
        const response = await request(`http://127.0.0.1:${port}${path}`, { method: 'POST', body: 'payload', headers: { host }, dispatcher: agent });
        const text = await response.body.text();
        if (response.statusCode === 200 && text === `ok ${path}`) answered.add(path);
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  };
  const senders = Array.from({ length: 8 }, (_, lane) => sender(lane));

  try {
    for (let kill = 0; kill < KILLS; kill++) {
      const before = answered.size;
      // Let traffic flow through this edge for a moment (some answered requests each time), then kill it.
      const deadline = Date.now() + 3_000;
      while (answered.size < before + 20 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 150));
      edge.child.kill('SIGKILL');
      await edge.exited;
      edge = await start();
    }
    // Traffic through the last edge too, then stop sending.
    const last = answered.size;
    while (answered.size < last + 20) await new Promise((resolve) => setTimeout(resolve, 10));
  } finally {
    running = false;
    await Promise.all(senders);
  }

  const listed = new Set<string>();
  let before = '';
  for (;;) {
    const query = `subdomain=crash-test&limit=1000${before === '' ? '' : `&before=${before}`}`;
    const response = await request(`http://127.0.0.1:${port}/api/v1/requests?${query}`, {
      headers: { host: `localhost:${port}`, authorization: `Bearer ${token}` },
    });
    const page = ((await response.body.json()) as { requests: { id: string; path: string; status: number }[] }).requests;
    for (const entry of page) if (entry.status === 200) listed.add(entry.path);
    if (page.length < 1000) break;
    before = page[page.length - 1]!.id;
  }
  const missing = [...answered].filter((path) => !listed.has(path));
  assert.ok(answered.size >= KILLS * 20, `only ${answered.size} requests were answered`);
  assert.deepEqual(missing, [], `${missing.length} of ${answered.size} answered requests are not captured`);

  await client.close();
  await agent.close();
  edge.child.kill('SIGTERM');
  await edge.exited;
  await local.close();
});
