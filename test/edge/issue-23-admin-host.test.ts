/**
 * Issue 23, lower item: the admin port (`--admin`) checked no Host, so a page whose name was rebound to
 * the edge's address (DNS rebinding) could read /metrics and /healthz through a victim's browser. It now
 * answers a loopback name, an IP address, its own --admin host or no Host, and 421 to anything else.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { adminHostAllowed } from '../../src/edge/admin.js';
import { startEdge, type TestEdge } from '../helpers.js';

let edge: TestEdge;
before(async () => {
  edge = await startEdge({ admin: { host: '127.0.0.1', port: 0 } });
});
after(() => edge?.close());

async function admin(path: string, host: string): Promise<{ status: number; text: string }> {
  const response = await request(`http://127.0.0.1:${edge.edge.adminPort}${path}`, { headers: { host } });
  return { status: response.statusCode, text: await response.body.text() };
}

test('a rebound name is refused with 421 on every admin path; loopback names and addresses are served', async () => {
  const port = edge.edge.adminPort;
  for (const host of [`attacker.example:${port}`, 'attacker.example', `127.0.0.1.attacker.example:${port}`, `localhost.attacker.example:${port}`, `${port}`]) {
    for (const path of ['/metrics', '/healthz', '/nothing']) {
      const answer = await admin(path, host);
      assert.equal(answer.status, 421, `${host} ${path}`);
      assert.match(answer.text, /misdirected/);
      assert.doesNotMatch(answer.text, /burrow_/);
    }
  }
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `metrics.localhost:${port}`, `[::1]:${port}`, '10.0.0.5:9090']) {
    const metrics = await admin('/metrics', host);
    assert.equal(metrics.status, 200, host);
    assert.match(metrics.text, /burrow_/);
    assert.equal((await admin('/healthz', host)).status, 200, host);
  }
});

test('the --admin host itself is accepted when it is a name', () => {
  const address = { host: 'metrics.internal', port: 9090 };
  assert.equal(adminHostAllowed('metrics.internal:9090', address), true);
  assert.equal(adminHostAllowed('METRICS.internal', address), true);
  assert.equal(adminHostAllowed('other.internal:9090', address), false);
  assert.equal(adminHostAllowed('', address), true, 'no Host: no browser sends that');
});
