/**
 * Issue 23, finding 5: "duplicate detection trusts the sender". Whoever sent a given X-GitHub-Delivery /
 * Stripe event id first won: the real signed delivery was answered `202 duplicate` and dropped. Now a
 * duplicate is the same sender id with the same body (SHA-256): a forged request that borrows an id is
 * kept beside the real one, both are delivered, and the app's own signature check refuses the forgery
 * (a 4xx parks it as failed at once). A provider's real retry is still recognised. Real edge, real client,
 * a real local server that verifies signatures as a webhook handler does.
 */
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { call, createAccount, readBody, startClient, startEdge, startLocal, waitFor } from '../helpers.js';

const GITHUB_SECRET = 'issue-23-github-secret';
const STRIPE_SECRET = 'whsec_issue_23_duplicates';

function hmac(secret: string, data: string | Buffer): string {
  return createHmac('sha256', secret).update(data).digest('hex');
}

function signedStripe(body: string): string {
  const t = String(Math.floor(Date.now() / 1000));
  return `t=${t},v1=${hmac(STRIPE_SECRET, `${t}.${body}`)}`;
}

function signatureValid(headers: Record<string, string | string[] | undefined>, body: Buffer): boolean {
  const github = headers['x-hub-signature-256'];
  if (typeof github === 'string') return github === `sha256=${hmac(GITHUB_SECRET, body)}`;
  const stripe = headers['stripe-signature'];
  if (typeof stripe !== 'string') return false;
  const parts = Object.fromEntries(stripe.split(',').map((part) => part.split('=') as [string, string]));
  return parts.v1 === hmac(STRIPE_SECRET, `${parts.t}.${body.toString('latin1')}`);
}

test('issue 23.5: a forged request that borrows a delivery id first does not make the real delivery a duplicate; the real retry still is one', async () => {
  const target = await startEdge();
  const delivered: { path: string; body: string; status: number }[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      res.statusCode = signatureValid(req.headers, body) ? 200 : 401;
      delivered.push({ path: req.url!, body: body.toString('latin1'), status: res.statusCode });
      res.end();
    });
  });
  try {
    const account = await createAccount(target);
    const reserved = await call(target, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'signed-hooks', offline: 'queue' } });
    assert.equal(reserved.status, 201, reserved.text);
    const host = `signed-hooks.localhost:${target.port}`;
    const send = (path: string, body: string, headers: Record<string, string>) => call(target, 'POST', path, { host, rawBody: body, headers: { 'content-type': 'application/json', ...headers } });

    // GitHub: the attacker guesses (or saw) the next delivery id and sends first.
    const delivery = randomUUID();
    const forgedGithub = await send('/github', '{"action":"forged"}', { 'x-github-delivery': delivery, 'x-hub-signature-256': 'sha256=00' });
    const realBody = '{"action":"opened","number":7}';
    const realGithub = await send('/github', realBody, { 'x-github-delivery': delivery, 'x-hub-signature-256': `sha256=${hmac(GITHUB_SECRET, realBody)}` });
    assert.equal(realGithub.status, 202, realGithub.text);
    assert.equal(realGithub.json.duplicate, false, 'the real delivery is not a duplicate of the forgery');
    assert.notEqual(realGithub.json.event_id, forgedGithub.json.event_id);
    // GitHub redelivers the real one (same body): that is a duplicate, of the real event.
    const redelivered = await send('/github', realBody, { 'x-github-delivery': delivery, 'x-hub-signature-256': `sha256=${hmac(GITHUB_SECRET, realBody)}` });
    assert.deepEqual([redelivered.json.event_id, redelivered.json.duplicate], [realGithub.json.event_id, true]);

    // Stripe: the event id is in the body; a forged body with the real id first.
    const forgedStripe = await send('/stripe', '{"id":"evt_1Real","object":"event","type":"charge.refunded"}', { 'stripe-signature': 't=1,v1=00' });
    const realStripeBody = '{"id":"evt_1Real","object":"event","type":"invoice.paid"}';
    const realStripe = await send('/stripe', realStripeBody, { 'stripe-signature': signedStripe(realStripeBody) });
    assert.equal(realStripe.json.duplicate, false);
    assert.notEqual(realStripe.json.event_id, forgedStripe.json.event_id);
    // Stripe retries with a new signature timestamp, same body: a duplicate of the real event.
    const retried = await send('/stripe', realStripeBody, { 'stripe-signature': signedStripe(realStripeBody) });
    assert.deepEqual([retried.json.event_id, retried.json.duplicate], [realStripe.json.event_id, true]);

    const listed = await call(target, 'GET', '/api/v1/queue?subdomain=signed-hooks', { token: account.token });
    assert.deepEqual(
      listed.json.queue.map((event: { id: string; sender_id: string }) => [event.id, event.sender_id]),
      [
        [forgedGithub.json.event_id, `github:${delivery}`],
        [realGithub.json.event_id, `github:${delivery}`],
        [forgedStripe.json.event_id, 'stripe:evt_1Real'],
        [realStripe.json.event_id, 'stripe:evt_1Real'],
      ],
    );

    // Delivered in arrival order: the app refuses each forgery once (parked at once), accepts the real ones.
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'signed-hooks' });
    try {
      await waitFor(() => delivered.length === 4, 10_000, 'four deliveries');
      assert.deepEqual(
        delivered.map((d) => [d.path, d.status]),
        [['/github', 401], ['/github', 200], ['/stripe', 401], ['/stripe', 200]],
      );
      assert.equal(delivered[1]!.body, realBody);
      assert.equal(delivered[3]!.body, realStripeBody);
      await waitFor(async () => {
        const queue = (await call(target, 'GET', '/api/v1/queue?subdomain=signed-hooks', { token: account.token })).json.queue as { state: string }[];
        return queue.map((event) => event.state).join() === 'failed,delivered,failed,delivered';
      }, 5_000, 'forgeries parked, real events delivered');
    } finally {
      await client.close();
    }
  } finally {
    await local.close();
    await target.close();
  }
});
