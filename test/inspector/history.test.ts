/**
 * Issue 16, point 6: the inspector's history survives a client restart. A new inspector loads the
 * tunnel's newest captures from the edge (one list call), shows them marked source "edge" behind what
 * it sees live, and fetches a detail from the edge when it is opened. An edge that refuses gives no
 * history and nothing else changes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Inspector } from '../../src/inspector/server.js';
import { waitFor } from '../helpers.js';
import { inspect, startStack, type Stack } from './fixture.js';

describe('inspector history from the edge', () => {
  let stack: Stack;
  const others: Inspector[] = [];

  before(async () => {
    stack = await startStack();
    for (let i = 0; i < 5; i++) {
      await stack.send('POST', `/before-restart/${i}`, { body: `{"n":${i},"secret":"evt_hist_${i}"}`, headers: { 'content-type': 'application/json', 'x-n': String(i) } });
    }
  });

  after(async () => {
    for (const inspector of others) inspector.close();
    await stack.close();
  });

  test('a new inspector shows the captures from before, marked as loaded from the edge, bounded', async () => {
    const fresh = await Inspector.start({ port: 0, edge: stack.edge.url, token: stack.account.token, historyCount: 3 });
    others.push(fresh);
    fresh.attach(stack.client);
    await waitFor(async () => (await inspect(fresh, 'GET', '/api/status')).json.history.loaded === 3, 5_000, 'the history');
    await stack.send('GET', '/after-restart');
    await waitFor(() => fresh.ring.size === 4, 5_000, 'the live exchange');
    const list = (await inspect(fresh, 'GET', '/api/requests?summary=1')).json.requests;
    assert.deepEqual(
      list.map((item: any) => [item.path, item.source]),
      [
        ['/after-restart', 'live'],
        ['/before-restart/4', 'edge'],
        ['/before-restart/3', 'edge'],
        ['/before-restart/2', 'edge'],
      ],
    );
    const old = list[1];
    assert.equal(old.status, 200);
    assert.match(old.id, /^req_/);

    // The detail comes from the edge when opened: headers, body, client address.
    const detail = (await inspect(fresh, 'GET', `/api/requests/${old.id}`)).json;
    assert.equal(detail.source, 'edge');
    assert.equal(detail.request.body, '{"n":4,"secret":"evt_hist_4"}');
    assert.ok(detail.request.headers.some(([name, value]: [string, string]) => name === 'x-n' && value === '4'));
    assert.match(detail.response.body, /before-restart\/4/);
    assert.equal(detail.client_address, '127.0.0.1');
    // Opened once, it is searchable like the rest; and it replays through the edge like any capture.
    const found = (await inspect(fresh, 'GET', '/api/requests?summary=1&q=evt_hist_4')).json.requests;
    assert.deepEqual(found.map((item: any) => item.id), [old.id]);
    const count = stack.seen.length;
    const replay = await inspect(fresh, 'POST', `/api/requests/${old.id}/replay`, { body: {} });
    assert.equal(replay.status, 200, replay.text);
    await waitFor(() => stack.seen.length === count + 1, 5_000, 'the replay');
  });

  test('an edge that refuses the history (a bad token) leaves the inspector empty and working', async () => {
    const refused = await Inspector.start({ port: 0, edge: stack.edge.url, token: 'svc_pat_00000000_000000000000000000000000000000000000' });
    others.push(refused);
    refused.attach(stack.client);
    await waitFor(async () => (await inspect(refused, 'GET', '/api/status')).json.history.error !== null, 5_000, 'the refusal');
    const status = (await inspect(refused, 'GET', '/api/status')).json;
    assert.equal(status.history.loaded, 0);
    assert.match(status.history.error, /token|unauthori/i);
    assert.equal((await inspect(refused, 'GET', '/api/requests')).json.requests.length, 0);
    await stack.send('GET', '/still-works');
    await waitFor(() => refused.ring.size === 1, 5_000, 'the live exchange');
  });
});
