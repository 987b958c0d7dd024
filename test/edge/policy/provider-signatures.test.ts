/**
 * Webhook verification (src/edge/policy/webhooks.ts) against the providers' own signing: their official
 * npm SDKs where one exists (@octokit/webhooks-methods, stripe, twilio, standardwebhooks, and the Paddle
 * and Linear SDKs' verifiers as a second opinion on our samples), and their published test vectors.
 * For every row of the realworld provider table that Burrow verifies: a fresh signed sample is accepted;
 * a tampered body, a wrong secret and (where the scheme has one) a stale timestamp are refused with a reason.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import Stripe from 'stripe';
import twilio from 'twilio';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Paddle, WebhooksValidator } from '@paddle/paddle-node-sdk';
import { LinearWebhookClient } from '@linear/sdk/webhooks';
import { beginWebhookChecks, webhookVerifier, verifyWebhook, type SignedRequest, type Verdict, type WebhookVerifier } from '../../../src/edge/policy/webhooks.js';
import type { WebhookProvider } from '../../../src/protocol/policy.js';
import { request as httpRequest } from 'undici';
import { call, createAccount, readBody, ROOT, startClient, startEdge, startLocal } from '../../helpers.js';
import { PROVIDER_TABLE, type ProviderRow } from './provider-table.js';

const NOW = Date.now();
const STALE = Math.floor(NOW / 1000) - 3600;

interface Sample {
  fields: string[];
  body: Buffer;
  publicUrl?: string;
  method?: string;
}

/** `url`: the URL the provider called (only Twilio signs it). */
type Signer = (secret: string, body: string, timestampSeconds: number, url: string) => Promise<Sample> | Sample;

const stripeSdk = new Stripe('sk_test_burrow_not_a_key');
const hex = (key: string | Buffer, data: string): string => createHmac('sha256', key).update(data).digest('hex');

function standardSigner(prefix: 'svix-' | 'webhook-'): Signer {
  return (secret, body, ts) => {
    const id = `msg_${randomBytes(6).toString('hex')}`;
    const signature = new StandardWebhook(secret).sign(id, new Date(ts * 1000), body);
    return { fields: [`${prefix}id`, id, `${prefix}timestamp`, String(ts), `${prefix}signature`, signature], body: Buffer.from(body) };
  };
}

const TWILIO_URL = 'https://hooks.example.test/sms?tenant=7';

/** How each verified scheme is signed, by the provider's SDK when there is one. */
const SIGNERS: Record<WebhookProvider, { secret: () => string; sign: Signer; timestamped: boolean; header?: string; generic?: (secret: string, body: string) => string }> = {
  github: { secret: () => randomBytes(16).toString('hex'), timestamped: false, sign: async (secret, body) => ({ fields: ['X-Hub-Signature-256', await githubSign(secret, body)], body: Buffer.from(body) }) },
  gitlab: { secret: () => randomBytes(16).toString('hex'), timestamped: false, sign: (secret, body) => ({ fields: ['X-Gitlab-Token', secret], body: Buffer.from(body) }) },
  stripe: {
    secret: () => `whsec_${randomBytes(16).toString('hex')}`,
    timestamped: true,
    sign: (secret, body, ts) => ({ fields: ['Stripe-Signature', stripeSdk.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: ts })], body: Buffer.from(body) }),
  },
  slack: {
    secret: () => randomBytes(16).toString('hex'),
    timestamped: true,
    sign: (secret, body, ts) => ({ fields: ['X-Slack-Request-Timestamp', String(ts), 'X-Slack-Signature', `v0=${hex(secret, `v0:${ts}:${body}`)}`], body: Buffer.from(body) }),
  },
  shopify: {
    secret: () => randomBytes(16).toString('hex'),
    timestamped: false,
    sign: (secret, body) => ({ fields: ['X-Shopify-Hmac-Sha256', createHmac('sha256', secret).update(body).digest('base64')], body: Buffer.from(body) }),
  },
  twilio: {
    secret: () => randomBytes(16).toString('hex'),
    timestamped: false,
    sign: (secret, body, _ts, url) => {
      const params = Object.fromEntries(new URLSearchParams(body));
      return {
        fields: ['Content-Type', 'application/x-www-form-urlencoded', 'X-Twilio-Signature', twilio.getExpectedTwilioSignature(secret, url, params)],
        body: Buffer.from(body),
        publicUrl: url,
        method: 'POST',
      };
    },
  },
  svix: { secret: () => `whsec_${randomBytes(24).toString('base64')}`, timestamped: true, sign: standardSigner('svix-') },
  'standard-webhooks': { secret: () => `whsec_${randomBytes(24).toString('base64')}`, timestamped: true, sign: standardSigner('webhook-') },
  paddle: {
    secret: () => `pdl_ntfset_${randomBytes(16).toString('hex')}`,
    timestamped: true,
    sign: (secret, body, ts) => ({ fields: ['Paddle-Signature', `ts=${ts};h1=${hex(secret, `${ts}:${body}`)}`], body: Buffer.from(body) }),
  },
  linear: {
    secret: () => `lin_wh_${randomBytes(16).toString('hex')}`,
    timestamped: true,
    sign: (secret, body, ts) => {
      const withTime = JSON.stringify({ ...(JSON.parse(body) as object), webhookTimestamp: ts * 1000 });
      return { fields: ['Linear-Signature', hex(secret, withTime)], body: Buffer.from(withTime) };
    },
  },
  'hmac-sha256': { secret: () => randomBytes(16).toString('hex'), timestamped: false, sign: () => assert.fail('generic rows sign by header') },
};

/** The generic rows: Dropbox (hex, no prefix) and Typeform ("sha256=" + base64). */
const GENERIC: Record<string, (secret: string, body: string) => string> = {
  'X-Dropbox-Signature': (secret, body) => hex(secret, body),
  'Typeform-Signature': (secret, body) => `sha256=${createHmac('sha256', secret).update(body).digest('base64')}`,
};

function bodyFor(provider: WebhookProvider): string {
  return provider === 'twilio' ? 'From=%2B15551230000&Body=hello+there&MessageSid=SM123' : JSON.stringify({ event: 'ping', id: randomBytes(4).toString('hex') });
}

async function sampleFor(row: ProviderRow, secret: string, body: string, ts: number, url = TWILIO_URL): Promise<Sample> {
  if (row.verifiedAs === 'hmac-sha256') return { fields: [row.header, GENERIC[row.header]!(secret, body)], body: Buffer.from(body) };
  return SIGNERS[row.verifiedAs!].sign(secret, body, ts, url);
}

function request(sample: Sample, fields = sample.fields, body = sample.body): SignedRequest {
  return { method: sample.method ?? 'POST', target: '/hook', fields, body, publicUrl: sample.publicUrl ?? 'https://hooks.example.test/hook', now: NOW };
}

/** The request's body fed to the verifier in three pieces through beginWebhookChecks. */
function inPieces(verifier: WebhookVerifier, signed: SignedRequest): Verdict {
  const checks = beginWebhookChecks([verifier], signed);
  const third = Math.ceil(signed.body.length / 3);
  for (let at = 0; at < signed.body.length; at += third) checks.update(new Uint8Array(signed.body.subarray(at, at + third)));
  return checks.finish();
}

test('the provider table has 23 rows, and docs/policies.md lists each with the same verified mark', () => {
  assert.equal(PROVIDER_TABLE.length, 23);
  const docs = readFileSync(join(ROOT, 'docs', 'policies.md'), 'utf8');
  for (const row of PROVIDER_TABLE) {
    const line = docs.split('\n').find((candidate) => candidate.startsWith(`| ${row.name} |`));
    assert.ok(line !== undefined, `${row.name} is in the docs table`);
    const cells = line.split('|').map((cell) => cell.trim());
    assert.equal(cells.at(-2), row.verifiedAs === null ? 'no' : `yes: \`${row.verifiedAs}\``, row.name);
  }
});

for (const row of PROVIDER_TABLE.filter((candidate) => candidate.verifiedAs !== null)) {
  const provider = row.verifiedAs!;
  const timestamped = provider !== 'hmac-sha256' && SIGNERS[provider].timestamped;
  test(`${row.name} (${provider}): a signed sample passes; tampered body, wrong secret${timestamped ? ', stale timestamp' : ''} are refused`, async () => {
    const secret = provider === 'hmac-sha256' ? randomBytes(16).toString('hex') : SIGNERS[provider].secret();
    const verifier = webhookVerifier(provider, secret, provider === 'hmac-sha256' ? row.header : undefined);
    const ts = Math.floor(NOW / 1000);
    const body = bodyFor(provider);
    const good = await sampleFor(row, secret, body, ts);
    assert.deepEqual(verifier.verify(request(good)), { ok: true });
    // Fed in pieces as a body arrives (the offline queue's way), the verdict is the same.
    assert.deepEqual(inPieces(verifier, request(good)), { ok: true });

    const tampered = Buffer.from(good.body.toString('utf8').replace(/.$/, (last) => (last === '}' ? ' }' : `${last}x`)));
    const tamperedVerdict = verifier.verify(request(good, good.fields, tampered));
    assert.deepEqual(inPieces(verifier, request(good, good.fields, tampered)), verifyWebhook([verifier], request(good, good.fields, tampered)));
    if (provider === 'gitlab') assert.deepEqual(tamperedVerdict, { ok: true }, 'GitLab signs nothing: its token is all it checks');
    else {
      assert.equal(tamperedVerdict.ok, false);
      assert.match((tamperedVerdict as { reason: string }).reason, /does not match|bodySHA256/);
    }

    const other = provider === 'hmac-sha256' ? randomBytes(16).toString('hex') : SIGNERS[provider].secret();
    const wrong = await sampleFor(row, other, body, ts);
    const wrongVerdict = verifier.verify(request(wrong));
    assert.equal(wrongVerdict.ok, false, 'wrong secret');

    const unsigned = verifier.verify(request(good, ['Content-Type', 'application/json'], good.body));
    assert.equal(unsigned.ok, false);
    assert.match((unsigned as { reason: string }).reason, /^no /);
    // Decided from the head alone: no body is read for it.
    assert.deepEqual(beginWebhookChecks([verifier], request(good, ['Content-Type', 'application/json'])).early, { ok: false, reason: `${provider}: ${(unsigned as { reason: string }).reason}` });

    if (timestamped) {
      const stale = await sampleFor(row, secret, body, STALE);
      const staleVerdict = verifier.verify(request(stale));
      assert.equal(staleVerdict.ok, false, 'stale');
      assert.match((staleVerdict as { reason: string }).reason, /old/);
    }
  });
}

test('the providers\' own verifiers accept what the samples sign (Stripe, Twilio, Standard Webhooks, Paddle, Linear SDKs)', async () => {
  const body = JSON.stringify({ event: 'ping' });
  const ts = Math.floor(Date.now() / 1000);
  const stripeSecret = SIGNERS.stripe.secret();
  const stripeSample = await SIGNERS.stripe.sign(stripeSecret, body, ts, TWILIO_URL);
  assert.equal((stripeSdk.webhooks.constructEvent(body, stripeSample.fields[1]!, stripeSecret) as { event?: string }).event, 'ping');

  const twilioSecret = SIGNERS.twilio.secret();
  const form = bodyFor('twilio');
  const twilioSample = await SIGNERS.twilio.sign(twilioSecret, form, ts, TWILIO_URL);
  assert.equal(twilio.validateRequest(twilioSecret, twilioSample.fields[3]!, TWILIO_URL, Object.fromEntries(new URLSearchParams(form))), true);

  // The SDK picks its crypto runtime when a client is made (no request is sent).
  new Paddle('pdl_sdbx_apikey_burrow_test');
  const paddleSecret = SIGNERS.paddle.secret();
  const paddleSample = await SIGNERS.paddle.sign(paddleSecret, body, ts, TWILIO_URL);
  assert.equal(await new WebhooksValidator().isValidSignature(body, paddleSecret, paddleSample.fields[1]!), true);

  const linearSecret = SIGNERS.linear.secret();
  const linearSample = await SIGNERS.linear.sign(linearSecret, body, ts, TWILIO_URL);
  assert.equal(new LinearWebhookClient(linearSecret).verify(linearSample.body, linearSample.fields[1]!), true);

  const swSecret = SIGNERS['standard-webhooks'].secret();
  const swSample = await SIGNERS['standard-webhooks'].sign(swSecret, body, ts, TWILIO_URL);
  const headers = Object.fromEntries(Array.from({ length: swSample.fields.length / 2 }, (_, i) => [swSample.fields[i * 2]!, swSample.fields[i * 2 + 1]!]));
  assert.deepEqual(new StandardWebhook(swSecret).verify(body, headers), { event: 'ping' });
});

test('published test vectors: GitHub, Slack, Standard Webhooks / Svix, Twilio', () => {
  const github = webhookVerifier('github', "It's a Secret to Everybody");
  assert.deepEqual(
    github.verify({ method: 'POST', target: '/', fields: ['X-Hub-Signature-256', 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'], body: Buffer.from('Hello, World!'), publicUrl: '', now: NOW }),
    { ok: true },
  );
  const slackBody =
    'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
  const slack = webhookVerifier('slack', '8f742231b10e8888abcd99yyyzzz85a5');
  const slackFields = ['X-Slack-Request-Timestamp', '1531420618', 'X-Slack-Signature', 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503'];
  assert.deepEqual(slack.verify({ method: 'POST', target: '/', fields: slackFields, body: Buffer.from(slackBody), publicUrl: '', now: 1531420618_000 }), { ok: true });
  assert.match((slack.verify({ method: 'POST', target: '/', fields: slackFields, body: Buffer.from(slackBody), publicUrl: '', now: NOW }) as { reason: string }).reason, /old/);
  for (const [provider, prefix] of [['standard-webhooks', 'webhook-'], ['svix', 'svix-']] as const) {
    const verifier = webhookVerifier(provider, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    const fields = [`${prefix}id`, 'msg_p5jXN8AQM9LWM0D4loKWxJek', `${prefix}timestamp`, '1614265330', `${prefix}signature`, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='];
    assert.deepEqual(verifier.verify({ method: 'POST', target: '/', fields, body: Buffer.from('{"test": 2432232314}'), publicUrl: '', now: 1614265330_000 }), { ok: true }, provider);
  }
  const twilioVerifier = webhookVerifier('twilio', '12345');
  const form = 'CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212';
  const twilioRequest = (publicUrl: string): SignedRequest => ({
    method: 'POST',
    target: '/myapp.php?foo=1&bar=2',
    fields: ['Content-Type', 'application/x-www-form-urlencoded', 'X-Twilio-Signature', '0/KCTR6DLpKmkAf8muzZqo1nDgQ='],
    body: Buffer.from(form),
    publicUrl,
    now: NOW,
  });
  assert.deepEqual(twilioVerifier.verify(twilioRequest('https://mycompany.com/myapp.php?foo=1&bar=2')), { ok: true });
  assert.deepEqual(twilioVerifier.verify(twilioRequest('https://mycompany.com:443/myapp.php?foo=1&bar=2')), { ok: true }, 'with the default port, as Twilio\'s library allows');
  assert.equal(twilioVerifier.verify(twilioRequest('http://mycompany.com/myapp.php?foo=1&bar=2')).ok, false, 'the scheme is signed: an edge behind TLS must know it was https');
});

test('Twilio JSON bodies: bodySHA256 in the signed URL covers the body', () => {
  const secret = 'twilio-token';
  const body = JSON.stringify({ event: 'call.completed' });
  const bodyHash = createHash('sha256').update(body).digest('hex');
  const url = `https://hooks.example.test/voice?bodySHA256=${bodyHash}`;
  const signature = twilio.getExpectedTwilioSignature(secret, url, {});
  const verifier = webhookVerifier('twilio', secret);
  const base = { method: 'POST', target: '/voice', fields: ['Content-Type', 'application/json', 'X-Twilio-Signature', signature], publicUrl: url, now: NOW };
  assert.deepEqual(verifier.verify({ ...base, body: Buffer.from(body) }), { ok: true });
  assert.match((verifier.verify({ ...base, body: Buffer.from(`${body} `) }) as { reason: string }).reason, /bodySHA256/);
});

test('rotation: two secrets of one provider, either passes; the refusal names the provider and the reason', () => {
  const old = webhookVerifier('github', 'old-secret');
  const next = webhookVerifier('github', 'new-secret');
  const body = Buffer.from('{"a":1}');
  const signed = (secret: string): SignedRequest => ({ method: 'POST', target: '/', fields: ['x-hub-signature-256', `sha256=${hex(secret, '{"a":1}')}`], body, publicUrl: '', now: NOW });
  assert.deepEqual(verifyWebhook([old, next], signed('old-secret')), { ok: true });
  assert.deepEqual(verifyWebhook([old, next], signed('new-secret')), { ok: true });
  assert.deepEqual(verifyWebhook([old, next], signed('third')), { ok: false, reason: 'github: the X-Hub-Signature-256 signature does not match the body' });
  const stripeToo = webhookVerifier('stripe', 'whsec_x');
  assert.deepEqual(verifyWebhook([stripeToo, old], signed('third')), { ok: false, reason: 'github: the X-Hub-Signature-256 signature does not match the body' }, 'the reason of the verifier whose header came');
});

test('through a tunnel (a real edge, client and local server), per verified row: the signed sample reaches the local server byte-exact; signed with another secret it is 401 SIGNATURE_INVALID, never forwarded, captured as rejected: signature', { timeout: 180_000 }, async () => {
  const edge = await startEdge();
  const account = await createAccount(edge, 'PRO');
  const seen: { url: string; body: Buffer }[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      seen.push({ url: req.url!, body });
      res.end('ok');
    });
  });
  try {
    const verified = PROVIDER_TABLE.filter((row) => row.verifiedAs !== null);
    assert.equal(verified.length, 14);
    for (const [index, row] of verified.entries()) {
      const provider = row.verifiedAs!;
      const secret = provider === 'hmac-sha256' ? randomBytes(16).toString('hex') : SIGNERS[provider].secret();
      const other = provider === 'hmac-sha256' ? randomBytes(16).toString('hex') : SIGNERS[provider].secret();
      const subdomain = `signed-${index}`;
      const entry = { provider, secret, ...(provider === 'hmac-sha256' ? { header: row.header } : {}) };
      const started = await startClient(edge, account.token, local.port, { subdomain, policy: { verify_webhook: [entry] } });
      try {
        const path = `/hooks/${index}?tenant=7`;
        const url = `http://${started.host}${path}`;
        const post = async (sample: Sample) => {
          const headers: Record<string, string> = { host: started.host, 'content-type': 'application/json' };
          for (let i = 0; i < sample.fields.length; i += 2) headers[sample.fields[i]!.toLowerCase()] = sample.fields[i + 1]!;
          const response = await httpRequest(`${edge.base}${path}`, { method: 'POST', headers, body: sample.body });
          return { status: response.statusCode, text: await response.body.text() };
        };
        const body = bodyFor(provider);
        const good = await sampleFor(row, secret, body, Math.floor(Date.now() / 1000), url);
        const passed = await post(good);
        assert.equal(passed.status, 200, `${row.name}: ${passed.text}`);
        assert.ok(seen.at(-1)!.url === path && seen.at(-1)!.body.equals(good.body), `${row.name}: byte-exact`);
        const forged = await post(await sampleFor(row, other, body, Math.floor(Date.now() / 1000), url));
        assert.equal(forged.status, 401, row.name);
        assert.equal((JSON.parse(forged.text) as { error: { code: string } }).error.code, 'SIGNATURE_INVALID', row.name);
        assert.equal(seen.filter((entry) => entry.url === path).length, 1, `${row.name}: the forgery never reached the app`);
        const listed = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}`, { token: account.token });
        assert.deepEqual(listed.json.requests.map((capture: { status: number; rejected?: string }) => [capture.status, capture.rejected ?? null]), [[401, 'signature'], [200, null]], row.name);
      } finally {
        await started.client.close();
      }
    }
  } finally {
    await local.close();
    await edge.close();
  }
});
