/**
 * A tunnel's policy, compiled once per policy version, and the one call the public listener makes per
 * request: `decide(request)`. It runs before anything else touches the request: before a capture body is
 * kept, before the offline queue, before the hop to another edge (docs/policies.md, "Order").
 *
 * The listener's contract:
 * - `allow`: forward with `fields` (the request's header list, edited; the same array when the policy
 *   edits nothing). Response heads go through `responseFields` on their way out.
 * - `refuse`: answer `status` with `fields` and `body` (JSON, the spec's error shape; `code` goes into the
 *   `burrow-error` header the listener adds as for its own errors). When `capture` is set, keep the
 *   request as a capture with that mark ("rejected: signature"); otherwise keep nothing.
 * - `need-body`: read the body up to `maxBytes` (over it: answer `tooLarge()`), then call `verify(body)`,
 *   which answers allow or refuse. Nothing is forwarded, queued or hopped before that. When the head
 *   alone decides (no signature header: a `refuse` marked for capture at once; GitLab's token: `allow`)
 *   no body is asked for.
 * - `respond`: the edge answers itself (an OIDC sign-in redirect or the callback); await `response`.
 * `decide` returns a Promise only when it must wait (a basic-auth check not yet cached); the common case
 * is synchronous. Captures take their header list from `captureFields`, which redacts credentials.
 */
import { defaultErrorJson, ERROR_CODES, type ErrorCode } from '../../errors.js';
import { IDENTITY_HEADER, type StoredPolicy } from '../../protocol/policy.js';
import { FixedWindowLimiter } from '../../store/rate-limit.js';
import type { SecretBox } from '../../store/secret-box.js';
import { AddressRule } from './address-rule.js';
import { BasicAuthGate } from './basic-auth.js';
import { HeaderRules } from './header-rules.js';
import { OidcGate, withoutOwnCookies, type PolicyHttpRequest, type PolicyResponse } from './oidc.js';
import { beginWebhookChecks, fieldValue, signatureRefusal, verifyWebhook, webhookVerifier, type WebhookVerifier } from './webhooks.js';

export interface PolicyRequest extends PolicyHttpRequest {
  /** The client address the edge computed (src/edge/client-address.ts: --trust-proxy and PROXY v2 aware). */
  clientAddress: string;
}

export type PolicyDecision =
  | { kind: 'allow'; fields: readonly string[] }
  | { kind: 'refuse'; status: number; code: ErrorCode; reason: string; fields: string[]; body: string; capture: 'rejected: signature' | null }
  /**
   * `fields`: what `allow` will forward once the body verifies (the request's header list, edited). A
   * caller that verifies the body another way (the offline queue, streaming) forwards these.
   */
  | { kind: 'need-body'; maxBytes: number; fields: readonly string[]; verify(body: Buffer, now?: number): PolicyDecision }
  | { kind: 'respond'; response: Promise<PolicyResponse> };

/**
 * What the public listener holds per tunnel: a compiled policy, or one that could not be compiled on
 * this edge (every request refused). The listener's one check when a tunnel has no policy is `null`.
 */
export interface TunnelPolicy {
  decide(request: PolicyRequest): PolicyDecision | Promise<PolicyDecision>;
  /** The refusal of a body over `need-body`'s `maxBytes`. */
  tooLarge(): PolicyDecision;
  responseFields(fields: readonly string[]): readonly string[];
  captureFields(fields: readonly string[]): readonly string[];
  /**
   * Forwarded request heads carry a credential a capture must not keep in clear (`Authorization` with
   * --basic-auth-forward): captures then keep `captureFields` of the head instead of the frame sent.
   */
  readonly redactsForwarded: boolean;
  sweep(): void;
}

export interface CompileOptions {
  /** The realm of `WWW-Authenticate: Basic` (the tunnel's subdomain). */
  realm: string;
  /** Largest body read for webhook verification; larger is 413. */
  maxSignedBody?: number;
  /** Failed basic-auth attempts per client address per minute before 429 (each costs a scrypt). */
  basicAuthFailures?: number;
  oidcSessionMs?: number;
  clock?: () => number;
}

export const DEFAULT_MAX_SIGNED_BODY = 1024 * 1024;
const JSON_TYPE = 'application/json; charset=utf-8';

function refusal(code: ErrorCode, reason: string, extra: string[] = [], capture: 'rejected: signature' | null = null): PolicyDecision & { kind: 'refuse' } {
  const body = reason === ERROR_CODES[code].message ? defaultErrorJson(code) : JSON.stringify({ error: { code, message: reason } });
  return { kind: 'refuse', status: ERROR_CODES[code].status, code, reason, fields: ['content-type', JSON_TYPE, ...extra], body, capture };
}

/** The compiled policy could not be built (a secret that does not open): every request is refused. */
export class UnavailablePolicy implements TunnelPolicy {
  readonly decision: PolicyDecision;
  readonly redactsForwarded = false;
  constructor(reason: string) {
    this.decision = refusal('POLICY_UNAVAILABLE', `The tunnel's policy cannot be read on this edge: ${reason}`, ['retry-after', '30']);
  }

  decide(): PolicyDecision {
    return this.decision;
  }

  tooLarge(): PolicyDecision {
    return this.decision;
  }

  responseFields(fields: readonly string[]): readonly string[] {
    return fields;
  }

  captureFields(fields: readonly string[]): readonly string[] {
    return fields;
  }

  sweep(): void {}
}

export class CompiledPolicy implements TunnelPolicy {
  private readonly addresses: AddressRule;
  private readonly basicAuth: BasicAuthGate | null;
  private readonly forwardAuthorization: boolean;
  private readonly wwwAuthenticate: string;
  private readonly oidc: OidcGate | null;
  private readonly webhooks: WebhookVerifier[];
  private readonly requestRules: HeaderRules;
  private readonly responseRules: HeaderRules;
  private readonly rate: FixedWindowLimiter | null;
  private readonly authFailures: FixedWindowLimiter;
  /** Names removed from every forwarded request besides the rules': credentials and the identity header. */
  private readonly alwaysDrop: Set<string>;
  private readonly maxSignedBody: number;
  private readonly clock: () => number;

  constructor(stored: StoredPolicy, box: SecretBox, options: CompileOptions) {
    this.clock = options.clock ?? Date.now;
    this.addresses = new AddressRule(stored.allowCidr, stored.denyCidr);
    this.basicAuth = stored.basicAuth?.length ? new BasicAuthGate(stored.basicAuth, this.clock) : null;
    this.forwardAuthorization = stored.basicAuthForward === true;
    this.wwwAuthenticate = `Basic realm="${options.realm.replace(/["\\]/g, '')}", charset="UTF-8"`;
    const open = (sealed: string): string => {
      const plain = box.open(sealed);
      if (plain === null) throw new Error(`a secret was sealed with a key that ${box.path} does not hold`);
      return plain;
    };
    this.oidc =
      stored.oidc === undefined
        ? null
        : new OidcGate(
            { ...stored.oidc, clientSecret: open(stored.oidc.clientSecret) },
            box,
            { clock: this.clock, ...(options.oidcSessionMs === undefined ? {} : { sessionMs: options.oidcSessionMs }) },
          );
    this.webhooks = (stored.webhooks ?? []).map((hook) => webhookVerifier(hook.provider, open(hook.secret), hook.header));
    this.requestRules = new HeaderRules(stored.requestHeaderAdd ?? [], stored.requestHeaderRemove ?? []);
    this.responseRules = new HeaderRules(stored.responseHeaderAdd ?? [], stored.responseHeaderRemove ?? []);
    this.rate = stored.rateLimit === undefined ? null : new FixedWindowLimiter(stored.rateLimit.requests, stored.rateLimit.periodSeconds * 1000, this.clock);
    this.authFailures = new FixedWindowLimiter(options.basicAuthFailures ?? 20, 60_000, this.clock);
    this.alwaysDrop = new Set([IDENTITY_HEADER]);
    if (this.basicAuth !== null && !this.forwardAuthorization) this.alwaysDrop.add('authorization');
    this.maxSignedBody = options.maxSignedBody ?? DEFAULT_MAX_SIGNED_BODY;
  }

  /** Compiles, or answers why it cannot (the listener then refuses with 503 POLICY_UNAVAILABLE). */
  static compile(stored: StoredPolicy, box: SecretBox, options: CompileOptions): TunnelPolicy & (CompiledPolicy | UnavailablePolicy) {
    try {
      return new CompiledPolicy(stored, box, options);
    } catch (error) {
      return new UnavailablePolicy((error as Error).message);
    }
  }

  get verifiesWebhooks(): boolean {
    return this.webhooks.length > 0;
  }

  get redactsForwarded(): boolean {
    return this.basicAuth !== null && this.forwardAuthorization;
  }

  decide(request: PolicyRequest): PolicyDecision | Promise<PolicyDecision> {
    if (this.oidc !== null && OidcGate.owns(request.target)) return { kind: 'respond', response: this.oidc.handle(request) };
    if (this.addresses.active && !this.addresses.allows(request.clientAddress)) {
      return refusal('ADDRESS_FORBIDDEN', `Requests from ${request.clientAddress} are not allowed on this tunnel.`);
    }
    if (this.rate !== null) {
      const rate = this.rate.hit(request.clientAddress);
      if (!rate.allowed) {
        return refusal('RATE_LIMITED', `At most ${rate.limit} requests per ${this.rate.windowMs / 1000} s from one address on this tunnel. Retry after ${rate.resetSeconds} s.`, [
          'retry-after', String(rate.resetSeconds),
          'ratelimit-limit', String(rate.limit),
          'ratelimit-remaining', String(rate.remaining),
          'ratelimit-reset', String(rate.resetSeconds),
        ]);
      }
    }
    if (this.basicAuth !== null) {
      const outcome = this.basicAuth.check(fieldValue(request.fields, 'authorization'));
      if (outcome instanceof Promise) return outcome.then((settled) => this.afterBasicAuth(settled, request));
      return this.afterBasicAuth(outcome, request);
    }
    return this.afterBasicAuth('ok', request);
  }

  private afterBasicAuth(outcome: 'ok' | 'missing' | 'wrong', request: PolicyRequest): PolicyDecision {
    if (outcome !== 'ok') {
      if (outcome === 'wrong' && !this.authFailures.hit(request.clientAddress).allowed) {
        const reset = this.authFailures.peek(request.clientAddress).resetSeconds;
        return refusal('RATE_LIMITED', `Too many wrong passwords from ${request.clientAddress}. Retry after ${reset} s.`, ['retry-after', String(reset)]);
      }
      return refusal('AUTHENTICATION_REQUIRED', outcome === 'missing' ? ERROR_CODES.AUTHENTICATION_REQUIRED.message : 'The user name or password is wrong.', [
        'www-authenticate', this.wwwAuthenticate,
      ]);
    }
    let identity: string[] | undefined;
    if (this.oidc !== null) {
      const email = this.oidc.signedIn(request);
      if (email === null) {
        if (isNavigation(request)) return { kind: 'respond', response: this.oidc.start(request) };
        return refusal('SIGN_IN_REQUIRED', ERROR_CODES.SIGN_IN_REQUIRED.message);
      }
      identity = OidcGate.identityFields(email);
    }
    if (this.webhooks.length > 0) {
      const publicUrl = `${request.scheme}://${request.host}${request.target}`;
      // The head alone may decide (no signature header: refused; GitLab's token: accepted), and then no
      // body is read for it.
      const early = beginWebhookChecks(this.webhooks, { method: request.method, target: request.target, fields: request.fields, publicUrl, now: this.clock() }).early;
      if (early !== null) return early.ok ? this.allow(request, identity) : signatureRejected(early.reason);
      const allowed = this.allow(request, identity);
      return {
        kind: 'need-body',
        maxBytes: this.maxSignedBody,
        fields: allowed.fields,
        verify: (body, now = this.clock()) => {
          const verdict = verifyWebhook(this.webhooks, { method: request.method, target: request.target, fields: request.fields, body, publicUrl, now });
          return verdict.ok ? allowed : signatureRejected(verdict.reason);
        },
      };
    }
    return this.allow(request, identity);
  }

  private allow(request: PolicyRequest, identity: string[] | undefined): PolicyDecision & { kind: 'allow' } {
    let fields = this.requestRules.apply(request.fields, this.alwaysDrop, identity);
    if (this.oidc !== null) fields = stripOwnCookies(fields);
    return { kind: 'allow', fields };
  }

  /** A body over `maxBytes` while a signature is to be verified. */
  tooLarge(): PolicyDecision {
    return refusal('PAYLOAD_TOO_LARGE', `A signed webhook body may be at most ${this.maxSignedBody} bytes on this tunnel.`);
  }

  /** The local server's response head as the public client gets it. */
  responseFields(fields: readonly string[]): readonly string[] {
    return this.responseRules.empty ? fields : this.responseRules.apply(fields);
  }

  /** The request header list a capture keeps: Basic credentials and the edge's cookies redacted. */
  captureFields(fields: readonly string[]): readonly string[] {
    if (this.basicAuth === null && this.oidc === null) return fields;
    const out = fields.slice();
    for (let i = 0; i < out.length; i += 2) {
      const lower = out[i]!.toLowerCase();
      if (lower === 'authorization' && this.basicAuth !== null) out[i + 1] = redactAuthorization(out[i + 1]!);
      else if (lower === 'cookie' && this.oidc !== null) out[i + 1] = out[i + 1]!.replace(/(burrow_oidc(?:_flow)?=)[^;]*/g, '$1[redacted]');
    }
    return out;
  }

  /** Drops finished rate-limit windows and bounds the verdict cache (the edge's coarse timer). */
  sweep(): void {
    this.rate?.sweep();
    this.authFailures.sweep();
  }
}

function signatureRejected(reason: string): PolicyDecision {
  return refusal('SIGNATURE_INVALID', signatureRefusal(reason), [], 'rejected: signature');
}

/** "Basic dXNlcjpwYXNz" → "Basic [redacted]": the scheme stays visible, the credentials never stored. */
export function redactAuthorization(value: string): string {
  const space = value.indexOf(' ');
  return space === -1 ? '[redacted]' : `${value.slice(0, space)} [redacted]`;
}

function isNavigation(request: PolicyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const accept = fieldValue(request.fields, 'accept') ?? '';
  return accept.includes('text/html');
}

function stripOwnCookies(fields: string[]): string[] {
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i]!.toLowerCase() !== 'cookie') continue;
    const kept = withoutOwnCookies(fields[i + 1]!);
    if (kept === undefined) {
      fields.splice(i, 2);
      i -= 2;
    } else fields[i + 1] = kept;
  }
  return fields;
}
