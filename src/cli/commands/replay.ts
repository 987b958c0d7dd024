/**
 * `burrow replay (--last | REQ_ID)`: replays a captured request to the local server, without the sender.
 *
 * Through the local inspector first (POST {inspector}/api/requests/:id/replay; --last takes the newest
 * exchange of its list). When no inspector answers, or it no longer holds the id, the edge's replay API
 * does it (POST {edge}/api/v1/requests/:id/replay, with the token). --last needs the inspector: only it
 * knows which request was this machine's last one.
 */
import { request } from 'undici';
import { edgeApiClient } from '../api-client.js';
import { CliError, noExtraPositionals, parse, UsageError } from '../args.js';
import { projectConfig, resolveCredentials } from '../config.js';
import { printJson } from '../output.js';
import { DEFAULT_INSPECT_HOST, urlHost } from '../../inspector/address.js';

const HELP = `
Usage: burrow replay (--last | REQ_ID) [--header 'Name: value' ...] [--allow-truncated] [--inspector URL|PORT] [--json]
                    [--edge URL] [--token T] [--ca FILE] [--resolve HOST:PORT:ADDRESS ...] [--insecure]

Replays a captured request to the local server again, without the original sender, through the
running inspector of "burrow http" (default http://127.0.0.1:4040). If no inspector is running, or it
no longer holds REQ_ID, the edge's replay API replays it through the live tunnel. Either way the
replay is captured as a new request. --last (the newest request) needs the inspector.
A request whose body was larger than the capture cap (1 MiB) was kept cut; its replay is refused
unless --allow-truncated, which sends the cut body and says so.

Options:
  --last            replay the newest request the inspector holds
  --header 'N: v'   replace (or add) a request header; repeatable
  --allow-truncated replay even a request whose captured body was cut at the cap
  --inspector URL|PORT
                    the inspector: its URL, HOST:PORT, or a PORT on 127.0.0.1, as "burrow http
                    --inspect PORT" took it (default: BURROW_INSPECTOR, burrow.yml's inspect,
                    http://127.0.0.1:4040)
  --edge URL        the edge, when no inspector runs (default: BURROW_EDGE, the config file);
                    repeat it to try the next edge when one cannot be reached
  --token T         the token, when no inspector runs (default: BURROW_TOKEN, the config file)
  --ca FILE         trust this CA (PEM) for an https:// edge with a private certificate (default:
                    BURROW_CA, the CA "burrow login --ca" saved)
  --resolve HOST:PORT:ADDRESS
                    connect to ADDRESS for the edge URL's HOST and PORT, without DNS (like curl
                    --resolve; repeatable; default: BURROW_RESOLVE)
  --insecure        allow sending the token over plain http:// to an edge not on this machine
  --json            print the new request as JSON
  -h, --help        show this help
`;

export const DEFAULT_INSPECTOR = 'http://127.0.0.1:4040';

interface Replayed {
  id: string;
  status: number;
  latency_ms?: number;
  duration_ms?: number;
  error?: string | null;
  /** The body sent was a truncated capture's first bytes. */
  truncated?: boolean;
}

/** The inspector did not answer at all: nothing listens there. */
class NoInspector extends Error {}

export async function replayCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      last: { type: 'boolean' },
      header: { type: 'string', multiple: true },
      'allow-truncated': { type: 'boolean' },
      inspector: { type: 'string' },
      edge: { type: 'string', multiple: true },
      token: { type: 'string' },
      ca: { type: 'string' },
      resolve: { type: 'string', multiple: true },
      insecure: { type: 'boolean' },
      json: { type: 'boolean' },
    },
    HELP,
  );
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 1, HELP);
  const last = parsed.values.last === true;
  let id = parsed.positionals[0];
  if (last && id !== undefined) throw new UsageError('give --last or a REQ_ID, not both');
  if (!last && id === undefined) throw new UsageError('give the id of the request to replay, or --last');
  const headers: Record<string, string> = {};
  for (const header of parsed.values.header ?? []) {
    const colon = header.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header "${header}" is not "Name: value"`);
    headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
  }
  const edits = {
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(parsed.values['allow-truncated'] === true ? { allow_truncated: true } : {}),
  };
  const inspector = inspectorUrl(parsed.values.inspector ?? nonEmpty(process.env.BURROW_INSPECTOR) ?? configuredInspector() ?? DEFAULT_INSPECTOR);

  let replayed: Replayed | null = null;
  try {
    if (last) id = await newestId(inspector);
    replayed = await viaInspector(inspector, id!, edits);
  } catch (error) {
    if (!(error instanceof NoInspector)) throw error;
    if (last) {
      throw new CliError(
        `--last needs the inspector, and none answers at ${inspector}; start "burrow http" with its inspector, pass --inspector URL, or give a REQ_ID ("burrow requests SUBDOMAIN" lists them)`,
      );
    }
  }
  if (replayed === null) {
    // No inspector, or it does not hold the id: the edge replays what it captured.
    const credentials = resolveCredentials(parsed.values);
    if (credentials.token === undefined) {
      throw new CliError(`no inspector at ${inspector} holds ${id}, and there is no token to ask the edge: pass --token, set BURROW_TOKEN, or run "burrow login"`);
    }
    const api = edgeApiClient(parsed.values);
    replayed = await api.call<Replayed>('POST', `/api/v1/requests/${encodeURIComponent(id!)}/replay`, edits);
  }
  if (parsed.values.json === true) {
    printJson(replayed);
  } else {
    const status = replayed.status === 0 ? `ERR${replayed.error ? ` (${replayed.error})` : ''}` : String(replayed.status);
    const ms = replayed.latency_ms ?? replayed.duration_ms ?? 0;
    const cut = replayed.truncated === true ? ' (the body sent was truncated at the capture cap)' : '';
    process.stdout.write(`replayed ${id} as ${replayed.id}: ${status} in ${Math.round(ms * 10) / 10} ms${cut}\n`);
  }
  return 0;
}

/** burrow.yml's `inspect` address, when it names a port (0 means "any free one": nothing to find). */
function configuredInspector(): string | undefined {
  const address = projectConfig()?.inspect;
  if (address === undefined || address === null || address.port === 0) return undefined;
  return `http://${urlHost(address.host)}:${address.port}`;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** --inspector: a URL, HOST:PORT, or a bare PORT on 127.0.0.1 (what "burrow http --inspect PORT" takes). */
function inspectorUrl(text: string): string {
  if (/^[0-9]+$/.test(text)) {
    const port = Number(text);
    if (port < 1 || port > 65535) throw new UsageError(`--inspector ${text}: the port must be 1 to 65535`);
    return `http://${DEFAULT_INSPECT_HOST}:${port}`;
  }
  let url: URL;
  try {
    url = new URL(text.includes('://') ? text : `http://${text}`);
  } catch {
    throw new UsageError(`--inspector "${text}" is not a URL; use e.g. ${DEFAULT_INSPECTOR}`);
  }
  if (url.protocol !== 'http:') throw new UsageError(`--inspector must be an http:// URL, not ${url.protocol}`);
  return url.origin;
}

interface InspectorAnswer {
  status: number;
  body: unknown;
}

/** One call to the inspector. NoInspector when nothing answers; a CliError when something else does. */
async function call(inspector: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<InspectorAnswer> {
  let response;
  try {
    response = await request(`${inspector}${path}`, {
      method,
      // The inspector wants JSON on every POST (and no Origin, which a CLI never sends).
      headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      headersTimeout: 130_000,
      bodyTimeout: 130_000,
    });
  } catch (error) {
    const code = (error as { code?: string; cause?: { code?: string } }).cause?.code ?? (error as { code?: string }).code ?? '';
    if (/ECONNREFUSED|ECONNRESET|EADDRNOTAVAIL|UND_ERR_SOCKET|UND_ERR_CONNECT/.test(code)) throw new NoInspector(code);
    throw new CliError(`cannot reach the inspector at ${inspector} (${code || (error as Error).message})`);
  }
  const text = await response.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError(`${inspector} answered ${response.statusCode} with a body that is not JSON; is it a Burrow inspector? (--inspector URL)`);
  }
  return { status: response.statusCode, body: parsed };
}

function failure(answer: InspectorAnswer): CliError {
  const error = (answer.body as { error?: { code?: string; message?: string } } | null)?.error;
  return new CliError(`${error?.code ?? `HTTP ${answer.status}`}: ${error?.message ?? 'the inspector refused the replay'}`);
}

async function newestId(inspector: string): Promise<string> {
  const answer = await call(inspector, 'GET', '/api/requests?limit=1&summary=1');
  if (answer.status !== 200) throw failure(answer);
  const newest = (answer.body as { requests?: { id?: string }[] }).requests?.[0]?.id;
  if (typeof newest !== 'string') throw new CliError(`the inspector at ${inspector} has no requests yet; send one through the tunnel first`);
  return newest;
}

/** The replay through the inspector, or null when it does not hold `id` (the edge may). */
async function viaInspector(inspector: string, id: string, edits: object): Promise<Replayed | null> {
  const answer = await call(inspector, 'POST', `/api/requests/${encodeURIComponent(id)}/replay`, edits);
  if (answer.status === 200) {
    const replayed = answer.body as Replayed;
    if (typeof replayed?.id !== 'string') throw new CliError(`the inspector at ${inspector} answered without a request id; is it a Burrow inspector?`);
    return replayed;
  }
  const code = (answer.body as { error?: { code?: string } } | null)?.error?.code;
  if (answer.status === 404 && code === 'NOT_FOUND') return null;
  throw failure(answer);
}
