/**
 * Regression (found by the cluster race test, issue 17): a public request arriving on a kept-alive
 * connection after the edge closed reached the closed LMDB ("Can not renew a transaction from a closed
 * database") and the process aborted. Edges sharing a process (tests, and any embedding) must survive it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { startEdge } from '../helpers.js';

test('a request on a kept-alive connection after the edge closed is cut, and the process lives on', async () => {
  const target = await startEdge();
  const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
  try {
    const send = async (host: string): Promise<number> => {
      const response = await request(`${target.base}/`, { headers: { host }, dispatcher: agent });
      await response.body.text();
      return response.statusCode;
    };
    assert.equal(await send(`nobody.localhost:${target.port}`), 404);
    await target.edge.close(0);
    for (const host of [`nobody.localhost:${target.port}`, `localhost:${target.port}`]) {
      await assert.rejects(send(host));
    }
    // Still alive: this turn and the next run.
    await new Promise((resolve) => setTimeout(resolve, 50));
  } finally {
    await agent.close();
    await target.close();
  }
});
