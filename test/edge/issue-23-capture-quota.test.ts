/**
 * Issue 23, finding 1 (c): a FREE tenant cycling subdomains filled the disk with captures: a ring of
 * 1,000 slots per subdomain, up to 1 MiB + 1 MiB a slot, and no cap per account. With the per-account
 * capture quota the tenant stops capturing at its quota, across every subdomain it cycles through and
 * across a restart, while every request is still answered and another account still captures.
 *
 * On a small loop-mounted file system of the test's own with no free-space floor (only the quota stands
 * between the tenant and a full disk), with a real edge, the real tunnel client and a real local server.
 * The FREE plan's quota is made small (5.5 MiB) so that the attack takes seconds.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import type { EdgeOptions } from '../../src/edge/server.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, type TestEdge } from '../helpers.js';
import { loopFs } from '../loop-fs.js';
import { parsePrometheusText, sampleValue } from './prometheus-text.js';

const MIB = 1024 * 1024;
const QUOTA = 5.5 * MIB;
const BODY = Buffer.alloc(MIB, 0x63);

async function post(target: TestEdge, host: string, path: string): Promise<{ status: number; text: string }> {
  const response = await request(`${target.base}${path}`, { method: 'POST', headers: { host }, body: BODY });
  return { status: response.statusCode, text: await response.body.text() };
}

async function capturedPaths(target: TestEdge, token: string, subdomain: string): Promise<string[]> {
  const listed = await call(target, 'GET', `/api/v1/requests?subdomain=${subdomain}&limit=1000`, { token });
  if (listed.status === 404) return [];
  assert.equal(listed.status, 200, listed.text);
  return (listed.json.requests as { path: string }[]).map((entry) => entry.path);
}

test('issue 23.1 (c): a FREE tenant cycling subdomains stops capturing at its quota, across a restart, while another account still captures', { timeout: 90_000 }, async (t) => {
  const disk = loopFs(64);
  if (typeof disk === 'string') {
    t.skip(disk);
    return;
  }
  const log: string[] = [];
  const options: Partial<EdgeOptions> = {
    dataDir: join(disk.dir, 'data'),
    log: (line) => log.push(line),
    admin: { host: '127.0.0.1', port: 0 },
    minFreeDisk: { bytes: 0 },
    plans: { FREE: { captureBytes: QUOTA } },
  };
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => res.end(`read ${body.length}`));
  });
  let target = await startEdge(options);
  try {
    const tenant = await createAccount(target, 'FREE');
    const bystander = await createAccount(target, 'FREE');
    const cycled: string[] = [];
    // Twelve subdomains, two 1 MiB POSTs each: 24 MiB of bodies against a 5.5 MiB quota.
    for (let i = 0; i < 12; i++) {
      const { client, subdomain, host } = await startClient(target, tenant.token, local.port, { subdomain: `cycle-${i}` });
      cycled.push(subdomain);
      for (let j = 0; j < 2; j++) {
        const answer = await post(target, host, `/cycle/${i}/${j}`);
        assert.equal(answer.status, 200, answer.text);
        assert.equal(answer.text, `read ${MIB}`, 'every request reaches the local server whole');
      }
      await client.close();
    }
    let captured = 0;
    for (const subdomain of cycled) captured += (await capturedPaths(target, tenant.token, subdomain)).length;
    // Each capture keeps its 1 MiB body and a little more: five fit in 5.5 MiB (over 90% of it), the sixth does not.
    assert.equal(captured, 5, 'captures stop at the quota');
    assert.ok(target.edge.captures.bytesOf(tenant.id) <= QUOTA);
    assert.ok(disk.free() > 30 * MIB, `the disk did not fill: ${disk.free()} bytes free`);
    const told = log.filter((line) => line.startsWith(`captures: account ${tenant.id} holds `));
    assert.equal(told.length, 1, `said once an hour:\n${log.join('\n')}`);
    assert.match(told[0]!, /its plan's quota of 5\.5 MiB on this edge: its new captures are skipped \(requests are still forwarded\)/);

    const other = await startClient(target, bystander.token, local.port, { subdomain: 'bystander' });
    assert.equal((await post(target, other.host, '/mine')).status, 200);
    assert.deepEqual(await capturedPaths(target, bystander.token, 'bystander'), ['/mine'], 'another account still captures');
    await other.client.close();

    const metrics = parsePrometheusText(await (await request(`http://127.0.0.1:${target.edge.adminPort}/metrics`)).body.text());
    assert.equal(sampleValue(metrics, 'burrow_captures_skipped_total', { reason: 'quota' }), 24 - 5);
    assert.equal(sampleValue(metrics, 'burrow_capture_quota_accounts_over_90_percent'), 1);
    assert.equal(sampleValue(metrics, 'burrow_capture_stored_bytes'), target.edge.captures.bytesOf(tenant.id) + target.edge.captures.bytesOf(bystander.id));

    // A restart keeps the count: the tenant is still at its quota, the bystander is not.
    await target.close();
    target = await startEdge(options);
    const again = await startClient(target, tenant.token, local.port, { subdomain: 'after-restart' });
    assert.equal((await post(target, again.host, '/after')).status, 200);
    assert.deepEqual(await capturedPaths(target, tenant.token, 'after-restart'), [], 'still over its quota after a restart');
    await again.client.close();
    const back = await startClient(target, bystander.token, local.port, { subdomain: 'bystander' });
    assert.equal((await post(target, back.host, '/mine-again')).status, 200);
    assert.deepEqual(await capturedPaths(target, bystander.token, 'bystander'), ['/mine-again', '/mine']);
    await back.client.close();
  } finally {
    await target.close();
    await local.close();
  }
});
