/**
 * Webhook signature verification at the edge (`--verify-webhook PROVIDER:SECRET`, docs/policies.md has
 * the table of how each provider signs). Transport-free: a verifier looks at the request's head (method,
 * target, header fields, the public URL the provider posted to) and is then fed the raw body as it
 * arrives, so an HMAC over the body needs no copy of it (the offline queue streams bodies to disk);
 * `verify` does the same over a whole body. Every comparison of a signature is constant-time
 * (`timingSafeEqual` over equal-length digests); timestamps are checked against a tolerance to refuse
 * replays. A head without the verifier's signature header is refused before any body is read.
 */
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from 'node:crypto';
import type { WebhookProvider } from '../../protocol/policy.js';

export interface SignedHead {
  method: string;
  /** The request target as received: path and query. */
  target: string;
  /** Header fields as a flat [name, value, ...] list, names in any case. */
  fields: readonly string[];
  /** scheme://host + target as the provider addressed it (Twilio signs it). */
  publicUrl: string;
  /** Milliseconds since the epoch. */
  now: number;
}

export interface SignedRequest extends SignedHead {
  body: Buffer;
}

export type Verdict = { ok: true } | { ok: false; reason: string };

/** A check under way: fed the body's bytes in order (each copied or hashed at once), then asked once. */
export interface BodyCheck {
  update(chunk: Uint8Array): void;
  finish(): Verdict;
}

export interface WebhookVerifier {
  readonly provider: WebhookProvider;
  /** The header whose presence says the request is meant for this verifier (for the refusal's reason). */
  readonly header: string;
  /** A verdict when the head alone decides (no signature header, a malformed one, a stale timestamp), else the body's check. */
  begin(head: SignedHead): Verdict | BodyCheck;
  /** `begin`, the whole body, `finish`. */
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

function isVerdict(check: Verdict | BodyCheck): check is Verdict {
  return 'ok' in check;
}

function verifier(provider: WebhookProvider, header: string, begin: (head: SignedHead) => Verdict | BodyCheck): WebhookVerifier {
  return {
    provider,
    header,
    begin,
    verify(request) {
      const check = begin(request);
      if (isVerdict(check)) return check;
      check.update(request.body);
      return check.finish();
    },
  };
}

/** An HMAC over `prefix` then the body; `judge` gets the digest. */
function hmacCheck(algorithm: 'sha256' | 'sha1', key: string | Buffer, prefix: string, judge: (digest: Buffer) => Verdict): BodyCheck {
  const mac: Hmac = createHmac(algorithm, key);
  if (prefix !== '') mac.update(prefix);
  return { update: (chunk) => void mac.update(chunk), finish: () => judge(mac.digest()) };
}

/** A SHA-256 of the body; `judge` gets the digest. */
function hashCheck(judge: (digest: Buffer) => Verdict): BodyCheck {
  const hash: Hash = createHash('sha256');
  return { update: (chunk) => void hash.update(chunk), finish: () => judge(hash.digest()) };
}

/**
 * The body itself, for the two checks that read inside it (Linear's timestamp, Twilio's form
 * parameters). The caller bounds the body (the signed-body limit); chunks are copied, as a caller's
 * chunk may be a view that does not outlive the call.
 */
function bufferedCheck(judge: (body: Buffer) => Verdict): BodyCheck {
  const chunks: Buffer[] = [];
  return { update: (chunk) => void chunks.push(Buffer.from(chunk)), finish: () => judge(Buffer.concat(chunks)) };
}

// ---- providers ------------------------------------------------------------------------------------------

/** GitHub: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(secret, body). */
function github(secret: string): WebhookVerifier {
  const header = 'x-hub-signature-256';
  return verifier('github', header, ({ fields }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('X-Hub-Signature-256');
    if (!value.startsWith('sha256=')) return refuse('X-Hub-Signature-256 does not start with "sha256="');
    return hmacCheck('sha256', secret, '', (digest) => (sameDigest(digest, value.slice(7), 'hex') ? ACCEPTED : mismatch('X-Hub-Signature-256')));
  });
}

/** GitLab: X-Gitlab-Token is the secret token itself (no signature over the body). */
function gitlab(secret: string): WebhookVerifier {
  const header = 'x-gitlab-token';
  return verifier('gitlab', header, ({ fields }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('X-Gitlab-Token');
    return sameText(secret, value) ? ACCEPTED : refuse('the X-Gitlab-Token does not match');
  });
}

/** Stripe: Stripe-Signature "t=TS,v1=HEX[,v1=...]", HMAC-SHA256(secret, "TS.body"), 300 s tolerance. */
function stripe(secret: string): WebhookVerifier {
  const header = 'stripe-signature';
  return verifier('stripe', header, ({ fields, now }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('Stripe-Signature');
    const { timestamp, signatures } = timestampedSignatures(value, ',', 't', 'v1');
    if (!/^[0-9]{1,12}$/.test(timestamp) || signatures.length === 0) return refuse('Stripe-Signature has no t= timestamp or no v1= signature');
    return hmacCheck('sha256', secret, `${timestamp}.`, (expected) => {
      if (!signatures.some((signature) => sameDigest(expected, signature, 'hex'))) return mismatch('Stripe-Signature');
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS.stripe);
      return stale === null ? ACCEPTED : refuse(stale);
    });
  });
}

/** Slack: X-Slack-Signature "v0=" + hex HMAC-SHA256(secret, "v0:TS:body"), X-Slack-Request-Timestamp, 300 s. */
function slack(secret: string): WebhookVerifier {
  const header = 'x-slack-signature';
  return verifier('slack', header, ({ fields, now }) => {
    const value = fieldValue(fields, header);
    const timestamp = fieldValue(fields, 'x-slack-request-timestamp');
    if (value === undefined) return missing('X-Slack-Signature');
    if (timestamp === undefined || !/^[0-9]{1,12}$/.test(timestamp)) return refuse('no valid X-Slack-Request-Timestamp header');
    if (!value.startsWith('v0=')) return refuse('X-Slack-Signature does not start with "v0="');
    return hmacCheck('sha256', secret, `v0:${timestamp}:`, (digest) => {
      if (!sameDigest(digest, value.slice(3), 'hex')) return mismatch('X-Slack-Signature');
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS.slack);
      return stale === null ? ACCEPTED : refuse(stale);
    });
  });
}

/** Shopify: X-Shopify-Hmac-Sha256 = base64 HMAC-SHA256(secret, body). */
function shopify(secret: string): WebhookVerifier {
  const header = 'x-shopify-hmac-sha256';
  return verifier('shopify', header, ({ fields }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('X-Shopify-Hmac-Sha256');
    return hmacCheck('sha256', secret, '', (digest) => (sameDigest(digest, value, 'base64') ? ACCEPTED : mismatch('X-Shopify-Hmac-Sha256')));
  });
}

/**
 * Twilio: X-Twilio-Signature = base64 HMAC-SHA1(auth token, URL + each POST form parameter's name and value,
 * sorted by name). A JSON body is instead covered by a `bodySHA256` query parameter (hex SHA-256 of the
 * body) inside the signed URL. The URL is the one Twilio called, so the edge reconstructs the public URL;
 * as Twilio's own library does, it also tries it with the scheme's default port added or removed.
 */
function twilio(secret: string): WebhookVerifier {
  const header = 'x-twilio-signature';
  return verifier('twilio', header, ({ fields, publicUrl, method }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('X-Twilio-Signature');
    let url: URL;
    try {
      url = new URL(publicUrl);
    } catch {
      return refuse('the public URL could not be reconstructed');
    }
    const signedWith = (signedParams: string): Verdict => {
      for (const candidate of urlVariants(url, publicUrl)) {
        if (sameDigest(hmac('sha1', secret, candidate, signedParams), value, 'base64')) return ACCEPTED;
      }
      return mismatch('X-Twilio-Signature');
    };
    const bodyHash = url.searchParams.get('bodySHA256');
    if (bodyHash !== null) {
      return hashCheck((digest) => (sameDigest(digest, bodyHash, 'hex') ? signedWith('') : refuse('the bodySHA256 query parameter does not match the body')));
    }
    if (method !== 'POST' || !/^application\/x-www-form-urlencoded/i.test(fieldValue(fields, 'content-type') ?? '')) return signedWith('');
    return bufferedCheck((body) => {
      const params = [...new URLSearchParams(body.toString('utf8'))].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return signedWith(params.map(([name, v]) => name + v).join(''));
    });
  });
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
  return verifier(provider, header, ({ fields, now }) => {
    const id = fieldValue(fields, `${prefix}id`);
    const timestamp = fieldValue(fields, `${prefix}timestamp`);
    const value = fieldValue(fields, header);
    if (value === undefined) return missing(`${prefix}signature`);
    if (id === undefined || timestamp === undefined || !/^[0-9]{1,12}$/.test(timestamp)) return refuse(`no ${prefix}id or no valid ${prefix}timestamp header`);
    const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS[provider]);
    if (stale !== null) return refuse(stale);
    return hmacCheck('sha256', key, `${id}.${timestamp}.`, (expected) => {
      for (const part of value.split(' ')) {
        const comma = part.indexOf(',');
        if (comma !== -1 && part.slice(0, comma) === 'v1' && sameDigest(expected, part.slice(comma + 1), 'base64')) return ACCEPTED;
      }
      return mismatch(`${prefix}signature`);
    });
  });
}

/** Paddle Billing: Paddle-Signature "ts=TS;h1=HEX", HMAC-SHA256(secret, "TS:body"), 5 s (Paddle's SDK). */
function paddle(secret: string): WebhookVerifier {
  const header = 'paddle-signature';
  return verifier('paddle', header, ({ fields, now }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('Paddle-Signature');
    const { timestamp, signatures } = timestampedSignatures(value, ';', 'ts', 'h1');
    if (!/^[0-9]{1,12}$/.test(timestamp) || signatures.length === 0) return refuse('Paddle-Signature has no ts= timestamp or no h1= signature');
    return hmacCheck('sha256', secret, `${timestamp}:`, (expected) => {
      if (!signatures.some((signature) => sameDigest(expected, signature, 'hex'))) return mismatch('Paddle-Signature');
      const stale = staleness(Number(timestamp), now, TOLERANCE_SECONDS.paddle);
      return stale === null ? ACCEPTED : refuse(stale);
    });
  });
}

/** Linear: Linear-Signature = hex HMAC-SHA256(secret, body); the body's `webhookTimestamp` (ms) within 60 s. */
function linear(secret: string): WebhookVerifier {
  const header = 'linear-signature';
  return verifier('linear', header, ({ fields, now }) => {
    const value = fieldValue(fields, header);
    if (value === undefined) return missing('Linear-Signature');
    return bufferedCheck((body) => {
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
    });
  });
}

/** Generic: HEADER holds HMAC-SHA256(secret, body), hex or base64, with or without a "sha256=" style prefix. */
function genericHmac(secret: string, headerName: string): WebhookVerifier {
  const header = headerName.toLowerCase();
  return verifier('hmac-sha256', header, ({ fields }) => {
    const raw = fieldValue(fields, header);
    if (raw === undefined) return missing(headerName);
    const value = raw.replace(/^[a-z0-9-]+=/i, '');
    return hmacCheck('sha256', secret, '', (expected) => (sameDigest(expected, value, 'hex') || sameDigest(expected, value, 'base64') ? ACCEPTED : mismatch(headerName)));
  });
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
 * A tunnel's verifiers (several for a rotation, or several providers on one URL) run over one request:
 * accepted when any accepts. `early` is the verdict when the head alone decides (every verifier refused
 * it, or one accepted it without a body), so a caller reads no body for it. The refusal names the reason
 * of a verifier whose header the request carries, else what is missing.
 */
export interface WebhookChecks extends BodyCheck {
  readonly early: Verdict | null;
}

export function beginWebhookChecks(verifiers: readonly WebhookVerifier[], head: SignedHead): WebhookChecks {
  // In the verifiers' order, so the reason named is the same whichever decided from the head alone.
  const started = verifiers.map((verifier) => verifier.begin(head));
  const combined = (verdicts: readonly Verdict[]): Verdict => {
    let reason: string | null = null;
    for (const [i, verdict] of verdicts.entries()) {
      if (verdict.ok) return verdict;
      if (reason === null || fieldValue(head.fields, verifiers[i]!.header) !== undefined) reason = `${verifiers[i]!.provider}: ${verdict.reason}`;
    }
    return refuse(reason ?? 'no webhook verifier is configured');
  };
  const running = started.filter((check): check is BodyCheck => !isVerdict(check));
  let early: Verdict | null = null;
  if (started.some((check) => isVerdict(check) && check.ok)) early = ACCEPTED;
  else if (running.length === 0) early = combined(started as Verdict[]);
  return {
    early,
    update(chunk) {
      if (early !== null) return;
      for (const check of running) check.update(chunk);
    },
    finish() {
      return early ?? combined(started.map((check) => (isVerdict(check) ? check : check.finish())));
    },
  };
}

/** The 401 SIGNATURE_INVALID message, the same from the public listener and the offline queue. */
export function signatureRefusal(reason: string): string {
  return `The webhook signature does not verify: ${reason}.`;
}

export function verifyWebhook(verifiers: readonly WebhookVerifier[], request: SignedRequest): Verdict {
  const checks = beginWebhookChecks(verifiers, request);
  checks.update(request.body);
  return checks.finish();
}
