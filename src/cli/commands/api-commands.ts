/**
 * The thin wrappers over the API: login, tokens, tunnels, requests. Tables by default, the API's JSON
 * with --json.
 */
import { POLICY_FLAG_OPTIONS, policyFlagsHelp, policySpecFromFlags, type PolicySpec, type PolicyView } from '../../protocol/policy.js';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseToken, tokenIdOf } from '../../ids.js';
import { apiClientFor, CONNECTION_HELP, CONNECTION_OPTIONS, edgeApiClient, type ApiClient, type ConnectionFlags } from '../api-client.js';
import { CliError, noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import { configPath, readConfig, resolveCredentials, requireToken, writeConfig, type ClientConfig } from '../config.js';
import { escapeControls } from '../../control-chars.js';
import { printJson, printTable, shortTime } from '../output.js';

function client(values: ConnectionFlags): ApiClient {
  return edgeApiClient(values);
}

// ---- login ----------------------------------------------------------------------------------------

const LOGIN_HELP = `
Usage: burrow login TOKEN [--edge URL ...] [--json] [--ca FILE] [--resolve HOST:PORT:ADDRESS ...] [--insecure]

Checks the token against the edge and saves both to the client config (mode 0600), so later commands
need neither. The CA it trusted (--ca, else BURROW_CA, else the one saved before for the same edge) is
saved too, as an absolute path: later commands use it when they get no --ca and no BURROW_CA. Logging
in to another edge without --ca or BURROW_CA forgets it, and so does logging in once its file is gone.

Options:
  --edge URL       the edge (default: BURROW_EDGE, the config file, http://localhost:8080);
                   repeated, every edge is saved in that order (failover order for later commands)
  --json           print {"edge","account":{id,email,plan},"config","ca"}
  --ca FILE        trust this CA (PEM) to check an https:// edge with a private certificate,
                   beside the public roots (NODE_EXTRA_CA_CERTS works too)
  --resolve HOST:PORT:ADDRESS
                   connect to ADDRESS for the edge URL's HOST and PORT, without DNS (like curl
                   --resolve; repeatable; default: BURROW_RESOLVE); not saved: give it (or
                   BURROW_RESOLVE) to later commands too
  --insecure       allow sending the token over plain http:// to an edge not on this machine
  -h, --help       show this help
`;

export async function loginCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    { edge: { type: 'string', multiple: true }, json: { type: 'boolean' }, ca: { type: 'string' }, resolve: { type: 'string', multiple: true }, insecure: { type: 'boolean' } },
    LOGIN_HELP,
  );
  if (parsed === null) return 0;
  const token = requirePositional(parsed, 0, 'TOKEN', LOGIN_HELP);
  noExtraPositionals(parsed, 1, LOGIN_HELP);
  if (parseToken(token) === null) throw new UsageError('that is not a Burrow token (svc_pat_<8 hex>_<36 hex>)');
  const path = configPath();
  const saved = readConfig(path);
  // Edge and CA as every other command finds them: the flag, then BURROW_EDGE / BURROW_CA, then the config
  // file; but a CA saved for another edge is not carried over to this one. Not burrow.yml's edge: a file
  // in a directory someone else wrote must not decide where a token typed here is sent and saved for.
  const credentials = resolveCredentials({ edge: parsed.values.edge, token, ca: parsed.values.ca, resolve: parsed.values.resolve }, process.env, null);
  if (credentials.ca?.from === path && saved.edge !== credentials.edge) credentials.ca = undefined;
  // Logging in again is the way out of a saved CA file that is gone (the edge may have a public certificate now).
  if (credentials.ca?.from === path && !existsSync(credentials.ca.path)) {
    process.stderr.write(`burrow: warning: the CA ${credentials.ca.path} saved in ${path} is gone; logging in without it\n`);
    credentials.ca = undefined;
  }
  const api = apiClientFor(credentials, parsed.values.insecure === true);
  const me = await api.call<{ id: string; email: string; plan: string }>('GET', '/api/v1/auth/me');
  // Absolute, so a later command run from another directory finds the same file; none trusted, none kept.
  const ca = api.ca === undefined ? undefined : resolve(api.ca.path);
  // `edge` stays the first edge, so a config file written here still works for an older burrow.
  const config: ClientConfig = { ...saved, edge: credentials.edge, edges: credentials.edges, token };
  if (ca !== undefined) config.ca = ca;
  else delete config.ca;
  if (credentials.edges.length === 1) delete config.edges;
  writeConfig(config, path);
  if (parsed.values.json === true) printJson({ edge: api.edge, account: { id: me.id, email: me.email, plan: me.plan }, config: path, ca: ca ?? null });
  else process.stdout.write(`logged in to ${api.edge} as ${me.email} (${me.plan}); saved to ${path}${ca === undefined ? '' : ` with the CA ${ca}`}\n`);
  return 0;
}

// ---- tokens ---------------------------------------------------------------------------------------

const TOKENS_HELP = `
Usage: burrow tokens list | create --label LABEL | revoke TOKEN_ID [--force]

Lists, creates and revokes personal access tokens. A new token's secret is printed once.
Revoking a token closes the tunnels it opened. Revoking the token this command itself uses is
refused without --force: afterwards every command gets 401 (the operator's way back in is
"burrow admin token create --email E").

Options:
  --label L        label of a new token (1 to 64 characters)
  --force          revoke even the token this command uses
${CONNECTION_HELP}
`;

interface TokenJson {
  id: string;
  label: string;
  prefix: string;
  token?: string;
  created_at: string;
  last_used_at?: string | null;
}

export async function tokensCommand(args: string[]): Promise<number> {
  const parsed = parse(args, { ...CONNECTION_OPTIONS, label: { type: 'string' }, force: { type: 'boolean' } }, TOKENS_HELP);
  if (parsed === null) return 0;
  const action = requirePositional(parsed, 0, 'list, create or revoke', TOKENS_HELP);
  const { values } = parsed;
  switch (action) {
    case 'list': {
      noExtraPositionals(parsed, 1, TOKENS_HELP);
      const result = await client(values).call<{ tokens: TokenJson[] }>('GET', '/api/v1/tokens');
      if (values.json === true) printJson(result);
      else
        printTable(
          ['ID', 'LABEL', 'PREFIX', 'CREATED', 'LAST USED'],
          result.tokens.map((t) => [t.id, t.label, t.prefix, shortTime(t.created_at), shortTime(t.last_used_at)]),
          'no active tokens',
        );
      return 0;
    }
    case 'create': {
      noExtraPositionals(parsed, 1, TOKENS_HELP);
      if (values.label === undefined) throw new UsageError('tokens create needs --label LABEL');
      const token = await client(values).call<TokenJson>('POST', '/api/v1/tokens', { label: values.label });
      if (values.json === true) printJson(token);
      else process.stdout.write(`created ${token.id} "${token.label}"\ntoken (shown once): ${token.token}\n`);
      return 0;
    }
    case 'revoke': {
      const id = requirePositional(parsed, 1, 'TOKEN_ID', TOKENS_HELP);
      noExtraPositionals(parsed, 2, TOKENS_HELP);
      const credentials = resolveCredentials(values);
      const own = parseToken(requireToken(credentials));
      if (own !== null && tokenIdOf(own.idSegment) === id && values.force !== true) {
        throw new CliError(
          `${id} is the token this command uses: revoking it locks this CLI out (401 on every command); create another first ("burrow tokens create --label L", then "burrow login"), or pass --force`,
        );
      }
      await client(values).call('DELETE', `/api/v1/tokens/${encodeURIComponent(id)}`);
      if (values.json === true) printJson({ revoked: id });
      else process.stdout.write(`revoked ${id}\n`);
      return 0;
    }
    default:
      throw new UsageError(`unknown tokens action "${action}"; use list, create or revoke`);
  }
}

// ---- tunnels --------------------------------------------------------------------------------------

const TUNNELS_HELP = `
Usage: burrow tunnels list | show SUBDOMAIN | close SUBDOMAIN

Lists the account's active tunnels, shows one, or closes one (its client is told why and exits).

Options:
${CONNECTION_HELP}
`;

interface TunnelJson {
  subdomain: string;
  port: number;
  started_at: string;
  token_id: string;
  reserved?: boolean;
}

export async function tunnelsCommand(args: string[]): Promise<number> {
  const parsed = parse(args, CONNECTION_OPTIONS, TUNNELS_HELP);
  if (parsed === null) return 0;
  const action = requirePositional(parsed, 0, 'list, show or close', TUNNELS_HELP);
  const { values } = parsed;
  switch (action) {
    case 'list': {
      noExtraPositionals(parsed, 1, TUNNELS_HELP);
      const result = await client(values).call<{ tunnels: TunnelJson[] }>('GET', '/api/v1/tunnels');
      if (values.json === true) printJson(result);
      else
        printTable(
          ['SUBDOMAIN', 'PORT', 'STARTED', 'TOKEN'],
          result.tunnels.map((t) => [t.subdomain, t.port, shortTime(t.started_at), t.token_id]),
          'no active tunnels',
        );
      return 0;
    }
    case 'show': {
      const subdomain = requirePositional(parsed, 1, 'SUBDOMAIN', TUNNELS_HELP);
      noExtraPositionals(parsed, 2, TUNNELS_HELP);
      const tunnel = await client(values).call<TunnelJson>('GET', `/api/v1/tunnels/${encodeURIComponent(subdomain)}`);
      if (values.json === true) printJson(tunnel);
      else
        printTable(
          ['SUBDOMAIN', 'PORT', 'STARTED', 'TOKEN', 'RESERVED'],
          [[tunnel.subdomain, tunnel.port, shortTime(tunnel.started_at), tunnel.token_id, tunnel.reserved]],
          '',
        );
      return 0;
    }
    case 'close': {
      const subdomain = requirePositional(parsed, 1, 'SUBDOMAIN', TUNNELS_HELP);
      noExtraPositionals(parsed, 2, TUNNELS_HELP);
      await client(values).call('DELETE', `/api/v1/tunnels/${encodeURIComponent(subdomain)}`);
      if (values.json === true) printJson({ closed: subdomain });
      else process.stdout.write(`closed ${subdomain}\n`);
      return 0;
    }
    default:
      throw new UsageError(`unknown tunnels action "${action}"; use list, show or close`);
  }
}

// ---- requests -------------------------------------------------------------------------------------

const REQUESTS_HELP = `
Usage: burrow requests SUBDOMAIN [--limit N] [--before REQ_ID]

Lists the requests captured on a tunnel subdomain, newest first. One request in full:
burrow requests show REQ_ID (see burrow requests show --help).

Options:
  --limit N        how many (default 50, at most 1000)
  --before REQ_ID  only requests older than this one (the next page)
${CONNECTION_HELP}
`;

interface CaptureSummaryJson {
  id: string;
  method: string;
  path: string;
  status: number;
  duration_ms: number;
  received_at: string;
  /** "signature": refused by the edge for its webhook signature (docs/api.md); absent from older edges. */
  rejected?: string | null;
}

export async function requestsCommand(args: string[]): Promise<number> {
  if (args[0] === 'show') return showRequest(args.slice(1));
  const parsed = parse(args, { ...CONNECTION_OPTIONS, limit: { type: 'string' }, before: { type: 'string' } }, REQUESTS_HELP);
  if (parsed === null) return 0;
  const subdomain = requirePositional(parsed, 0, 'SUBDOMAIN', REQUESTS_HELP);
  noExtraPositionals(parsed, 1, REQUESTS_HELP);
  const { values } = parsed;
  const query = new URLSearchParams({ subdomain });
  if (values.limit !== undefined) query.set('limit', values.limit);
  if (values.before !== undefined) query.set('before', values.before);
  const result = await client(values).call<{ requests: CaptureSummaryJson[] }>('GET', `/api/v1/requests?${query}`);
  if (values.json === true) printJson(result);
  else
    printTable(
      ['ID', 'METHOD', 'STATUS', 'MS', 'RECEIVED', 'PATH'],
      result.requests.map((r) => [r.id, r.method, r.rejected ? `${r.status} rejected: ${r.rejected}` : r.status, r.duration_ms, shortTime(r.received_at), r.path]),
      `no requests captured on ${subdomain}`,
    );
  return 0;
}


const SHOW_HELP = `
Usage: burrow requests show REQ_ID [--raw | --raw-response]

Shows one captured request: when and from where, the request's and the response's headers and
bodies, the status and the time the local server took. Bodies are kept up to the capture cap (1 MiB
by default); a cut body says so.

Options:
  --raw            write only the request body's bytes to stdout (e.g. to check a signature)
  --raw-response   write only the response body's bytes to stdout
${CONNECTION_HELP}
`;

interface BodyJson {
  body: string | null;
  body_encoding?: 'utf8' | 'base64';
  body_size: number;
  truncated: boolean;
}

interface CaptureDetailJson extends CaptureSummaryJson {
  subdomain: string;
  client_address: string;
  error: string | null;
  replay_of: string | null;
  request: BodyJson & { headers: [string, string][] };
  response: BodyJson & { status: number; headers: [string, string][] };
}

async function showRequest(args: string[]): Promise<number> {
  const parsed = parse(args, { ...CONNECTION_OPTIONS, raw: { type: 'boolean' }, 'raw-response': { type: 'boolean' } }, SHOW_HELP);
  if (parsed === null) return 0;
  const id = requirePositional(parsed, 0, 'REQ_ID', SHOW_HELP);
  noExtraPositionals(parsed, 1, SHOW_HELP);
  const { values } = parsed;
  if (values.raw === true && values['raw-response'] === true) throw new UsageError('give --raw or --raw-response, not both');
  if ((values.raw === true || values['raw-response'] === true) && values.json === true) throw new UsageError('give --raw or --json, not both');
  const detail = await client(values).call<CaptureDetailJson>('GET', `/api/v1/requests/${encodeURIComponent(id)}`);
  if (values.json === true) {
    printJson(detail);
    return 0;
  }
  if (values.raw === true || values['raw-response'] === true) {
    const part = values.raw === true ? detail.request : detail.response;
    if (part.truncated) process.stderr.write(`burrow: the body was cut at the capture cap: ${bodyBytes(part).byteLength} of ${part.body_size} bytes\n`);
    process.stdout.write(bodyBytes(part));
    return 0;
  }
  const lines = [
    `${detail.id}  ${escapeControls(detail.method)} ${escapeControls(detail.path)}`,
    `status        ${detail.status}${detail.error === null ? '' : ` (${detail.error}, answered by the edge)`}`,
    `received      ${shortTime(detail.received_at)} from ${detail.client_address} on ${detail.subdomain}`,
    `duration      ${detail.duration_ms} ms`,
    ...(detail.replay_of === null ? [] : [`replay of     ${detail.replay_of}`]),
    ...(detail.rejected ? [`rejected      ${detail.rejected}: refused by the edge, never sent to the local server`] : []),
    '',
    'Request headers',
    ...detail.request.headers.map(headerLine),
    '',
    `Request body  ${bodySummary(detail.request)}`,
    ...bodyText(detail.request),
    '',
    `Response headers (${detail.response.status})`,
    ...detail.response.headers.map(headerLine),
    '',
    `Response body  ${bodySummary(detail.response)}`,
    ...bodyText(detail.response),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}

function bodyBytes(part: BodyJson): Buffer {
  if (part.body === null) return Buffer.alloc(0);
  return Buffer.from(part.body, part.body_encoding === 'base64' ? 'base64' : 'utf8');
}

function bodySummary(part: BodyJson): string {
  if (part.body_size === 0) return '(empty)';
  const kept = bodyBytes(part).byteLength;
  return `${part.body_size} bytes${part.truncated ? `, the first ${kept} captured` : ''}${part.body_encoding === 'base64' ? ', binary (--raw writes the bytes)' : ''}`;
}

/** A captured header as a terminal shows it: a client chose its bytes, control characters come out as \xHH. */
function headerLine([name, value]: [string, string]): string {
  return `  ${escapeControls(name)}: ${escapeControls(value)}`;
}

/** A text body for the terminal: its lines and tabs kept, every other control character as \xHH (--raw writes the bytes). */
function bodyText(part: BodyJson): string[] {
  if (part.body === null || part.body_size === 0 || part.body_encoding === 'base64') return [];
  return [escapeControls(part.body, true)];
}

// ---- reservations ----------------------------------------------------------------------------------

const RESERVE_HELP = `
Usage: burrow reserve NAME [--offline queue|reject|off] [policy flags] [--clear-policy]
       burrow reserve NAME --tls
       burrow reserve --tcp [PORT]

Reserves a subdomain for the account: no other account can open a tunnel on it, and it stays the
URL of "burrow http PORT --subdomain NAME" across restarts. The plan caps how many (TCP ports and
TLS names count with the subdomains). With --tls the name is for "burrow tls" (TLS passthrough)
instead. With --tcp it reserves a TCP port of the edge's --tcp-ports, PORT or a free one, named
tcp:PORT, for "burrow tcp LOCAL --remote-port PORT" (docs/tcp.md). Reserving a name
the account holds again with --offline changes its offline mode; with policy flags it replaces the
name's stored policy (a policy holds while the tunnel is offline too, in queue and reject modes).
Secrets are write-only: "burrow reservations show NAME" shows them as set. Routes and --strip-prefix
are the client's and stay on "burrow http".

Options:
  --offline MODE   what the edge answers while no tunnel is connected (docs/offline.md):
                   off (default) 404 as for any offline tunnel; reject 503 with Retry-After, so
                   the provider retries; queue 202, the request is held and delivered in order
                   when the tunnel connects (see burrow queue --help)
  --clear-policy   removes the name's stored policy
  --tls            reserves NAME for TLS passthrough tunnels (burrow tls)
  --tcp            reserves a TCP port (PORT, or a free one); neither takes --offline or policy
                   flags: give --allow-cidr/--deny-cidr to burrow tcp or burrow tls
${CONNECTION_HELP}

${policyFlagsHelp(19)}
`;

interface ReservationJson {
  subdomain: string;
  kind: 'http' | 'tls' | 'tcp';
  created_at: string;
  offline: string;
  /** A one-line summary of the stored policy, null without one. */
  policy: string | null;
}

const OFFLINE_MODE_NAMES = ['off', 'reject', 'queue'];

export async function reserveCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    { ...CONNECTION_OPTIONS, offline: { type: 'string' }, 'clear-policy': { type: 'boolean' }, tcp: { type: 'boolean' }, tls: { type: 'boolean' }, ...POLICY_FLAG_OPTIONS },
    RESERVE_HELP,
  );
  if (parsed === null) return 0;
  const kind = parsed.values.tcp === true ? 'tcp' : parsed.values.tls === true ? 'tls' : 'http';
  if (parsed.values.tcp === true && parsed.values.tls === true) throw new UsageError('give --tcp or --tls, not both');
  const name = kind === 'tcp' ? tcpReservationName(parsed.positionals[0]) : requirePositional(parsed, 0, 'NAME', RESERVE_HELP);
  noExtraPositionals(parsed, 1, RESERVE_HELP);
  const offline = parsed.values.offline;
  if (offline !== undefined && !OFFLINE_MODE_NAMES.includes(offline)) throw new UsageError(`--offline must be queue, reject or off, not "${offline}"`);
  let policy: PolicySpec | undefined;
  try {
    policy = policySpecFromFlags(parsed.values);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (policy !== undefined && parsed.values['clear-policy'] === true) throw new UsageError('give policy flags or --clear-policy, not both');
  if (kind !== 'http' && (policy !== undefined || parsed.values['clear-policy'] === true || (offline !== undefined && offline !== 'off'))) {
    throw new UsageError(`--${kind} reservations take no --offline or policy flags: give --allow-cidr/--deny-cidr to burrow ${kind} instead`);
  }
  const api = client(parsed.values);
  const request: Record<string, string> = kind === 'http' ? {} : { kind };
  if (name !== undefined) request.subdomain = name;
  if (offline !== undefined) request.offline = offline;
  let reservation = await api.call<ReservationJson>('POST', '/api/v1/reserved-subdomains', request);
  const policyPath = `/api/v1/reserved-subdomains/${encodeURIComponent(reservation.subdomain)}/policy`;
  if (policy !== undefined || parsed.values['clear-policy'] === true) {
    if (policy !== undefined) await api.call('PUT', policyPath, policy);
    else await api.call('DELETE', policyPath);
    const listed = await api.call<{ reserved_subdomains: ReservationJson[] }>('GET', '/api/v1/reserved-subdomains');
    reservation = listed.reserved_subdomains.find((entry) => entry.subdomain === reservation.subdomain) ?? reservation;
  }
  if (parsed.values.json === true) printJson(reservation);
  else {
    const mode = reservation.offline === 'off' ? '' : ` (offline: ${reservation.offline})`;
    const rules = reservation.policy === null ? '' : ` (policy: ${reservation.policy})`;
    process.stdout.write(`reserved ${reservation.subdomain}${mode}${rules}; use it with: ${usageOf(reservation)}\n`);
  }
  return 0;
}

/** `burrow reserve --tcp [PORT]`: `tcp:PORT`, or undefined for a free port. */
function tcpReservationName(port: string | undefined): string | undefined {
  if (port === undefined) return undefined;
  const match = /^(?:tcp:)?([0-9]{1,5})$/i.exec(port);
  if (match === null) throw new UsageError(`--tcp takes a port number, not "${port}"`);
  return `tcp:${match[1]}`;
}

/** The command that runs a tunnel on a reservation. */
function usageOf(reservation: ReservationJson): string {
  if (reservation.kind === 'tcp') return `burrow tcp LOCAL_PORT --remote-port ${reservation.subdomain.slice('tcp:'.length)}`;
  return `burrow ${reservation.kind === 'tls' ? 'tls' : 'http'} PORT --subdomain ${reservation.subdomain}`;
}

const RESERVATIONS_HELP = `
Usage: burrow reservations [list | show NAME | release NAME]

Lists the account's reserved subdomains, TLS names and TCP ports (tcp:PORT) (the default), shows one
with its policy (secrets shown only as set), or releases one (burrow reservations release tcp:20042).
A tunnel running on a released name keeps running.

Options:
${CONNECTION_HELP}
`;

export async function reservationsCommand(args: string[]): Promise<number> {
  const parsed = parse(args, CONNECTION_OPTIONS, RESERVATIONS_HELP);
  if (parsed === null) return 0;
  const action = parsed.positionals[0] ?? 'list';
  const { values } = parsed;
  switch (action) {
    case 'list': {
      noExtraPositionals(parsed, 1, RESERVATIONS_HELP);
      const result = await client(values).call<{ reserved_subdomains: ReservationJson[] }>('GET', '/api/v1/reserved-subdomains');
      if (values.json === true) printJson(result);
      else
        printTable(
          ['SUBDOMAIN', 'RESERVED', 'OFFLINE', 'POLICY'],
          result.reserved_subdomains.map((r) => [r.subdomain, shortTime(r.created_at), r.offline, r.policy ?? '-']),
          'no reserved subdomains (burrow reserve NAME)',
        );
      return 0;
    }
    case 'show': {
      const name = requirePositional(parsed, 1, 'NAME', RESERVATIONS_HELP);
      noExtraPositionals(parsed, 2, RESERVATIONS_HELP);
      const api = client(values);
      const { policy } = await api.call<{ subdomain: string; policy: PolicyView }>('GET', `/api/v1/reserved-subdomains/${encodeURIComponent(name)}/policy`);
      const listed = await api.call<{ reserved_subdomains: ReservationJson[] }>('GET', '/api/v1/reserved-subdomains');
      const reservation = listed.reserved_subdomains.find((entry) => entry.subdomain === name.toLowerCase());
      if (values.json === true) printJson({ ...reservation, policy });
      else process.stdout.write(policyLines(name.toLowerCase(), reservation, policy).join('\n') + '\n');
      return 0;
    }
    case 'release': {
      const name = requirePositional(parsed, 1, 'NAME', RESERVATIONS_HELP);
      noExtraPositionals(parsed, 2, RESERVATIONS_HELP);
      await client(values).call('DELETE', `/api/v1/reserved-subdomains/${encodeURIComponent(name)}`);
      if (values.json === true) printJson({ released: name });
      else process.stdout.write(`released ${name}\n`);
      return 0;
    }
    default:
      throw new UsageError(`unknown reservations action "${action}"; use list, show NAME or release NAME`);
  }
}

/** `burrow reservations show NAME`: one line per rule; secrets as "(set)". */
function policyLines(name: string, reservation: ReservationJson | undefined, policy: PolicyView): string[] {
  const lines = [`${name}`, `  reserved     ${reservation === undefined ? '-' : shortTime(reservation.created_at)}`, `  offline      ${reservation?.offline ?? 'off'}`];
  const rule = (label: string, value: string): void => {
    lines.push(`  ${label.padEnd(12)} ${value}`);
  };
  for (const user of policy.basic_auth) rule('basic-auth', `${user.user}:(password set)`);
  if (policy.basic_auth_forward) rule('basic-auth', 'Authorization forwarded to the local server');
  for (const block of policy.allow_cidr) rule('allow-cidr', block);
  for (const block of policy.deny_cidr) rule('deny-cidr', block);
  if (policy.oidc !== null) {
    rule('oidc', `${policy.oidc.issuer} client ${policy.oidc.client_id} (secret set)`);
    for (const email of policy.oidc.allow_email) rule('oidc-allow', email);
    for (const domain of policy.oidc.allow_domain) rule('oidc-allow', `@${domain}`);
  }
  for (const hook of policy.verify_webhook) rule('webhook', `${hook.provider}${hook.header === undefined ? '' : ` (${hook.header})`} ${hook.id} (secret set)`);
  for (const { name: header, value } of policy.request_header_add) rule('request +', `${header}: ${value}`);
  for (const header of policy.request_header_remove) rule('request -', header);
  for (const { name: header, value } of policy.response_header_add) rule('response +', `${header}: ${value}`);
  for (const header of policy.response_header_remove) rule('response -', header);
  if (policy.rate_limit !== null) rule('rate-limit', `${policy.rate_limit.requests} per ${policy.rate_limit.period_seconds} s per client address`);
  if (lines.length === 3) lines.push('  policy       none (anyone can reach it)');
  return lines;
}
