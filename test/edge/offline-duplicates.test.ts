/**
 * Which sender ids a held webhook is known by (docs/offline.md, "Duplicates"): a table of requests and
 * the id each one carries. The id alone never makes a duplicate: the store pairs it with the body's
 * SHA-256 (test/edge/issue-23-queue-duplicates.test.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { senderIdOf } from '../../src/edge/offline-queue.js';

const stripeEvent = JSON.stringify({ id: 'evt_1Nabc', object: 'event', type: 'charge.succeeded', data: { object: { id: 'ch_1', object: 'charge' } } });
// As Stripe sends it: pretty-printed, "id" first and "object" second.
const stripePretty = `{\n  "id": "evt_1Npretty",\n  "object": "event",\n  "api_version": "2023-10-16"\n}`;

const CASES: [name: string, headers: string[], body: string | null, id: string | null][] = [
  ['GitHub: X-GitHub-Delivery', ['x-github-event', 'push', 'x-github-delivery', '72d3162e-cc78-11e3-81ab-4c9367dc0958'], '{}', 'github:72d3162e-cc78-11e3-81ab-4c9367dc0958'],
  ['Standard Webhooks: webhook-id', ['webhook-id', 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', 'webhook-timestamp', '1674087231'], '{}', 'webhook-id:msg_2KWPBgLlAfxdpx2AI54pPJ85f4W'],
  ['Svix: svix-id', ['svix-id', 'msg_p5jXN8AQM9LWM0D4loKWxJek'], '{}', 'webhook-id:msg_p5jXN8AQM9LWM0D4loKWxJek'],
  ['Idempotency-Key', ['idempotency-key', 'order-42-paid'], 'x', 'idempotency-key:order-42-paid'],
  ['Stripe: the event id at the start of the body', ['stripe-signature', 't=1,v1=ab'], stripeEvent, 'stripe:evt_1Nabc'],
  ['Stripe, pretty-printed as Stripe sends it', ['stripe-signature', 't=1,v1=ab'], stripePretty, 'stripe:evt_1Npretty'],
  ['Stripe body without the signature header', [], stripeEvent, 'stripe:evt_1Nabc'],
  ['a JSON object that is not an event', ['stripe-signature', 't=1,v1=ab'], '{"id":"ch_1","object":"charge"}', null],
  ['"object":"event" nested only', [], '{"id":"x","data":{"object":"event"}}', null],
  ['a body that is not JSON', ['stripe-signature', 't=1,v1=ab'], 'id=evt_1&object=event', null],
  ['no id at all', ['content-type', 'application/json'], '{"hello":"world"}', null],
  ['an empty X-GitHub-Delivery counts for nothing', ['x-github-delivery', ''], null, null],
];

for (const [name, headers, body, id] of CASES) {
  test(`sender id: ${name}`, () => {
    assert.equal(senderIdOf(headers, body === null ? null : Buffer.from(body)), id);
  });
}
