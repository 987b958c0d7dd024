/**
 * The tunnel policy model (docs/policies.md): what a user asks for, how it is checked, and how it is
 * stored and shown. Three shapes of one policy:
 * - `PolicySpec`, the JSON a user sends (API `PUT .../policy`, the `burrow-policy` connect header, built
 *   from CLI flags): secrets in clear, validated here with INVALID_REQUEST messages that name the field.
 * - `StoredPolicy`, what a reservation holds: basic-auth passwords as scrypt hashes, webhook and OIDC
 *   client secrets sealed with the edge's secret key (src/store/secret-box.ts). Built in src/store.
 * - `PolicyView`, what the API shows: secrets write-only, shown as "set".
 * Pure: no I/O, no crypto; the CLI, the API and the edge share it.
 */
import { BurrowError } from '../errors.js';
import { parseCidr } from './cidr.js';
import { HOP_BY_HOP } from './headers.js';

// ---- limits ---------------------------------------------------------------------------------------------

export const POLICY_LIMITS = {
  basicAuthUsers: 16,
  userLength: 64,
  passwordLength: 256,
  cidrBlocks: 64,
  webhooks: 8,
  secretLength: 512,
  headerRules: 32,
  headerNameLength: 128,
  headerValueLength: 1024,
  emails: 64,
  domains: 32,
  urlLength: 512,
  clientIdLength: 256,
  rateRequests: 1_000_000,
  ratePeriodSeconds: 86_400,
  /** The `burrow-policy` connect header, base64url of the JSON: below uWS's 4 KiB for the whole head. */
  connectHeaderBytes: 3072,
} as const;

/** The connect request's header carrying a one-run policy (docs/protocol.md section 1). */
export const POLICY_HEADER = 'burrow-policy';
/** The header the edge sets to the signed-in e-mail address (OIDC), and strips from public requests. */
export const IDENTITY_HEADER = 'burrow-user-email';
/** The path prefix the edge answers itself on a tunnel with OIDC (callback, sign-out). */
export const OIDC_PATH_PREFIX = '/.burrow/oidc/';

/**
 * Webhook signature schemes Burrow verifies at the edge (docs/policies.md has the table of how each
 * signs). `hmac-sha256` is the generic one: a header holding the body's HMAC-SHA256, hex or base64.
 */
export const WEBHOOK_PROVIDERS = [
  'github',
  'gitlab',
  'stripe',
  'slack',
  'shopify',
  'twilio',
  'svix',
  'standard-webhooks',
  'paddle',
  'linear',
  'hmac-sha256',
] as const;
export type WebhookProvider = (typeof WEBHOOK_PROVIDERS)[number];

// ---- shapes ---------------------------------------------------------------------------------------------

export interface HeaderPair {
  name: string;
  value: string;
}

export interface PolicySpec {
  /** A password omitted keeps the stored hash of that user (PUT on a stored policy). */
  basic_auth?: { user: string; password?: string }[];
  basic_auth_forward?: boolean;
  allow_cidr?: string[];
  deny_cidr?: string[];
  /** client_secret omitted keeps the stored one. */
  oidc?: { issuer: string; client_id: string; client_secret?: string; allow_email?: string[]; allow_domain?: string[] } | null;
  /** A secret omitted keeps the stored entry with that `id`. `header` only for hmac-sha256. */
  verify_webhook?: { provider: WebhookProvider; secret?: string; header?: string; id?: string }[];
  request_header_add?: HeaderPair[];
  request_header_remove?: string[];
  response_header_add?: HeaderPair[];
  response_header_remove?: string[];
  rate_limit?: { requests: number; period_seconds: number } | null;
}

export interface StoredWebhook {
  id: string;
  provider: WebhookProvider;
  /** Sealed with the edge's secret key. */
  secret: string;
  header?: string;
}

export interface StoredPolicy {
  basicAuth?: { user: string; hash: string }[];
  basicAuthForward?: boolean;
  allowCidr?: string[];
  denyCidr?: string[];
  oidc?: { issuer: string; clientId: string; clientSecret: string; allowEmail: string[]; allowDomain: string[] };
  webhooks?: StoredWebhook[];
  requestHeaderAdd?: [string, string][];
  requestHeaderRemove?: string[];
  responseHeaderAdd?: [string, string][];
  responseHeaderRemove?: string[];
  rateLimit?: { requests: number; periodSeconds: number };
}

export interface PolicyView {
  basic_auth: { user: string; password: 'set' }[];
  basic_auth_forward: boolean;
  allow_cidr: string[];
  deny_cidr: string[];
  oidc: { issuer: string; client_id: string; client_secret: 'set'; allow_email: string[]; allow_domain: string[] } | null;
  verify_webhook: { id: string; provider: WebhookProvider; secret: 'set'; header?: string }[];
  request_header_add: HeaderPair[];
  request_header_remove: string[];
  response_header_add: HeaderPair[];
  response_header_remove: string[];
  rate_limit: { requests: number; period_seconds: number } | null;
}

// ---- validation -----------------------------------------------------------------------------------------

function invalid(message: string): never {
  throw new BurrowError('INVALID_REQUEST', message);
}

/** The policy's fields, in the API's order (burrow.yml's policy keys are the same names). */
export const POLICY_FIELDS = [
  'basic_auth',
  'basic_auth_forward',
  'allow_cidr',
  'deny_cidr',
  'oidc',
  'verify_webhook',
  'request_header_add',
  'request_header_remove',
  'response_header_add',
  'response_header_remove',
  'rate_limit',
] as const;

function onlyFields(value: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) invalid(`${where}: unknown field "${key.slice(0, 64)}"; known: ${allowed.join(', ')}.`);
  }
}

function object(value: unknown, where: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) invalid(`${where} must be a JSON object.`);
  return value as Record<string, unknown>;
}

function list(value: unknown, where: string, max: number): unknown[] {
  if (!Array.isArray(value)) invalid(`${where} must be an array.`);
  if (value.length > max) invalid(`${where} holds ${value.length} entries; at most ${max}.`);
  return value;
}

/** Printable text without control characters, 1..max characters. */
function text(value: unknown, where: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0) invalid(`${where} must be a non-empty string.`);
  if (value.length > max) invalid(`${where} is ${value.length} characters long; at most ${max}.`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) invalid(`${where} may not contain control characters.`);
  return value;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Names a header rule may not touch: framing, routing, and the edge's own identity header. */
const RESERVED_HEADERS = new Set(['host', 'content-length', IDENTITY_HEADER]);

export function headerNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > POLICY_LIMITS.headerNameLength) return `a header name is 1 to ${POLICY_LIMITS.headerNameLength} characters`;
  if (!TOKEN.test(name)) return `"${name}" is not a valid header name`;
  const lower = name.toLowerCase();
  if (HOP_BY_HOP.has(lower)) return `"${name}" is a hop-by-hop header: it describes one connection and never crosses the tunnel`;
  if (RESERVED_HEADERS.has(lower)) return `"${name}" is set by the edge itself (framing, routing or sign-in) and cannot be changed by a rule`;
  return null;
}

function headerName(value: unknown, where: string): string {
  if (typeof value !== 'string') invalid(`${where} must be a string.`);
  const problem = headerNameProblem(value);
  if (problem !== null) invalid(`${where}: ${problem}.`);
  return value;
}

function headerValue(value: unknown, where: string): string {
  if (typeof value !== 'string') invalid(`${where} must be a string.`);
  if (value.length > POLICY_LIMITS.headerValueLength) invalid(`${where} is ${value.length} characters long; at most ${POLICY_LIMITS.headerValueLength}.`);
  // Visible ASCII, space and tab inside: anything else could not be written as one header line.
  if (!/^(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?$/.test(value)) {
    invalid(`${where} must be visible ASCII characters (spaces and tabs inside), without line breaks.`);
  }
  return value;
}

function cidrList(value: unknown, where: string): string[] {
  return list(value, where, POLICY_LIMITS.cidrBlocks).map((entry, i) => {
    if (typeof entry !== 'string') invalid(`${where}[${i}] must be a string.`);
    const block = parseCidr(entry.trim());
    if (typeof block === 'string') invalid(`${where}[${i}]: ${block}.`);
    return block.text;
  });
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/** https:// anywhere; http:// only on a loopback host (a provider on the developer's machine, and tests). */
export function issuerProblem(issuer: string): string | null {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    return `"${issuer}" is not a URL`;
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') return `"${issuer}": an issuer has no user, query or fragment`;
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:' && isLoopbackHostname(url.hostname)) return null;
  return `"${issuer}": the issuer must be https:// (http:// only on 127.0.0.1, ::1 or localhost)`;
}

export function isLoopbackHostname(hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost') || hostname === '[::1]' || /^127\.[0-9]+\.[0-9]+\.[0-9]+$/.test(hostname);
}

/**
 * Checks and normalises a policy as a user sent it (lower-cased e-mails and domains, CIDR blocks with host
 * bits cleared, trimmed lists). Throws 400 INVALID_REQUEST naming the field.
 */
export function parsePolicySpec(input: unknown, where = 'policy'): PolicySpec {
  const body = object(input, where);
  onlyFields(body, POLICY_FIELDS, where);
  const spec: PolicySpec = {};
  if (body.basic_auth !== undefined) {
    const users = new Set<string>();
    spec.basic_auth = list(body.basic_auth, `${where}.basic_auth`, POLICY_LIMITS.basicAuthUsers).map((entry, i) => {
      const at = `${where}.basic_auth[${i}]`;
      const item = object(entry, at);
      onlyFields(item, ['user', 'password'], at);
      const user = text(item.user, `${at}.user`, POLICY_LIMITS.userLength);
      if (user.includes(':')) invalid(`${at}.user may not contain ":" (Basic credentials are USER:PASSWORD).`);
      if (users.has(user)) invalid(`${at}.user "${user}" is listed twice.`);
      users.add(user);
      return item.password === undefined ? { user } : { user, password: text(item.password, `${at}.password`, POLICY_LIMITS.passwordLength) };
    });
  }
  if (body.basic_auth_forward !== undefined) {
    if (typeof body.basic_auth_forward !== 'boolean') invalid(`${where}.basic_auth_forward must be true or false.`);
    spec.basic_auth_forward = body.basic_auth_forward;
  }
  if (body.allow_cidr !== undefined) spec.allow_cidr = cidrList(body.allow_cidr, `${where}.allow_cidr`);
  if (body.deny_cidr !== undefined) spec.deny_cidr = cidrList(body.deny_cidr, `${where}.deny_cidr`);
  if (body.oidc !== undefined && body.oidc !== null) {
    const at = `${where}.oidc`;
    const oidc = object(body.oidc, at);
    onlyFields(oidc, ['issuer', 'client_id', 'client_secret', 'allow_email', 'allow_domain'], at);
    const issuer = text(oidc.issuer, `${at}.issuer`, POLICY_LIMITS.urlLength);
    const problem = issuerProblem(issuer);
    if (problem !== null) invalid(`${at}.issuer: ${problem}.`);
    const allowEmail = oidc.allow_email === undefined ? [] : list(oidc.allow_email, `${at}.allow_email`, POLICY_LIMITS.emails).map((entry, i) => {
      const email = text(entry, `${at}.allow_email[${i}]`, 254).toLowerCase();
      if (!EMAIL.test(email)) invalid(`${at}.allow_email[${i}]: "${email}" is not an e-mail address.`);
      return email;
    });
    const allowDomain = oidc.allow_domain === undefined ? [] : list(oidc.allow_domain, `${at}.allow_domain`, POLICY_LIMITS.domains).map((entry, i) => {
      const domain = text(entry, `${at}.allow_domain[${i}]`, 253).toLowerCase().replace(/^@/, '');
      if (!DOMAIN.test(domain)) invalid(`${at}.allow_domain[${i}]: "${domain}" is not a domain name.`);
      return domain;
    });
    spec.oidc = {
      issuer: issuer.replace(/\/+$/, ''),
      client_id: text(oidc.client_id, `${at}.client_id`, POLICY_LIMITS.clientIdLength),
      ...(oidc.client_secret === undefined ? {} : { client_secret: text(oidc.client_secret, `${at}.client_secret`, POLICY_LIMITS.secretLength) }),
      allow_email: allowEmail,
      allow_domain: allowDomain,
    };
  } else if (body.oidc === null) spec.oidc = null;
  if (body.verify_webhook !== undefined) {
    spec.verify_webhook = list(body.verify_webhook, `${where}.verify_webhook`, POLICY_LIMITS.webhooks).map((entry, i) => {
      const at = `${where}.verify_webhook[${i}]`;
      const item = object(entry, at);
      onlyFields(item, ['provider', 'secret', 'header', 'id'], at);
      if (!(WEBHOOK_PROVIDERS as readonly unknown[]).includes(item.provider)) {
        invalid(`${at}.provider must be one of ${WEBHOOK_PROVIDERS.join(', ')}.`);
      }
      const provider = item.provider as WebhookProvider;
      const webhook: NonNullable<PolicySpec['verify_webhook']>[number] = { provider };
      if (item.secret !== undefined) webhook.secret = text(item.secret, `${at}.secret`, POLICY_LIMITS.secretLength);
      else if (item.id === undefined) invalid(`${at}: "secret" is required (or "id" of a stored entry to keep its secret).`);
      if (item.id !== undefined) {
        if (typeof item.id !== 'string' || !/^wh_[0-9a-f]{8}$/.test(item.id)) invalid(`${at}.id must be the id of a stored entry (wh_ and 8 hex digits).`);
        webhook.id = item.id;
      }
      if (provider === 'hmac-sha256') webhook.header = headerName(item.header, `${at}.header`);
      else if (item.header !== undefined) invalid(`${at}.header is only for the generic "hmac-sha256" provider.`);
      if (provider === 'svix' || provider === 'standard-webhooks') {
        if (webhook.secret !== undefined && !/^(whsec_)?[A-Za-z0-9+/]+={0,2}$/.test(webhook.secret)) {
          invalid(`${at}.secret: a ${provider} secret is base64, usually starting with "whsec_".`);
        }
      }
      return webhook;
    });
  }
  for (const direction of ['request', 'response'] as const) {
    const addKey = `${direction}_header_add` as const;
    const removeKey = `${direction}_header_remove` as const;
    if (body[addKey] !== undefined) {
      spec[addKey] = list(body[addKey], `${where}.${addKey}`, POLICY_LIMITS.headerRules).map((entry, i) => {
        const at = `${where}.${addKey}[${i}]`;
        const item = object(entry, at);
        onlyFields(item, ['name', 'value'], at);
        return { name: headerName(item.name, `${at}.name`), value: headerValue(item.value, `${at}.value`) };
      });
    }
    if (body[removeKey] !== undefined) {
      spec[removeKey] = list(body[removeKey], `${where}.${removeKey}`, POLICY_LIMITS.headerRules).map((entry, i) => headerName(entry, `${where}.${removeKey}[${i}]`));
    }
  }
  if (body.rate_limit !== undefined && body.rate_limit !== null) {
    const at = `${where}.rate_limit`;
    const rate = object(body.rate_limit, at);
    onlyFields(rate, ['requests', 'period_seconds'], at);
    const whole = (value: unknown, name: string, max: number): number => {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) invalid(`${at}.${name} must be a whole number from 1 to ${max}.`);
      return value;
    };
    spec.rate_limit = {
      requests: whole(rate.requests, 'requests', POLICY_LIMITS.rateRequests),
      period_seconds: whole(rate.period_seconds, 'period_seconds', POLICY_LIMITS.ratePeriodSeconds),
    };
  } else if (body.rate_limit === null) spec.rate_limit = null;
  return spec;
}

/** Whether a validated spec asks for nothing (an empty policy is stored as none). */
export function isEmptySpec(spec: PolicySpec): boolean {
  return POLICY_FIELDS.every((field) => {
    const value = spec[field];
    return value === undefined || value === null || value === false || (Array.isArray(value) && value.length === 0);
  });
}

// ---- views ----------------------------------------------------------------------------------------------

export const EMPTY_VIEW: Readonly<PolicyView> = Object.freeze({
  basic_auth: [],
  basic_auth_forward: false,
  allow_cidr: [],
  deny_cidr: [],
  oidc: null,
  verify_webhook: [],
  request_header_add: [],
  request_header_remove: [],
  response_header_add: [],
  response_header_remove: [],
  rate_limit: null,
});

const pairsView = (pairs: [string, string][] | undefined): HeaderPair[] => (pairs ?? []).map(([name, value]) => ({ name, value }));

/** What the API shows: every rule, and each secret only as "set". */
export function policyView(stored: StoredPolicy | undefined): PolicyView {
  if (stored === undefined) return { ...EMPTY_VIEW };
  return {
    basic_auth: (stored.basicAuth ?? []).map(({ user }) => ({ user, password: 'set' })),
    basic_auth_forward: stored.basicAuthForward === true,
    allow_cidr: stored.allowCidr ?? [],
    deny_cidr: stored.denyCidr ?? [],
    oidc:
      stored.oidc === undefined
        ? null
        : { issuer: stored.oidc.issuer, client_id: stored.oidc.clientId, client_secret: 'set', allow_email: stored.oidc.allowEmail, allow_domain: stored.oidc.allowDomain },
    verify_webhook: (stored.webhooks ?? []).map(({ id, provider, header }) => ({ id, provider, secret: 'set', ...(header === undefined ? {} : { header }) })),
    request_header_add: pairsView(stored.requestHeaderAdd),
    request_header_remove: stored.requestHeaderRemove ?? [],
    response_header_add: pairsView(stored.responseHeaderAdd),
    response_header_remove: stored.responseHeaderRemove ?? [],
    rate_limit: stored.rateLimit === undefined ? null : { requests: stored.rateLimit.requests, period_seconds: stored.rateLimit.periodSeconds },
  };
}

/** One line per rule kind, for `burrow reservations` and the dashboard's list ("" for no policy). */
export function policySummary(stored: StoredPolicy | undefined): string {
  if (stored === undefined) return '';
  const parts: string[] = [];
  if (stored.basicAuth?.length) parts.push(`basic-auth (${stored.basicAuth.length})`);
  if (stored.allowCidr?.length || stored.denyCidr?.length) parts.push('cidr');
  if (stored.oidc !== undefined) parts.push('oidc');
  if (stored.webhooks?.length) parts.push(`webhook: ${[...new Set(stored.webhooks.map((w) => w.provider))].join(', ')}`);
  if (stored.requestHeaderAdd?.length || stored.requestHeaderRemove?.length || stored.responseHeaderAdd?.length || stored.responseHeaderRemove?.length) parts.push('headers');
  if (stored.rateLimit !== undefined) parts.push(`rate ${stored.rateLimit.requests}/${stored.rateLimit.periodSeconds}s`);
  return parts.join('; ');
}

// ---- the connect header ---------------------------------------------------------------------------------

/** A one-run policy for the connect request: base64url of its JSON (header values are ASCII). */
export function encodePolicyHeader(spec: PolicySpec): string {
  const encoded = Buffer.from(JSON.stringify(spec), 'utf8').toString('base64url');
  if (encoded.length > POLICY_LIMITS.connectHeaderBytes) {
    invalid(`the policy is ${encoded.length} bytes encoded; a one-run policy may be at most ${POLICY_LIMITS.connectHeaderBytes}. Reserve the name and store the policy on it (burrow reserve NAME ...).`);
  }
  return encoded;
}

export function decodePolicyHeader(value: string): PolicySpec {
  if (value.length > POLICY_LIMITS.connectHeaderBytes) invalid(`The ${POLICY_HEADER} header is longer than ${POLICY_LIMITS.connectHeaderBytes} bytes.`);
  if (!/^[A-Za-z0-9_-]*$/.test(value)) invalid(`The ${POLICY_HEADER} header must be base64url.`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    invalid(`The ${POLICY_HEADER} header is not base64url of a JSON object.`);
  }
  const spec = parsePolicySpec(parsed, POLICY_HEADER);
  for (const user of spec.basic_auth ?? []) if (user.password === undefined) invalid(`${POLICY_HEADER}: basic_auth user "${user.user}" needs a password.`);
  if (spec.oidc && spec.oidc.client_secret === undefined) invalid(`${POLICY_HEADER}: oidc.client_secret is required.`);
  for (const hook of spec.verify_webhook ?? []) if (hook.secret === undefined) invalid(`${POLICY_HEADER}: every verify_webhook entry needs its secret.`);
  return spec;
}

// ---- flags ----------------------------------------------------------------------------------------------

/** The policy flags of `burrow http` and `burrow reserve` (DESIGN.md 5b), as node:util parseArgs options. */
export const POLICY_FLAG_OPTIONS = {
  'basic-auth': { type: 'string', multiple: true },
  'basic-auth-forward': { type: 'boolean' },
  'allow-cidr': { type: 'string', multiple: true },
  'deny-cidr': { type: 'string', multiple: true },
  oidc: { type: 'string' },
  'oidc-client-id': { type: 'string' },
  'oidc-client-secret': { type: 'string' },
  'oidc-allow-email': { type: 'string', multiple: true },
  'oidc-allow-domain': { type: 'string', multiple: true },
  'verify-webhook': { type: 'string', multiple: true },
  'request-header-add': { type: 'string', multiple: true },
  'request-header-remove': { type: 'string', multiple: true },
  'response-header-add': { type: 'string', multiple: true },
  'response-header-remove': { type: 'string', multiple: true },
  'rate-limit': { type: 'string' },
} as const;

export type PolicyFlagValues = {
  [K in keyof typeof POLICY_FLAG_OPTIONS]?: (typeof POLICY_FLAG_OPTIONS)[K] extends { multiple: true } ? string[] : (typeof POLICY_FLAG_OPTIONS)[K]['type'] extends 'boolean' ? boolean : string;
};

/** The policy flags and what each does, for both commands' --help. */
const POLICY_FLAG_LINES: readonly (readonly [flag: string, description: string])[] = [
  ['--basic-auth USER:PASS', 'require HTTP Basic credentials (repeatable: several users)'],
  ['--basic-auth-forward', 'pass the Authorization header on to the local server (removed otherwise)'],
  ['--allow-cidr CIDR', 'only these client addresses (repeatable; IPv4 and IPv6)'],
  ['--deny-cidr CIDR', 'refuse these client addresses (repeatable; wins over --allow-cidr)'],
  ['--oidc ISSUER', 'require an OpenID Connect sign-in (with --oidc-client-id and --oidc-client-secret; the callback is /.burrow/oidc/callback)'],
  ['--oidc-client-id ID', "the client's id at the issuer"],
  ['--oidc-client-secret SECRET', "the client's secret (stored encrypted)"],
  ['--oidc-allow-email E', 'only these signed-in addresses (repeatable)'],
  ['--oidc-allow-domain D', 'only addresses at these domains (repeatable)'],
  [
    '--verify-webhook PROVIDER:SECRET',
    `refuse webhooks without a valid signature (repeatable, e.g. to rotate); ${WEBHOOK_PROVIDERS.filter((p) => p !== 'hmac-sha256').join(', ')}, or hmac-sha256:HEADER:SECRET`,
  ],
  ["--request-header-add 'N: V'", 'set a header on requests to the local server (repeatable)'],
  ['--request-header-remove N', 'remove a request header (repeatable)'],
  ["--response-header-add 'N: V'", 'set a header on responses to the public client (repeatable)'],
  ['--response-header-remove N', 'remove a response header (repeatable)'],
  ['--rate-limit N/PERIOD', 'at most N requests per client address per PERIOD (s, m, h, d, or 10s, 5m)'],
];

/**
 * The policy flags' help, shared by both commands, with descriptions starting at `column` (the
 * command's own option column: one column per --help). A flag too long for it stands on its own line.
 */
export function policyFlagsHelp(column: number, width = 100): string {
  const lines = ['Policy (docs/policies.md; enforced by the edge before anything else sees the request):'];
  for (const [flag, description] of POLICY_FLAG_LINES) {
    let line = `  ${flag}`;
    if (line.length + 2 > column) {
      lines.push(line);
      line = '';
    }
    line = line.padEnd(column);
    for (const word of description.split(' ')) {
      if (line.length > column && line.length + 1 + word.length > width) {
        lines.push(line);
        line = ' '.repeat(column);
      }
      line += line.length > column ? ` ${word}` : word;
    }
    lines.push(line);
  }
  return lines.join('\n');
}

const PERIOD_UNITS: Record<string, number> = {
  s: 1, sec: 1, secs: 1, second: 1, seconds: 1,
  m: 60, min: 60, mins: 60, minute: 60, minutes: 60,
  h: 3600, hour: 3600, hours: 3600,
  d: 86_400, day: 86_400, days: 86_400,
};

/** "100/m", "10/1s", "1000/hour", "5/10m" → requests and period. Returns the reason when it is not one. */
export function parseRateLimit(textValue: string): { requests: number; period_seconds: number } | string {
  const match = /^([0-9]{1,7})\/([0-9]{0,5})([a-z]+)$/.exec(textValue.trim().toLowerCase());
  const seconds = match === null || !Object.hasOwn(PERIOD_UNITS, match[3]!) ? undefined : PERIOD_UNITS[match[3]!];
  if (match === null || seconds === undefined) return `"${textValue}" is not N/PERIOD (e.g. 100/m, 10/1s, 1000/hour)`;
  const requests = Number(match[1]);
  const period = (match[2] === '' ? 1 : Number(match[2])) * seconds;
  if (requests < 1 || requests > POLICY_LIMITS.rateRequests) return `"${textValue}": N must be 1 to ${POLICY_LIMITS.rateRequests}`;
  if (period < 1 || period > POLICY_LIMITS.ratePeriodSeconds) return `"${textValue}": the period must be 1 second to 1 day`;
  return { requests, period_seconds: period };
}

function headerFlag(value: string, flag: string): HeaderPair {
  const colon = value.indexOf(':');
  if (colon <= 0) throw new Error(`--${flag} "${value}" is not 'NAME: VALUE'`);
  return { name: value.slice(0, colon).trim(), value: value.slice(colon + 1).trim() };
}

/**
 * Builds a spec from CLI flags; undefined when no policy flag was given. Flag syntax errors throw an
 * Error with a one-line reason; the spec is then checked by `parsePolicySpec` (INVALID_REQUEST).
 */
export function policySpecFromFlags(values: PolicyFlagValues): PolicySpec | undefined {
  const spec: Record<string, unknown> = {};
  if (values['basic-auth'] !== undefined) {
    spec.basic_auth = values['basic-auth'].map((pair) => {
      const colon = pair.indexOf(':');
      if (colon <= 0 || colon === pair.length - 1) throw new Error(`--basic-auth "${pair.includes(':') ? `${pair.slice(0, colon)}:…` : pair}" is not USER:PASSWORD`);
      return { user: pair.slice(0, colon), password: pair.slice(colon + 1) };
    });
  }
  if (values['basic-auth-forward'] === true) spec.basic_auth_forward = true;
  if (values['allow-cidr'] !== undefined) spec.allow_cidr = values['allow-cidr'].flatMap((v) => v.split(','));
  if (values['deny-cidr'] !== undefined) spec.deny_cidr = values['deny-cidr'].flatMap((v) => v.split(','));
  const oidcFlags = values.oidc ?? values['oidc-client-id'] ?? values['oidc-client-secret'] ?? values['oidc-allow-email'] ?? values['oidc-allow-domain'];
  if (oidcFlags !== undefined) {
    if (values.oidc === undefined || values['oidc-client-id'] === undefined || values['oidc-client-secret'] === undefined) {
      throw new Error('--oidc needs all of --oidc ISSUER, --oidc-client-id ID and --oidc-client-secret SECRET');
    }
    spec.oidc = {
      issuer: values.oidc,
      client_id: values['oidc-client-id'],
      client_secret: values['oidc-client-secret'],
      allow_email: values['oidc-allow-email'] ?? [],
      allow_domain: values['oidc-allow-domain'] ?? [],
    };
  }
  if (values['verify-webhook'] !== undefined) {
    spec.verify_webhook = values['verify-webhook'].map((entry) => {
      const colon = entry.indexOf(':');
      if (colon <= 0) throw new Error(`--verify-webhook "${entry.slice(0, 32)}" is not PROVIDER:SECRET`);
      const provider = entry.slice(0, colon).toLowerCase();
      const rest = entry.slice(colon + 1);
      if (provider !== 'hmac-sha256') return { provider, secret: rest };
      const second = rest.indexOf(':');
      if (second <= 0) throw new Error('--verify-webhook hmac-sha256 needs hmac-sha256:HEADER:SECRET');
      return { provider, header: rest.slice(0, second), secret: rest.slice(second + 1) };
    });
  }
  if (values['request-header-add'] !== undefined) spec.request_header_add = values['request-header-add'].map((v) => headerFlag(v, 'request-header-add'));
  if (values['request-header-remove'] !== undefined) spec.request_header_remove = values['request-header-remove'];
  if (values['response-header-add'] !== undefined) spec.response_header_add = values['response-header-add'].map((v) => headerFlag(v, 'response-header-add'));
  if (values['response-header-remove'] !== undefined) spec.response_header_remove = values['response-header-remove'];
  if (values['rate-limit'] !== undefined) {
    const rate = parseRateLimit(values['rate-limit']);
    if (typeof rate === 'string') throw new Error(`--rate-limit ${rate}`);
    spec.rate_limit = rate;
  }
  if (Object.keys(spec).length === 0) return undefined;
  try {
    return parsePolicySpec(spec, 'flags');
  } catch (error) {
    throw new Error(flagMessage((error as Error).message));
  }
}

/** "flags.basic_auth[0].user ..." → "--basic-auth #1 user ...": name the flag the user typed. */
function flagMessage(message: string): string {
  return message.replace(/^flags\.([a-z_]+)(?:\[([0-9]+)\])?(\.?)/, (_all, field: string, index: string | undefined, dot: string) => {
    const flag = field === 'oidc' ? '--oidc' : field === 'verify_webhook' ? '--verify-webhook' : `--${field.replace(/_/g, '-')}`;
    // "flags.allow_cidr[0]: ..." → "--allow-cidr #1: ..."; "flags.basic_auth[0].user ..." → "--basic-auth #1 user ...".
    const named = index === undefined ? flag : `${flag} #${Number(index) + 1}`;
    return dot === '.' ? `${named} ` : named;
  });
}
