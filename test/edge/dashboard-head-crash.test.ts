/**
 * Regression: a HEAD of a dashboard file (`HEAD /`, as link checkers and uptime probes send) aborted the
 * whole edge process ("Returning from a request handler without responding or attaching an abort handler
 * is forbidden!"): uWS 20.30 does not count endWithoutBody(length) inside the handler as an answer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startEdge } from '../helpers.js';

test('HEAD of the dashboard page and its files answers like GET without a body, and the edge keeps serving', async () => {
  const target = await startEdge({});
  try {
    for (const path of ['/', '/dashboard/app.js', '/dashboard/style.css', '/']) {
      const get = await request(`${target.base}${path}`, { headers: { host: 'localhost' } });
      const body = await get.body.arrayBuffer();
      const head = await request(`${target.base}${path}`, { method: 'HEAD', headers: { host: 'localhost' } });
      assert.equal(head.statusCode, 200, path);
      assert.equal(head.headers['content-length'], String(body.byteLength), path);
      assert.equal(head.headers['content-type'], get.headers['content-type'], path);
      assert.equal((await head.body.arrayBuffer()).byteLength, 0, path);
    }
    const api = await request(`${target.base}/api/v1/instance`, { headers: { host: 'localhost' } });
    assert.equal(api.statusCode, 200);
    await api.body.dump();
  } finally {
    await target.close();
  }
});
