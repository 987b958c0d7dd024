/**
 * `burrow http [scheme://][host:]port`: the tunnel client, the local inspector beside it, and what the
 * terminal shows.
 *
 * In a terminal (stdout is a TTY, no --log) a status block is redrawn in place at most 10 times a
 * second; otherwise, or with --log text|json, one line per request. Every mode first prints
 * "Forwarding <public URL> -> <target>" once the tunnel is live.
 */
import { fstatSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { parseHostHeader } from '../../client/host-header.js';
import { dialOptions } from '../../client/local-connector.js';
import { parseRoute, parseTarget, RouteTable, type LocalTarget, type Route } from '../../client/routes.js';
import { cleartextRefusal } from '../../client/edge-trust.js';
import { TunnelRefusedError, type ReadyInfo } from '../../client/tunnel-client.js';
import { MAX_EDGES_PER_TUNNEL, MultiEdgeTunnel } from '../../client/multi-edge.js';
import type { Tunnel } from '../../client/tunnel.js';
import type { Exchange } from '../../client/exchange.js';
import { controlSafeJson, escapeControls } from '../../control-chars.js';
import { DEFAULT_INSPECT_HOST, DEFAULT_INSPECT_PORT, DEFAULT_PORT_TRIES, parseInspectAddress } from '../../inspector/address.js';
import { Inspector } from '../../inspector/server.js';
import { ApiClient } from '../api-client.js';
import { encodePolicyHeader, POLICY_FLAG_OPTIONS, policyFlagsHelp, policySpecFromFlags, type PolicySpec } from '../../protocol/policy.js';
import { CliError, noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import { rememberedName, rememberName, requireToken, resolveCredentials, type Credentials } from '../config.js';
import { formatProblem, loadConfig, type ConfigFile } from '../config-file.js';
import { readCaFile, useForEdgeRequests } from '../edge-ca.js';

const HELP = `
Usage: burrow http [scheme://][host:]port [--subdomain NAME [--replace | --pool]] [--route PREFIX=TARGET ...]
                        [--host-header rewrite|VALUE] [--local-insecure] [--edge URL ...] [--token T]
                        [--inspect ADDR | --no-inspect] [--log text|json] [--json] [--ca FILE]
                        [--resolve HOST:PORT:ADDRESS ...] [--insecure] [--edges K] [--config FILE]

Opens a tunnel: requests to the public URL the edge gives are forwarded to the local target:
  3000                     http://localhost:3000 (localhost: 127.0.0.1 and ::1 are both tried)
  192.168.1.5:8080         another host; [::1]:3000 for an IPv6 address
  http://localhost:3000    the same as 3000
  https://localhost:8443   an HTTPS local server (add --local-insecure for a self-signed certificate)
Prints "Forwarding <public URL> -> <target>" once the tunnel is live; reconnects by itself
(keeping the URL) when the connection drops; Ctrl-C closes the tunnel. Without --subdomain
it asks for the name this port got from this edge last time (remembered in names.json next to the
config file; the edge holds it for its account for a minute after the tunnel ends), and says so when
that name is no longer available. A warning says when nothing listens on the local port yet.

A name that another tunnel of the account has online (another "burrow http", here or elsewhere) is
refused with 409 SUBDOMAIN_TAKEN naming that tunnel (its address, start and local port), unless
--replace takes it over; this client's own reconnects always get its name back.

--pool shares a name instead: every "burrow http --subdomain NAME --pool" of the account serves it
(on any machine), the edge sends each request to the member with the fewest open ones, and a
member stopped with Ctrl-C leaves without failing a request: the edge sends it nothing new and
it closes once it has answered what it had (at most 30 s). The name is online until the last
member leaves. A name online without --pool is not joined (and a pool is not taken by a client
without --pool): the refusal says which. In a cluster the members may connect through any edges.

Several edges (a cluster): repeat --edge, or give BURROW_EDGE a comma-separated list; an edge name
with several DNS addresses is tried address by address. When the edge in use dies, goes away (GOAWAY)
or refuses for a while (rate limit, 5xx), the tunnel moves to the next edge at once, keeping its
subdomain and the inspector's history, and says "burrow: edge A went away (cause); reconnected to B
as NAME"; it waits (backoff) only after every edge has failed in a row. A revoked token, a tunnel
closed through the API or replaced, or a subdomain owned by another account still ends it.

In a cluster (the edge says so when the tunnel connects) the tunnel is attached to --edges edges
at once (2 by default): each serves it without the edges' internal hop, and losing one costs only
the requests in flight on it. The client says how many edges serve it when that changes, and one
line when an edge reports its cluster store (Redis) unavailable and one when it is back.

The local inspector (http://127.0.0.1:4040, or the next free port up to 4059) shows every request
with headers, body, the local response and latency, live, and replays them (burrow replay).

Options:
  --subdomain NAME        ask for this subdomain (3-63 of a-z, 0-9, -); default: one is made up
  --replace               take the subdomain over when another tunnel of this account has it online
                          (that tunnel ends with GOAWAY REPLACED); default: refuse
  --pool                  serve the subdomain beside the account's other --pool tunnels on it;
                          needs --subdomain
  --route PREFIX=TARGET   send paths under PREFIX to another target, in the same forms
                          (repeatable; longest wins; case-sensitive; the path is forwarded
                          whole, prefix included)
  --strip-prefix          right after a --route: that route's local server gets the path without
                          PREFIX (/api/users -> /users); captures keep the public path
  --host-header rewrite|VALUE
                          the Host the local server sees (HTTP and WebSocket): rewrite sends the
                          target's host:port (Vite, Django ALLOWED_HOSTS, Rails), VALUE sends VALUE;
                          default: the public Host. X-Forwarded-Host carries the public host always
  --local-insecure        accept any certificate from https:// targets (self-signed dev servers)
  --edge URL              the edge (default: BURROW_EDGE, the config file, http://localhost:8080);
                          may be repeated: the edges in failover order
  --token T               the token (default: BURROW_TOKEN, the config file)
  --ca FILE               trust this CA (PEM) for an https:// edge with a private certificate, beside
                          the public roots (default: BURROW_CA, the CA "burrow login --ca" saved;
                          NODE_EXTRA_CA_CERTS works too); https:// edges are always verified, and a
                          bad certificate ends the command naming the problem
  --resolve HOST:PORT:ADDRESS
                          connect to ADDRESS for the edge URL's HOST and PORT, without DNS: the
                          Host header, TLS server name and certificate check keep HOST (like curl
                          --resolve; repeatable; default: BURROW_RESOLVE, comma-separated)
  --insecure              allow sending the token over plain http:// to an edge that is not on this
                          machine (refused otherwise: use https://)
  --edges K               in a cluster, attach the tunnel to K edges at once (1 to 8; default: the
                          config file's edges, else 2); 1 keeps one session
  --inspect ADDR          the inspector's address: PORT or HOST:PORT, HOST a loopback address
                          (exactly this port; 0 picks a free one)
  --no-inspect            no inspector: no bodies or WebSocket messages are kept
  --log text|json         one line per request and per WebSocket opened and closed, also in a
                          terminal (default: a live status block in a terminal, text lines
                          otherwise); NO_COLOR turns colour off
  --json                  one JSON object per line per event: ready, request, websocket, reconnect,
                          failover, edges, store, warning, error, closed (errors before the tunnel opens:
                          {"error":{...}} on stderr)
  --config FILE           the burrow.yml whose edge, token, ca, inspect and log apply (default:
                          BURROW_CONFIG, ./burrow.yml, burrow.yml in the user config directory);
                          flags win over it, and its tunnels are for "burrow start" (docs/config.md)
  -h, --help              show this help

${policyFlagsHelp(26)}
  A one-run policy holds while this command runs; for a reserved name with a stored policy, change
  that one instead (burrow reserve NAME ...).
`;

/**
 * Which --route (by position among the --route flags) each --strip-prefix follows: it belongs to the
 * nearest --route before it. A --strip-prefix before any --route is a usage error.
 */
export function stripPrefixRoutes(args: readonly string[]): Set<number> {
  const marked = new Set<number>();
  let routeIndex = -1;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') break;
    if (arg === '--route' || arg.startsWith('--route=')) {
      routeIndex++;
      if (arg === '--route') i++;
    } else if (arg === '--strip-prefix') {
      if (routeIndex === -1) throw new UsageError('--strip-prefix belongs right after the --route PREFIX=TARGET it applies to');
      marked.add(routeIndex);
    }
  }
  return marked;
}

/** Bytes of each body the client keeps for the inspector (the edge keeps the same by default). */
export const INSPECTOR_BODY_LIMIT = 1024 * 1024;
/** Requests shown in the terminal's status block. */
const RECENT = 10;
const REDRAW_MS = 100;

export async function httpCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      subdomain: { type: 'string' },
      replace: { type: 'boolean' },
      pool: { type: 'boolean' },
      route: { type: 'string', multiple: true },
      edge: { type: 'string', multiple: true },
      token: { type: 'string' },
      log: { type: 'string' },
      inspect: { type: 'string' },
      'no-inspect': { type: 'boolean' },
      'host-header': { type: 'string' },
      'local-insecure': { type: 'boolean' },
      json: { type: 'boolean' },
      ca: { type: 'string' },
      resolve: { type: 'string', multiple: true },
      insecure: { type: 'boolean' },
      edges: { type: 'string' },
      'strip-prefix': { type: 'boolean', multiple: true },
      ...POLICY_FLAG_OPTIONS,
      config: { type: 'string' },
    },
    HELP,
  );
  if (parsed === null) return 0;
  const targetText = requirePositional(parsed, 0, 'the local target ([scheme://][host:]port)', HELP);
  noExtraPositionals(parsed, 1, HELP);
  const target = parseTarget(targetText);
  if (typeof target === 'string') throw new UsageError(target);
  const pool = parsed.values.pool === true;
  if (pool && parsed.values.replace === true) throw new UsageError('give --pool or --replace, not both: --pool shares the name, --replace takes it');
  if (pool && parsed.values.subdomain === undefined) throw new UsageError('--pool needs --subdomain NAME: the name the pool shares');
  const hostHeader = parsed.values['host-header'] === undefined ? 'keep' : parseHostHeader(parsed.values['host-header']);
  if (typeof hostHeader === 'object' && 'error' in hostHeader) throw new UsageError(`--host-header ${hostHeader.error}`);
  const routes: Route[] = [];
  const stripped = stripPrefixRoutes(args);
  for (const [index, text] of (parsed.values.route ?? []).entries()) {
    const route = parseRoute(text);
    if (typeof route === 'string') throw new UsageError(`--route ${route}`);
    routes.push(stripped.has(index) ? { ...route, stripPrefix: true } : route);
  }
  let policy: PolicySpec | undefined;
  try {
    policy = policySpecFromFlags(parsed.values);
    if (policy !== undefined) encodePolicyHeader(policy);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  // burrow.yml's shared settings (not its tunnels), below the flags.
  const loaded = loadConfig(parsed.values.config);
  const logFormat = parsed.values.log ?? loaded.config?.log;
  if (logFormat !== undefined && logFormat !== 'text' && logFormat !== 'json') throw new UsageError('--log must be text or json');
  const inspect = inspectorAddress(parsed.values, loaded.config);
  const credentials = resolveCredentials(parsed.values, process.env, loaded.config);
  const token = requireToken(credentials);
  const edgesPerTunnel = edgesOption(parsed.values.edges, loaded.config);
  const table = new RouteTable(target, routes);
  const json = parsed.values.json === true;
  const out = process.stdout;
  const events = json ? jsonEvents(out) : null;
  const warn = (code: string, message: string, extra: Record<string, unknown> = {}): void => {
    if (events !== null) events({ event: 'warning', code, message, ...extra });
    else process.stderr.write(`burrow: warning: ${message}\n`);
  };
  for (const warning of loaded.warnings) warn('CONFIG_WARNING', formatProblem(warning));
  // Before anything reaches the edge (the remembered name's check sends the token too).
  const ca = edgeAccess(credentials, parsed.values.insecure === true);
  // The inspector first: a taken --inspect port fails before any tunnel opens.
  const inspector = await startInspector(inspect, credentials, token, '--inspect PORT');
  const open = async (subdomain: string | undefined): Promise<{ client: MultiEdgeTunnel; ready: ReadyInfo }> => {
    const client = new MultiEdgeTunnel({
      edgesPerTunnel,
      edge: credentials.edges,
      token,
      routes: table,
      recordLimit: inspector === null ? 0 : INSPECTOR_BODY_LIMIT,
      hostHeader,
      localInsecure: parsed.values['local-insecure'] === true,
      ...(ca === undefined ? {} : { ca }),
      insecure: parsed.values.insecure === true,
      ...(policy === undefined ? {} : { policy }),
      resolve: credentials.resolve,
      replace: parsed.values.replace === true,
      pool,
      ...(subdomain === undefined ? {} : { subdomain }),
    });
    inspector?.attach(client);
    return { client, ready: await client.start() };
  };
  const fail = (error: unknown): CliError => {
    inspector?.close();
    if (error instanceof TunnelRefusedError) return new CliError(`${error.code}: ${error.message}`, 1, error.code);
    return new CliError((error as Error).message, 1, 'EDGE_UNREACHABLE');
  };

  // Without --subdomain, the name this port got from this edge last time: a restart keeps the URL.
  const chosen = parsed.values.subdomain?.toLowerCase();
  let remembered = chosen === undefined ? rememberedName(credentials.edge, target.port) : undefined;
  // A name this account has live is refused (a second `burrow http` of the same port): then this one
  // takes a new name, and the memory stays the first one's; --replace takes the name over instead.
  let remember = chosen === undefined;
  if (remembered !== undefined && parsed.values.replace !== true && (await liveTunnel(credentials.edges, token, remembered))) {
    warn('SUBDOMAIN_TAKEN', `the subdomain of last time, ${remembered}, is live in another tunnel of this account; this one gets a new one`);
    remembered = undefined;
    remember = false;
  }
  let opened: { client: MultiEdgeTunnel; ready: ReadyInfo };
  try {
    opened = await open(chosen ?? remembered);
  } catch (error) {
    if (remembered === undefined || !(error instanceof TunnelRefusedError) || (error.code !== 'SUBDOMAIN_TAKEN' && error.code !== 'INVALID_REQUEST')) throw fail(error);
    try {
      opened = await open(undefined);
    } catch (again) {
      throw fail(again);
    }
    warn(error.code, `the subdomain of last time, ${remembered}, is not available (${error.code}); this tunnel has a new one, ${opened.ready.subdomain}`);
  }
  const { client, ready } = opened;
  // Signals first: whoever waits for the Forwarding line may stop us at once, and a clean stop tells the edge.
  const stop = (): void => {
    // A pool member hands its requests to the others: nothing in flight fails.
    void (pool ? client.leave('the client was stopped (Ctrl-C)') : client.close('the client was stopped (Ctrl-C)'));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  if (remember) {
    try {
      rememberName(credentials.edge, target.port, ready.subdomain);
    } catch (error) {
      warn('INTERNAL_ERROR', `cannot remember the subdomain for next time: ${(error as Error).message}`);
    }
  }
  const forwarding = forwardingLines(ready.publicUrl, table);
  if (events !== null) {
    events({ event: 'ready', subdomain: ready.subdomain, url: ready.publicUrl, forwarding, inspector: inspector?.url ?? null });
  } else {
    out.write(forwarding.map((line) => `Forwarding ${line}\n`).join(''));
    if (inspector !== null) out.write(`Inspector ${inspector.url}\n`);
  }
  // A local server that is not running yet is worth a word now rather than a 502 later; the tunnel stays up.
  for (const local of table.targets()) {
    void localProblem(local).then((problem) => {
      if (problem === null) return;
      warn('LOCAL_UNREACHABLE', `nothing answers on ${local.authority} (${problem}); requests to it get 502 LOCAL_UNREACHABLE until a server listens there`, { port: local.port });
    });
  }

  /** The request lines' writer (line mode), flushed before a line written directly, so the order holds. */
  let requestLines: LineWriter | null = null;
  const live = out.isTTY === true && logFormat === undefined && !json ? new StatusBlock(client, table, inspector?.url ?? null, out) : null;
  if (events !== null) {
    client.on('exchange', (exchange: Exchange) => events(requestEvent(exchange)));
    client.on('websocket', (exchange: Exchange) => events({ event: 'websocket', ...webSocketFields(exchange) }));
    client.on('reconnecting', ({ attempt, delayMs, reason, edge }) => events({ event: 'reconnect', attempt, delay_ms: delayMs, reason, edge }));
    client.on('ready', (info) => {
      if (info.movedFrom !== null) {
        events({ event: 'failover', from: info.movedFrom.edge, to: info.edge, cause: info.movedFrom.cause, subdomain: info.subdomain, url: info.publicUrl });
      }
      if (info.reconnected) events({ event: 'ready', subdomain: info.subdomain, url: info.publicUrl, forwarding: forwardingLines(info.publicUrl, table), reconnected: true });
    });
    followCluster(client, events, null);
  } else if (live === null) {
    const jsonLog = logFormat === 'json';
    // Under load a tunnel logs tens of thousands of requests a second; into /dev/null that is waste.
    if (!writesToNull(1)) {
      const lines = batchedWriter(out);
      requestLines = lines;
      client.on('exchange', (exchange: Exchange) => lines(jsonLog ? jsonLine(exchange) : textLine(exchange)));
      // WebSockets too: a line when one opens (or is refused) and one when it closes.
      client.on('websocket', (exchange: Exchange) => lines(jsonLog ? webSocketJsonLine(exchange) : webSocketLine(exchange)));
    }
    client.on('reconnecting', ({ attempt, delayMs, reason, edge }) => {
      if (delayMs === 0) process.stderr.write(`burrow: ${reason}; trying the next edge, ${edge}\n`);
      else process.stderr.write(`burrow: ${reason}; reconnecting in ${delayMs} ms (attempt ${attempt})\n`);
    });
    client.on('ready', (info) => {
      if (info.movedFrom !== null) process.stderr.write(`${movedLine(info)}\n`);
      requestLines?.flush();
      if (info.reconnected) out.write(`Reconnected: forwarding ${info.publicUrl} -> ${target.origin}\n`);
    });
    followCluster(client, null, null);
  } else {
    live.start(ready.publicUrl);
  }

  return new Promise<number>((resolve) => {
    client.on('closed', (info) => {
      live?.stop();
      inspector?.close();
      let code = 0;
      if (events !== null) {
        if (!info.byUser) events({ event: 'error', code: info.code, message: info.reason });
        events({ event: 'closed', by_user: info.byUser, code: info.code, reason: info.reason });
        if (!info.byUser) code = 1;
      } else if (info.byUser) {
        requestLines?.flush();
        out.write('tunnel closed\n');
      } else {
        process.stderr.write(`burrow: tunnel closed by the edge: ${info.code}: ${info.reason}\n`);
        code = 1;
      }
      // Nothing should keep the process up now; if something does, it must not hold Ctrl-C hostage.
      setTimeout(() => process.exit(code), 2_000).unref();
      resolve(code);
    });
  });
}

/**
 * --json: one JSON object per line per event. Request and WebSocket events are batched; any other event
 * (few: ready, warning, reconnect, closed...) is written at once, after the batch before it.
 */
export function jsonEvents(out: NodeJS.WritableStream): (event: Record<string, unknown>) => void {
  const lines = batchedWriter(out);
  // A request's path and a WebSocket's close reason are the public client's text: no control character out.
  return (event) => {
    lines(`${controlSafeJson(event)}\n`);
    if (event.event !== 'request' && event.event !== 'websocket') lines.flush();
  };
}

export function requestEvent(exchange: Exchange): Record<string, unknown> {
  return {
    event: 'request',
    id: exchange.id,
    method: exchange.method,
    path: exchange.path,
    status: exchange.status,
    duration_ms: round(exchange.latencyMs),
    port: exchange.port,
    received_at: new Date(exchange.startedAt).toISOString(),
    error: exchange.error,
    ...(exchange.replayOf === null ? {} : { replay_of: exchange.replayOf }),
  };
}

/**
 * What a tunnel says of its cluster: how many edges serve it when that changes, and its edges' store
 * (one line when it becomes unavailable, one when it is back). --json events `edges` and `store`; `name`
 * is `burrow start`'s tunnel name.
 */
export function followCluster(client: Tunnel, events: ((event: Record<string, unknown>) => void) | null, name: string | null): void {
  const label = name === null ? '' : `tunnel ${name}: `;
  const tunnel = name === null ? {} : { tunnel: name };
  client.on('edges', ({ count }) => {
    if (events !== null) events({ event: 'edges', ...tunnel, count });
    else if (count > 0) process.stderr.write(`burrow: ${label}served by ${count} edge${count === 1 ? '' : 's'} of the cluster\n`);
  });
  client.on('store', ({ available, edge, message }) => {
    if (events !== null) events({ event: 'store', ...tunnel, available, edge, message });
    else if (available) process.stderr.write(`burrow: ${label}the cluster store is available again (edge ${edge})\n`);
    else process.stderr.write(`burrow: ${label}the cluster store is unavailable (edge ${edge}: ${message})\n`);
  });
}

/** --edges K, else the config file's `edges`, else the default (MultiEdgeTunnel's). */
export function edgesOption(flag: string | undefined, config: ConfigFile | null): number | undefined {
  if (flag === undefined) return config?.edgesPerTunnel;
  const edges = Number(flag);
  if (!/^[0-9]+$/.test(flag) || edges < 1 || edges > MAX_EDGES_PER_TUNNEL) throw new UsageError(`--edges must be a whole number from 1 to ${MAX_EDGES_PER_TUNNEL}, not "${flag}"`);
  return edges;
}

/** "burrow: edge A went away (cause); reconnected to B as NAME": a failover, said once. */
export function movedLine(info: ReadyInfo): string {
  return `burrow: edge ${info.movedFrom?.edge ?? '?'} went away (${info.movedFrom?.cause ?? 'connection lost'}); reconnected to ${info.edge} as ${info.subdomain}`;
}

/** Whether the account has a live tunnel on `subdomain` (false too when the edge cannot say). */
async function liveTunnel(edges: string[], token: string, subdomain: string): Promise<boolean> {
  try {
    await new ApiClient(edges, token).call('GET', `/api/v1/tunnels/${encodeURIComponent(subdomain)}`);
    return true;
  } catch {
    return false;
  }
}

/** Why nothing accepts a TCP connection on the target (ECONNREFUSED...), or null when something does. */
export function localProblem(target: LocalTarget): Promise<string | null> {
  return new Promise((resolve) => {
    // Dialled as the client dials it: `localhost` on both loopbacks.
    const { lookup, autoSelectFamily } = dialOptions(target, true);
    const socket = connect({ host: target.host, port: target.port, ...(lookup === undefined ? {} : { lookup, autoSelectFamily }) });
    socket.setTimeout(2_000, () => {
      socket.destroy();
      resolve('no answer in 2 s');
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve(null);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? (error as { errors?: NodeJS.ErrnoException[] }).errors?.[0]?.code ?? error.message));
  });
}

/**
 * Before anything reaches the edge, for every command that opens tunnels: no token in clear text to an
 * edge off this machine (without --insecure); the CA (--ca, else BURROW_CA, else burrow.yml's, else the
 * one "burrow login --ca" saved) read; and the inspector's requests to the edge (history, replays),
 * which go through undici's global dispatcher, given the same trust and addresses (--resolve rules), and
 * localhost names resolved as the tunnel's own connection resolves them. Returns the CA's PEM.
 */
export function edgeAccess(credentials: Credentials, insecure: boolean): string | undefined {
  for (const edge of credentials.edges) {
    const refusal = cleartextRefusal(edge, insecure);
    if (refusal !== null) throw new CliError(refusal);
  }
  const ca = credentials.ca === undefined ? undefined : readCaFile(credentials.ca.path, credentials.ca.from);
  useForEdgeRequests(ca, credentials.resolve);
  return ca;
}

/** The inspector at `address` (null: none); a port it cannot take ends the command, saying how to choose another. */
export async function startInspector(address: ReturnType<typeof inspectorAddress>, credentials: Credentials, token: string, choose: string): Promise<Inspector | null> {
  if (address === null) return null;
  try {
    return await Inspector.start({ ...address, edge: credentials.edge, token });
  } catch (error) {
    throw new CliError(`${(error as Error).message}; choose another with ${choose}, or --no-inspect`);
  }
}

/** --no-inspect, else --inspect ADDR, else burrow.yml's `inspect` (off, or exactly ADDR), else 4040 and up. */
export function inspectorAddress(flags: { inspect?: string | undefined; 'no-inspect'?: boolean | undefined }, config: ConfigFile | null): { host: string; port: number; portTries: number } | null {
  if (flags['no-inspect'] === true && flags.inspect !== undefined) throw new UsageError('give --inspect or --no-inspect, not both');
  if (flags['no-inspect'] === true) return null;
  if (flags.inspect === undefined) {
    if (config?.inspect === null) return null;
    if (config?.inspect !== undefined) return { ...config.inspect, portTries: 0 };
    return { host: DEFAULT_INSPECT_HOST, port: DEFAULT_INSPECT_PORT, portTries: DEFAULT_PORT_TRIES - 1 };
  }
  const address = parseInspectAddress(flags.inspect);
  if (typeof address === 'string') throw new UsageError(`--inspect ${address}`);
  return { ...address, portTries: 0 };
}

export function forwardingLines(publicUrl: string, table: RouteTable): string[] {
  return [
    `${publicUrl} -> ${table.defaultTarget.origin}`,
    ...table.rules.map((route) => `${publicUrl}${route.prefix} -> ${route.target.origin}${route.stripPrefix === true ? ' (prefix stripped)' : ''}`),
  ];
}

/** Whether file descriptor `fd` is /dev/null (a benchmark or service discarding the log). */
export function writesToNull(fd: number): boolean {
  try {
    const target = fstatSync(fd);
    const nul = statSync('/dev/null');
    return target.isCharacterDevice() && target.rdev === nul.rdev;
  } catch {
    return false;
  }
}

/** How long a line waits for later ones before they are written together, at most. */
export const LINE_BATCH_MS = 25;
/** Waiting lines written at once past this many characters. */
const LINE_BATCH_CHARS = 64 * 1024;

/** Writes lines in batches; `flush` writes what waits now (before a line written some other way). */
export interface LineWriter {
  (line: string): void;
  flush(): void;
}

/**
 * Lines written together at most LINE_BATCH_MS after the first of them, not one write each: under load a
 * tunnel logs tens of thousands of requests a second, and at one request at a time a write at each turn's
 * end cost a write and one more event-loop turn per request (the client's syscalls at one connection:
 * 9.6 → 7.7 a request; bench/RESULTS.md, issue 25's tuning log). What waits is written when the process
 * exits.
 */
export function batchedWriter(out: NodeJS.WritableStream): LineWriter {
  let pending = '';
  let timer: NodeJS.Timeout | null = null;
  const flush = (): void => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    waitingAtExit.delete(flush);
    if (pending === '') return;
    const text = pending;
    pending = '';
    out.write(text);
  };
  const write = (line: string): void => {
    if (pending === '') waitingAtExit.add(flush);
    pending += line;
    if (pending.length >= LINE_BATCH_CHARS) flush();
    else if (timer === null) {
      timer = setTimeout(flush, LINE_BATCH_MS);
      timer.unref();
    }
  };
  if (!exitHooked) {
    exitHooked = true;
    // process.stdout and stderr write synchronously on Linux (files, pipes and terminals), so this lands.
    process.once('exit', () => {
      for (const waiting of [...waitingAtExit]) waiting();
    });
  }
  return Object.assign(write, { flush });
}

/** The flushes of writers with lines waiting: one exit hook writes them all. */
const waitingAtExit = new Set<() => void>();
let exitHooked = false;

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

export function textLine(exchange: Exchange): string {
  const status = exchange.error !== null && exchange.status === 0 ? 'ERR' : String(exchange.status);
  return `${escapeControls(exchange.method)} ${escapeControls(exchange.path)} ${status} ${round(exchange.latencyMs)}ms${exchange.error !== null ? ` ${exchange.error}` : ''}\n`;
}

/** A WebSocket connection's state at this event: 'open', 'closed', or 'refused' (not 101, or failed). */
function webSocketState(exchange: Exchange): 'open' | 'closed' | 'refused' {
  if (exchange.status !== 101) return 'refused';
  return exchange.websocket?.closedAt === null ? 'open' : 'closed';
}

/** "WS /chat 101 open", "WS /chat closed 1000 after 12.3 s (4 in, 3 out)", "WS /chat 403" (line mode). */
export function webSocketLine(exchange: Exchange): string {
  const log = exchange.websocket!;
  const state = webSocketState(exchange);
  const path = escapeControls(exchange.path);
  if (state === 'open') return `WS ${path} 101 open\n`;
  if (state === 'refused') {
    const status = exchange.status === 0 ? 'ERR' : String(exchange.status);
    return `WS ${path} ${status}${exchange.error === null ? '' : ` ${exchange.error}`}\n`;
  }
  const seconds = Math.round(((log.closedAt ?? log.openedAt) - log.openedAt) / 100) / 10;
  // Either side may close with any reason text: the public client's included.
  const reason = log.closeReason === '' ? '' : ` ${escapeControls(log.closeReason)}`;
  return `WS ${path} closed ${log.closeCode ?? '-'}${reason} after ${seconds} s (${log.messagesIn} in, ${log.messagesOut} out)\n`;
}

/** The same as JSON fields (--log json lines; --json's "websocket" events). */
export function webSocketFields(exchange: Exchange): Record<string, unknown> {
  const log = exchange.websocket!;
  const state = webSocketState(exchange);
  return {
    websocket: state,
    id: exchange.id,
    path: exchange.path,
    status: exchange.status,
    port: exchange.port,
    opened_at: new Date(log.openedAt).toISOString(),
    error: exchange.error,
    ...(state === 'closed'
      ? { close_code: log.closeCode, close_reason: log.closeReason, duration_ms: (log.closedAt ?? log.openedAt) - log.openedAt, messages_in: log.messagesIn, messages_out: log.messagesOut }
      : {}),
  };
}

/** `--log json`'s line for a WebSocket: its fields, control-safe. */
export function webSocketJsonLine(exchange: Exchange): string {
  return `${controlSafeJson(webSocketFields(exchange))}\n`;
}

export function jsonLine(exchange: Exchange): string {
  return `${controlSafeJson({
    id: exchange.id,
    method: exchange.method,
    path: exchange.path,
    status: exchange.status,
    latency_ms: round(exchange.latencyMs),
    port: exchange.port,
    received_at: new Date(exchange.startedAt).toISOString(),
    error: exchange.error,
  })}\n`;
}

// ---- the terminal's status block ----------------------------------------------------------------------

export interface RecentRequest {
  method: string;
  path: string;
  status: number;
  error: string | null;
  latencyMs: number;
}

export interface StatusView {
  session: 'online' | 'reconnecting' | 'closed';
  /** Why it is reconnecting, when it is. */
  detail: string;
  forwarding: string[];
  inspector: string | null;
  openStreams: number;
  requests: number;
  errors: number;
  bytesIn: number;
  bytesOut: number;
  /** Newest last. */
  recent: readonly RecentRequest[];
  /** In a cluster: how many edges serve the tunnel, and the store's state when an edge reports it unavailable. */
  cluster?: string;
}

export interface RenderOptions {
  color: boolean;
  /** Terminal columns: every line is cut to fit, so the block never wraps. */
  width: number;
}

/** The status block's lines, pure (tested on its own). */
export function renderStatus(view: StatusView, options: RenderOptions): string[] {
  const paint = (code: string, text: string): string => (options.color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const label = (text: string): string => paint('2', text.padEnd(12));
  const lines: [string, number][] = [];
  const add = (text: string, visible: number): void => {
    lines.push([text, visible]);
  };
  const plain = (text: string): void => add(text, text.length);
  const labelled = (name: string, value: string, colored = value): void => add(`${label(name)}${colored}`, 12 + value.length);

  plain('Burrow  (Ctrl-C to quit)');
  plain('');
  const sessionText = view.session === 'online' ? 'online' : view.session === 'reconnecting' ? `reconnecting${view.detail === '' ? '' : ` (${view.detail})`}` : 'closed';
  labelled('Session', sessionText, paint(view.session === 'online' ? '32' : view.session === 'reconnecting' ? '33' : '31', sessionText));
  view.forwarding.forEach((line, index) => labelled(index === 0 ? 'Forwarding' : '', line));
  if (view.cluster !== undefined && view.cluster !== '') labelled('Cluster', view.cluster, paint(view.cluster.includes('unavailable') ? '33' : '0', view.cluster));
  if (view.inspector !== null) labelled('Inspector', view.inspector);
  labelled(
    'Connections',
    `${view.openStreams} open · ${view.requests} requests · ${view.errors} errors · ${bytes(view.bytesIn)} in · ${bytes(view.bytesOut)} out`,
  );
  plain('');
  plain(paint('1', 'Requests'));
  if (view.recent.length === 0) plain(paint('2', 'none yet'));
  const pathWidth = Math.max(10, Math.min(60, options.width - 32));
  for (let i = view.recent.length - 1; i >= 0; i--) {
    const request = view.recent[i]!;
    const status = request.error !== null && request.status === 0 ? 'ERR' : String(request.status);
    const shown = escapeControls(request.path);
    const path = shown.length > pathWidth ? `${shown.slice(0, pathWidth - 1)}…` : shown.padEnd(pathWidth);
    const latency = `${round(request.latencyMs)} ms`.padStart(10);
    const head = `${escapeControls(request.method).padEnd(7)} ${path} `;
    const reason = request.error === null ? '' : `  ${request.error}`;
    add(`${head}${paint(statusColor(request), status.padEnd(4))}${latency}${paint('2', reason)}`, head.length + 4 + latency.length + reason.length);
  }
  return lines.map(([text, visible]) => (visible <= options.width - 1 ? text : cut(text, options.width - 1, options.color)));
}

function statusColor(request: RecentRequest): string {
  if (request.status === 0 || request.status >= 500) return '31';
  if (request.status >= 400) return '33';
  if (request.status >= 300) return '36';
  return '32';
}

/** Cuts a line to `width` visible characters, keeping colour sequences whole and resetting at the end. */
function cut(text: string, width: number, color: boolean): string {
  let visible = 0;
  let result = '';
  for (let i = 0; i < text.length && visible < width; ) {
    if (text.charCodeAt(i) === 27) {
      const end = text.indexOf('m', i);
      result += text.slice(i, end + 1);
      i = end + 1;
      continue;
    }
    result += text[i];
    visible++;
    i++;
  }
  return color ? `${result}\x1b[0m` : result;
}

function bytes(count: number): string {
  if (count < 1024) return `${count} B`;
  if (count < 1024 * 1024) return `${(count / 1024).toFixed(1)} KiB`;
  if (count < 1024 * 1024 * 1024) return `${(count / 1024 / 1024).toFixed(1)} MiB`;
  return `${(count / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

/** A pseudo-terminal without a size (a test's `script`, some CI) reports 0 columns. */
function terminalWidth(out: NodeJS.WriteStream): number {
  if (out.columns !== undefined && out.columns > 0) return out.columns;
  const fromEnv = Number(process.env.COLUMNS);
  return Number.isInteger(fromEnv) && fromEnv > 20 ? fromEnv : 100;
}

/** Redraws the status block in place, below what was printed before it, at most every REDRAW_MS. */
class StatusBlock {
  private readonly recent: RecentRequest[] = [];
  private session: StatusView['session'] = 'online';
  private detail = '';
  private forwarding: string[] = [];
  private edges = 0;
  private storeDown: string | null = null;
  private dirty = true;
  private drawn = 0;
  private timer: NodeJS.Timeout | null = null;
  private ticks = 0;
  private readonly color: boolean;

  constructor(
    private readonly client: Tunnel,
    private readonly table: RouteTable,
    private readonly inspector: string | null,
    private readonly out: NodeJS.WriteStream,
  ) {
    const noColor = process.env.NO_COLOR;
    this.color = (noColor === undefined || noColor === '') && process.env.TERM !== 'dumb';
  }

  start(publicUrl: string): void {
    this.forwarding = forwardingLines(publicUrl, this.table);
    this.client.on('exchange', (exchange) => {
      // Only what the block shows: no reference to the bodies is kept.
      this.recent.push({ method: exchange.method, path: exchange.path, status: exchange.status, error: exchange.error, latencyMs: exchange.latencyMs });
      if (this.recent.length > RECENT) this.recent.shift();
      this.dirty = true;
    });
    this.client.on('websocket', (exchange) => {
      if (exchange.websocket?.closedAt !== null && exchange.status === 101) return;
      this.recent.push({ method: 'WS', path: exchange.path, status: exchange.status, error: exchange.error, latencyMs: 0 });
      if (this.recent.length > RECENT) this.recent.shift();
      this.dirty = true;
    });
    this.client.on('reconnecting', ({ attempt, delayMs, reason, edge }) => {
      this.session = 'reconnecting';
      this.detail = delayMs === 0 ? `trying ${edge}: ${reason}` : `attempt ${attempt} in ${delayMs} ms: ${reason}`;
      this.dirty = true;
    });
    this.client.on('ready', (info) => {
      this.session = 'online';
      this.detail = '';
      this.forwarding = forwardingLines(info.publicUrl, this.table);
      this.dirty = true;
    });
    this.client.on('edges', ({ count }) => {
      this.edges = count;
      this.dirty = true;
    });
    this.client.on('store', ({ available, edge, message }) => {
      this.storeDown = available ? null : `edge ${edge}: ${message}`;
      this.dirty = true;
    });
    this.out.on('resize', () => {
      this.dirty = true;
    });
    this.out.write('\x1b[?25l'); // hide the cursor while the block lives
    this.draw();
    this.timer = setInterval(() => {
      // Open streams and byte counts change without events: refresh once a second regardless.
      if (++this.ticks % 10 === 0) this.dirty = true;
      if (this.dirty) this.draw();
    }, REDRAW_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.session = 'closed';
    this.draw();
    this.out.write('\x1b[?25h');
  }

  private draw(): void {
    this.dirty = false;
    const lines = renderStatus(
      {
        session: this.session,
        detail: this.detail,
        forwarding: this.forwarding,
        inspector: this.inspector,
        openStreams: this.client.activeStreams,
        requests: this.client.stats.requests,
        errors: this.client.stats.errors,
        bytesIn: this.client.stats.bytesIn,
        bytesOut: this.client.stats.bytesOut,
        recent: this.recent,
        cluster: [...(this.edges > 1 ? [`served by ${this.edges} edges`] : []), ...(this.storeDown === null ? [] : [`store unavailable (${this.storeDown})`])].join(' · '),
      },
      { color: this.color, width: terminalWidth(this.out) },
    );
    // Up to where the previous block began, clear from there down, draw the new one.
    const up = this.drawn > 0 ? `\x1b[${this.drawn}F\x1b[0J` : '';
    this.out.write(`${up}${lines.join('\n')}\n`);
    this.drawn = lines.length;
  }
}
