/**
 * Issue 25: the capture blocks file in /metrics (docs/deploy.md, Monitoring). A real edge with a ring of
 * two, the real tunnel client and a real local server: uploads of 200 KB (four blocks each) fill the
 * file, a third overwrites the first, whose blocks are then free (a commit never reuses the blocks it
 * frees), and a fourth takes them again: the file stops growing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { BLOCK_BYTES } from '../../src/store/capture-blocks.js';
import { createAccount, readBody, startClient, startEdge, startLocal } from '../helpers.js';
import { parsePrometheusText, sampleValue } from './prometheus-text.js';

const BODY = Buffer.alloc(200_000, 0x64);

test('the blocks file\'s size and free bytes are in /metrics, and a ring that laps reuses its blocks', async () => {
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => res.end(`read ${body.length}`));
  });
  const target = await startEdge({ admin: { host: '127.0.0.1', port: 0 }, plans: { FREE: { capturedRequests: 2 } } });
  try {
    const account = await createAccount(target, 'FREE');
    const { client, host } = await startClient(target, account.token, local.port, { subdomain: 'blocks-metrics' });
    const blocks = async (): Promise<{ file: number; free: number }> => {
      const metrics = parsePrometheusText(await (await request(`http://127.0.0.1:${target.edge.adminPort}/metrics`)).body.text());
      return { file: sampleValue(metrics, 'burrow_capture_blocks_bytes')! / BLOCK_BYTES, free: sampleValue(metrics, 'burrow_capture_blocks_free_bytes')! / BLOCK_BYTES };
    };
    assert.deepEqual(await blocks(), { file: 0, free: 0 });
    const upload = async (path: string): Promise<void> => {
      const response = await request(`${target.base}${path}`, { method: 'POST', headers: { host }, body: BODY });
      assert.equal(await response.body.text(), `read ${BODY.byteLength}`);
    };
    await upload('/one');
    await upload('/two');
    assert.deepEqual(await blocks(), { file: 8, free: 0 }, 'four blocks a capture');
    await upload('/three');
    assert.deepEqual(await blocks(), { file: 12, free: 4 }, 'the overwritten capture\'s blocks are free once its commit returned');
    await upload('/four');
    assert.deepEqual(await blocks(), { file: 12, free: 4 }, 'taken again: the file did not grow');
    await client.close();
  } finally {
    await target.close();
    await local.close();
  }
});
