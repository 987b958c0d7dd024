/**
 * The thin wrappers over the API: login, tokens, tunnels, requests. Tables by default, the API's JSON
 * with --json.
 */
import { parseToken } from '../../ids.js';
import { ApiClient } from '../api-client.js';
import { cleartextRefusal } from '../../client/edge-trust.js';
import { CliError, noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import { configPath, readConfig, resolveCredentials, requireToken, writeConfig } from '../config.js';
import { readCaFile, trustCaForRequests } from '../edge-ca.js';
import { printJson, printTable, shortTime } from '../output.js';

const CONNECTION_OPTIONS = {
  edge: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
} as const;

const CONNECTION_HELP = `  --edge URL     the edge (default: BURROW_EDGE, the config file, http://localhost:8080)
  --token T      the token (default: BURROW_TOKEN, the config file)
  --json         print the API's JSON
  -h, --help     show this help`;

function client(values: { edge?: string | undefined; token?: string | undefined }): ApiClient {
  const credentials = resolveCredentials(values);
  return new ApiClient(credentials.edge, requireToken(credentials));
}

// ---- login ----------------------------------------------------------------------------------------

const LOGIN_HELP = `
Usage: burrow login TOKEN [--edge URL] [--ca FILE] [--insecure]

Checks the token against the edge and saves both to the client config (mode 0600), so later commands
need neither.

Options:
  --edge URL     the edge (default: BURROW_EDGE, the config file, http://localhost:8080)
  --ca FILE      trust this CA (PEM) to check an https:// edge with a private certificate (later
                 commands take --ca or NODE_EXTRA_CA_CERTS)
  --insecure     allow sending the token over plain http:// to an edge not on this machine
  -h, --help     show this help
`;

export async function loginCommand(args: string[]): Promise<number> {
  const parsed = parse(args, { edge: { type: 'string' }, ca: { type: 'string' }, insecure: { type: 'boolean' } }, LOGIN_HELP);
  if (parsed === null) return 0;
  const token = requirePositional(parsed, 0, 'TOKEN', LOGIN_HELP);
  noExtraPositionals(parsed, 1, LOGIN_HELP);
  if (parseToken(token) === null) throw new UsageError('that is not a Burrow token (svc_pat_<8 hex>_<36 hex>)');
  const path = configPath();
  const saved = readConfig(path);
  // The edge as every other command finds it: the flag, then BURROW_EDGE, then the config file.
  const { edge } = resolveCredentials({ edge: parsed.values.edge, token });
  const refusal = cleartextRefusal(edge, parsed.values.insecure === true);
  if (refusal !== null) throw new CliError(refusal);
  if (parsed.values.ca !== undefined) trustCaForRequests(readCaFile(parsed.values.ca));
  const me = await new ApiClient(edge, token).call<{ id: string; email: string; plan: string }>('GET', '/api/v1/auth/me');
  writeConfig({ ...saved, edge, token }, path);
  process.stdout.write(`logged in to ${edge} as ${me.email} (${me.plan}); saved to ${path}\n`);
  return 0;
}

// ---- tokens ---------------------------------------------------------------------------------------

const TOKENS_HELP = `
Usage: burrow tokens list | create --label LABEL | revoke TOKEN_ID

Lists, creates and revokes personal access tokens. A new token's secret is printed once.
Revoking a token closes the tunnels it opened.

Options:
  --label L      label of a new token (1 to 64 characters)
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
  const parsed = parse(args, { ...CONNECTION_OPTIONS, label: { type: 'string' } }, TOKENS_HELP);
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

Lists the requests captured on a tunnel subdomain, newest first.

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
}

export async function requestsCommand(args: string[]): Promise<number> {
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
      result.requests.map((r) => [r.id, r.method, r.status, r.duration_ms, shortTime(r.received_at), r.path]),
      `no requests captured on ${subdomain}`,
    );
  return 0;
}

