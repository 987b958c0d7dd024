/**
 * Webhook signature verification at the edge (`--verify-webhook PROVIDER:SECRET`, docs/policies.md has
 * the table of how each provider signs). Transport-free: a verifier is a function of the request's
 * method, target, header fields, raw body and the public URL the provider posted to, and answers
 * accepted or a reason. Every comparison of a signature is constant-time (`timingSafeEqual` over
 * equal-length digests); timestamps are checked against a tolerance to refuse replays.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookProvider } from '../../protocol/policy.js';

export interface SignedRequest {
  method: string;
  /** The request target as received: path and query. */
  target: string;
  /** Header fields as a flat [name, value, ...] list, names in any case. */
  fields: readonly string[];
  body: Buffer;
  /** scheme://host + target as the provider addressed it (Twilio signs it). */
  publicUrl: string;
  /** Milliseconds since the epoch. */
  now: number;
}

export type Verdict = { ok: true } | { ok: false; reason: string };

export interface WebhookVerifier {
  readonly provider: WebhookProvider;
  /** The header whose presence says the request is meant for this verifier (for the refusal's reason). */
  readonly header: string;
  verify(request: SignedRequest): Verdict;
}

/** Replay windows, in seconds, as each provider's own libraries apply them. */
export const TOLERANCE_SECONDS = {
  stripe: 300,
  slack: 300,
  svix: 300,
  'standard-webhooks': 300,
  paddle: 5,
  linear: 60,
} as const;

const ACCEPTED: Verdict = Object.freeze({ ok: true });
const refuse = (reason: string): Verdict => ({ ok: false, reason });

/** The first value of a header, by lower-case name; undefined when absent. */
export function fieldValue(fields: readonly string[], lowerName: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) return fields[i + 1];
  }
  return undefined;
}

function hmac(algorithm: 'sha256' | 'sha1', key: string | Buffer, ...parts: (string | Buffer)[]): Buffer {
  const mac = createHmac(algorithm, key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** Constant-time comparison of a received signature (text in `encoding`) with the expected digest. */
function sameDigest(expected: Buffer, received: string, encoding: 'hex' | 'base64'): boolean {
  const text = received.trim();
  if (encoding === 'hex' ? !/^[0-9a-fA-F]+$/.test(text) : !/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return false;
  const bytes = Buffer.from(text, encoding);
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

function sameText(expected: string, received: string): boolean {
  const a = createHash('sha256').update(expected).digest();
  const b = createHash('sha256').update(received).digest();
  return timingSafeEqual(a, b);
}

function staleness(timestampSeconds: number, now: number, tolerance: number): string | null {
  if (!Number.isFinite(timestampSeconds)) return 'the signature timestamp is not a number';
  const age = now / 1000 - timestampSeconds;
  if (age > tolerance) return `the signature timestamp is ${Math.round(age)} s old; at most ${tolerance} s is accepted`;
  if (age < -tolerance) return `the signature timestamp is ${Math.round(-age)} s in the future; at most ${tolerance} s is accepted`;
  return null;
}

/** "t=TS,v1=SIG,v1=SIG" (Stripe) or "ts=TS;h1=SIG" (Paddle): the timestamp and every signature. */
function timestampedSignatures(value: string, separator: string, timestampKey: string, signatureKey: string): { timestamp: string; signatures: string[] } {
  let timestamp = '';
  const signatures: string[] = [];
  for (const part of value.split(separator)) {
    const equals = part.indexOf('=');
    const key = part.slice(0, equals).trim();
    if (key === timestampKey) timestamp = part.slice(equals + 1).trim();
    else if (key === signatureKey) signatures.push(part.slice(equals + 1).trim());
  }
  return { timestamp, signatures };
}

const missing = (header: string): Verdict => refuse(`no ${header} header`);
const mismatch = (header: string): Verdict => refuse(`the ${header} signature does not match the body`);

// ---- providers ------------------------------------------------------------------------------------------

/** GitHub: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(secret, body). */
function github(secret: string): WebhookVerifier {
  const header = 'x-hub-signature-256';
  return {
    provider: 'github',
    header,
    verify({ fields, body }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('X-Hub-Signature-256');
      if (!value.startsWith('sha256=')) return refuse('X-Hub-Signature-256 does not start with "sha256="');
      return sameDigest(hmac('sha256', secret, body), value.slice(7), 'hex') ? ACCEPTED : mismatch('X-Hub-Signature-256');
    },
  };
}

/** GitLab: X-Gitlab-Token is the secret token itself (no signature over the body). */
function gitlab(secret: string): WebhookVerifier {
  const header = 'x-gitlab-token';
  return {
    provider: 'gitlab',
    header,
    verify({ fields }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('X-Gitlab-Token');
      return sameText(secret, value) ? ACCEPTED : refuse('the X-Gitlab-Token does not match');
    },
  };
}

/** Stripe: Stripe-Signature "t=TS,v1=HEX[,v1=...]", HMAC-SHA256(secret, "TS.body"), 300 s tolerance. */
function stripe(secret: string): WebhookVerifier {
  const header = 'stripe-signature';
  return {
    provider: 'stripe',
    header,
    verify({ fields, body, now }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('Stripe-Signature');
      const { timestamp, signatures } = timestampedSignatures(value, ',', 't', 'v1');
      if (!/^[0-9]{1,12}$/.test(timestamp) || signatures.length === 0) return refuse('Stripe-Signature has no t= timestamp or no v1= signature');
      const expected = hmac('sha256', secret, timestamp, '.', body);
      if (!signatures.some((signature) => sameDigest(expected, signature, 'hex'))) return mismatch('Stripe-Signature');
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS.stripe);
      return stale === null ? ACCEPTED : refuse(stale);
    },
  };
}

/** Slack: X-Slack-Signature "v0=" + hex HMAC-SHA256(secret, "v0:TS:body"), X-Slack-Request-Timestamp, 300 s. */
function slack(secret: string): WebhookVerifier {
  const header = 'x-slack-signature';
  return {
    provider: 'slack',
    header,
    verify({ fields, body, now }) {
      const value = fieldValue(fields, header);
      const timestamp = fieldValue(fields, 'x-slack-request-timestamp');
      if (value === undefined) return missing('X-Slack-Signature');
      if (timestamp === undefined || !/^[0-9]{1,12}$/.test(timestamp)) return refuse('no valid X-Slack-Request-Timestamp header');
      if (!value.startsWith('v0=')) return refuse('X-Slack-Signature does not start with "v0="');
      if (!sameDigest(hmac('sha256', secret, `v0:${timestamp}:`, body), value.slice(3), 'hex')) return mismatch('X-Slack-Signature');
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS.slack);
      return stale === null ? ACCEPTED : refuse(stale);
    },
  };
}

/** Shopify: X-Shopify-Hmac-Sha256 = base64 HMAC-SHA256(secret, body). */
function shopify(secret: string): WebhookVerifier {
  const header = 'x-shopify-hmac-sha256';
  return {
    provider: 'shopify',
    header,
    verify({ fields, body }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('X-Shopify-Hmac-Sha256');
      return sameDigest(hmac('sha256', secret, body), value, 'base64') ? ACCEPTED : mismatch('X-Shopify-Hmac-Sha256');
    },
  };
}

/**
 * Twilio: X-Twilio-Signature = base64 HMAC-SHA1(auth token, URL + each POST form parameter's name and value,
 * sorted by name). A JSON body is instead covered by a `bodySHA256` query parameter (hex SHA-256 of the
 * body) inside the signed URL. The URL is the one Twilio called, so the edge reconstructs the public URL;
 * as Twilio's own library does, it also tries it with the scheme's default port added or removed.
 */
function twilio(secret: string): WebhookVerifier {
  const header = 'x-twilio-signature';
  return {
    provider: 'twilio',
    header,
    verify({ fields, body, publicUrl, method }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('X-Twilio-Signature');
      let url: URL;
      try {
        url = new URL(publicUrl);
      } catch {
        return refuse('the public URL could not be reconstructed');
      }
      const bodyHash = url.searchParams.get('bodySHA256');
      let signedParams = '';
      if (bodyHash !== null) {
        if (!sameDigest(createHash('sha256').update(body).digest(), bodyHash, 'hex')) return refuse('the bodySHA256 query parameter does not match the body');
      } else if (method === 'POST') {
        const contentType = fieldValue(fields, 'content-type') ?? '';
        if (/^application\/x-www-form-urlencoded/i.test(contentType)) {
          const params = [...new URLSearchParams(body.toString('utf8'))].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
          signedParams = params.map(([name, v]) => name + v).join('');
        }
      }
      for (const candidate of urlVariants(url, publicUrl)) {
        if (sameDigest(hmac('sha1', secret, candidate, signedParams), value, 'base64')) return ACCEPTED;
      }
      return mismatch('X-Twilio-Signature');
    },
  };
}

/** The URL as given, and with its scheme's default port added (or removed when it is there). */
function urlVariants(url: URL, asGiven: string): string[] {
  const defaultPort = url.protocol === 'https:' ? '443' : '80';
  const rest = `${url.pathname}${url.search}`;
  const host = url.hostname.includes(':') && !url.hostname.startsWith('[') ? `[${url.hostname}]` : url.hostname;
  const bare = `${url.protocol}//${host}${rest}`;
  const withDefault = `${url.protocol}//${host}:${defaultPort}${rest}`;
  return url.port === '' ? [asGiven, bare, withDefault] : [asGiven, bare];
}

/**
 * Standard Webhooks (and Svix, which defined it): webhook-id, webhook-timestamp, webhook-signature
 * "v1,BASE64 [v1,BASE64 ...]" = HMAC-SHA256(base64-decoded secret after "whsec_", "id.timestamp.body"), 300 s.
 */
function standardWebhooks(secret: string, provider: 'svix' | 'standard-webhooks'): WebhookVerifier {
  const prefix = provider === 'svix' ? 'svix-' : 'webhook-';
  const header = `${prefix}signature`;
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return {
    provider,
    header,
    verify({ fields, body, now }) {
      const id = fieldValue(fields, `${prefix}id`);
      const timestamp = fieldValue(fields, `${prefix}timestamp`);
      const value = fieldValue(fields, header);
      if (value === undefined) return missing(`${prefix}signature`);
      if (id === undefined || timestamp === undefined || !/^[0-9]{1,12}$/.test(timestamp)) return refuse(`no ${prefix}id or no valid ${prefix}timestamp header`);
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS[provider]);
      if (stale !== null) return refuse(stale);
      const expected = hmac('sha256', key, `${id}.${timestamp}.`, body);
      for (const part of value.split(' ')) {
        const comma = part.indexOf(',');
        if (comma !== -1 && part.slice(0, comma) === 'v1' && sameDigest(expected, part.slice(comma + 1), 'base64')) return ACCEPTED;
      }
      return mismatch(`${prefix}signature`);
    },
  };
}

/** Paddle Billing: Paddle-Signature "ts=TS;h1=HEX", HMAC-SHA256(secret, "TS:body"), 5 s (Paddle's SDK). */
function paddle(secret: string): WebhookVerifier {
  const header = 'paddle-signature';
  return {
    provider: 'paddle',
    header,
    verify({ fields, body, now }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('Paddle-Signature');
      const { timestamp, signatures } = timestampedSignatures(value, ';', 'ts', 'h1');
      if (!/^[0-9]{1,12}$/.test(timestamp) || signatures.length === 0) return refuse('Paddle-Signature has no ts= timestamp or no h1= signature');
      const expected = hmac('sha256', secret, `${timestamp}:`, body);
      if (!signatures.some((signature) => sameDigest(expected, signature, 'hex'))) return mismatch('Paddle-Signature');
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS.paddle);
      return stale === null ? ACCEPTED : refuse(stale);
    },
  };
}

/** Linear: Linear-Signature = hex HMAC-SHA256(secret, body); the body's `webhookTimestamp` (ms) within 60 s. */
function linear(secret: string): WebhookVerifier {
  const header = 'linear-signature';
  return {
    provider: 'linear',
    header,
    verify({ fields, body, now }) {
      const value = fieldValue(fields, header);
      if (value === undefined) return missing('Linear-Signature');
      if (!sameDigest(hmac('sha256', secret, body), value, 'hex')) return mismatch('Linear-Signature');
      let timestamp: unknown;
      try {
        timestamp = (JSON.parse(body.toString('utf8')) as { webhookTimestamp?: unknown }).webhookTimestamp;
      } catch {
        return refuse('the body is not JSON with a webhookTimestamp');
      }
      if (typeof timestamp !== 'number') return refuse('the body has no numeric webhookTimestamp');
      const stale = staleness(timestamp / 1000, now, TOLERANCE_SECONDS.linear);
      return stale === null ? ACCEPTED : refuse(stale);
    },
  };
}

/** Generic: HEADER holds HMAC-SHA256(secret, body), hex or base64, with or without a "sha256=" style prefix. */
function genericHmac(secret: string, headerName: string): WebhookVerifier {
  const header = headerName.toLowerCase();
  return {
    provider: 'hmac-sha256',
    header,
    verify({ fields, body }) {
      const raw = fieldValue(fields, header);
      if (raw === undefined) return missing(headerName);
      const value = raw.replace(/^[a-z0-9-]+=/i, '');
      const expected = hmac('sha256', secret, body);
      return sameDigest(expected, value, 'hex') || sameDigest(expected, value, 'base64') ? ACCEPTED : mismatch(headerName);
    },
  };
}

export function webhookVerifier(provider: WebhookProvider, secret: string, header?: string): WebhookVerifier {
  switch (provider) {
    case 'github':
      return github(secret);
    case 'gitlab':
      return gitlab(secret);
    case 'stripe':
      return stripe(secret);
    case 'slack':
      return slack(secret);
    case 'shopify':
      return shopify(secret);
    case 'twilio':
      return twilio(secret);
    case 'svix':
    case 'standard-webhooks':
      return standardWebhooks(secret, provider);
    case 'paddle':
      return paddle(secret);
    case 'linear':
      return linear(secret);
    case 'hmac-sha256':
      return genericHmac(secret, header ?? 'x-signature');
  }
}

/**
 * Runs a tunnel's verifiers (several for a rotation, or several providers on one URL): accepted when any
 * accepts. The refusal names the reason of a verifier whose header the request carries, else what is missing.
 */
export function verifyWebhook(verifiers: readonly WebhookVerifier[], request: SignedRequest): Verdict {
  let reason: string | null = null;
  for (const verifier of verifiers) {
    const verdict = verifier.verify(request);
    if (verdict.ok) return verdict;
    if (reason === null || fieldValue(request.fields, verifier.header) !== undefined) reason = `${verifier.provider}: ${verdict.reason}`;
  }
  return refuse(reason ?? 'no webhook verifier is configured');
}
