/**
 * The benchmark's edges capture every exchange of a run: bench/e2e/burrow.ts starts each capturing edge
 * with `--plans` raising the capture quota. At the plans' defaults a FREE account holds 100 MiB of
 * captures and skips new ones beyond, so a run's 1 MiB rows measured mostly skipped captures. A real
 * edge, client and local server, set up as the benchmark does, take 110 uploads of 1 MiB (past the
 * default quota) and every one is listed by the API.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { burrowEnv, createBenchAccount, edgesAtDefaultQuota, RING_FILL_UPLOADS, startBurrowEdge, startBurrowHttp } from '../../bench/e2e/burrow.js';
import { DEFAULT_PLANS } from '../../src/store/plans.js';
import { Children } from '../../bench/e2e/processes.js';

const BIN = fileURLToPath(new URL('../../../bin/burrow.js', import.meta.url));
const UPLOADS = 110;

test('a benchmark edge captures every 1 MiB upload past the default FREE quota of 100 MiB', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-quota-'));
  const children = new Children();
  const local = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  local.listen(0, '127.0.0.1');
  await new Promise((done) => local.once('listening', done));
  try {
    const env = burrowEnv(join(dir, 'config'));
    const dataDir = join(dir, 'data');
    const token = createBenchAccount({ bin: BIN, dataDir, email: 'quota@bench.test', env });
    const { port } = await startBurrowEdge(children, { bin: BIN, name: 'edge-quota', dataDir, env });
    assert.deepEqual(edgesAtDefaultQuota, [], 'this build takes --plans');
    await startBurrowHttp(children, {
      bin: BIN,
      name: 'client-quota',
      targetPort: (local.address() as AddressInfo).port,
      edgePort: port,
      token,
      subdomain: 'bench-quota',
      env,
      inspector: false,
      stdoutFile: join(dir, 'client.log'),
    });
    const body = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < UPLOADS; i++) {
      const response = await request(`http://127.0.0.1:${port}/upload/${i}`, { method: 'POST', body, headers: { host: `bench-quota.localhost:${port}` } });
      assert.equal(await response.body.text(), 'ok');
    }
    const listed = await request(`http://127.0.0.1:${port}/api/v1/requests?subdomain=bench-quota&limit=1000`, { headers: { host: `localhost:${port}`, authorization: `Bearer ${token}` } });
    const json = (await listed.body.json()) as { requests: Array<{ path: string }> };
    assert.equal(json.requests.filter((entry) => entry.path.startsWith('/upload/')).length, UPLOADS, 'every upload captured');
  } finally {
    children.killAll();
    local.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the benchmark's warm-up laps a FREE ring (the plan its accounts have) before the rows measure captures", () => {
  // A warm-up shorter than the ring would leave the first 1 MiB row growing the capture file.
  assert.ok(RING_FILL_UPLOADS > DEFAULT_PLANS.FREE.capturedRequests, `${RING_FILL_UPLOADS} uploads lap ${DEFAULT_PLANS.FREE.capturedRequests} slots`);
});
