/**
 * `burrow start NAME... | --all`: the named tunnels of burrow.yml (docs/config.md) in one process, with
 * one inspector for all of them. Each tunnel prints its "Forwarding <public URL> -> <target>" line(s)
 * once live, exactly as `burrow http` does; request lines carry the tunnel's name, and so does every
 * --json event.
 *
 * A tunnel the edge refuses for good (a name taken, a plan's cap) or closes for good is reported and
 * the others keep running; the process ends when none is left, or on Ctrl-C, which closes them all. The
 * exit code is 0 when every tunnel ran until Ctrl-C, 1 when any could not start or was ended by the edge.
 */
import { CliError, parse, UsageError } from '../args.js';
import { requireToken, resolveCredentials, type Credentials } from '../config.js';
import { formatProblem, loadConfig, type ConfigFile, type TunnelConfig } from '../config-file.js';
import type { Exchange } from '../../client/exchange.js';
import { localTarget, RouteTable } from '../../client/routes.js';
import { policySpecFromFlags } from '../../protocol/policy.js';
import { TunnelRefusedError, type ClosedInfo, type ReadyInfo, type TunnelClient } from '../../client/tunnel-client.js';
import type { BoundTunnelOptions } from '../../client/bound-tunnel.js';
import { MultiEdgeBoundTunnel, MultiEdgeTunnel } from '../../client/multi-edge.js';
import { connectionLine } from './tcp.js';
import {
  batchedWriter,
  edgeAccess,
  edgesOption,
  followCluster,
  forwardingLines,
  INSPECTOR_BODY_LIMIT,
  inspectorAddress,
  jsonEvents,
  jsonLine,
  localProblem,
  movedLine,
  requestEvent,
  startInspector,
  textLine,
  webSocketFields,
  webSocketJsonLine,
  webSocketLine,
  writesToNull,
} from './http.js';

const HELP = `
Usage: burrow start (NAME... | --all) [--config FILE] [--edge URL ...] [--token T] [--ca FILE]
                    [--resolve HOST:PORT:ADDRESS ...] [--insecure] [--edges K]
                    [--inspect ADDR | --no-inspect] [--log text|json] [--json]

Runs the tunnels named in burrow.yml (docs/config.md), or all of them, in one process with one
inspector. The file is --config FILE, else BURROW_CONFIG, else ./burrow.yml, else burrow.yml in the
user config directory ("burrow config path" says which; "burrow config check" checks it).

Each tunnel prints "Forwarding <public URL> -> <target>" once it is live, as "burrow http" does, and
reconnects by itself. A tunnel the edge refuses (its subdomain taken, the plan's tunnel cap) or ends
(closed through the API, token revoked) is reported and the others keep running. Ctrl-C closes them
all. Exit code: 0 when every tunnel ran until Ctrl-C; 1 when one could not start or was ended by the
edge (the process ends at once when no tunnel is left).

Every tunnel rides one connection. In a cluster (the edge says so when it connects) that connection
is kept to --edges edges at once (2 by default), each carrying every tunnel: each of them serves the
tunnels without the edges' internal hop, and losing one costs only the requests in flight on it. One
line says how many edges serve the tunnels when that changes, one when the cluster's store becomes
unavailable and one when it is back.

Request lines start with the tunnel's name; the inspector (http://127.0.0.1:4040, or the next free
port up to 4059) shows every tunnel's requests, and each connection of its tcp and tls tunnels, each
marked with its name. Without "subdomain" in the file a tunnel gets a new name each time: set it, and
reserve it (burrow reserve NAME) to keep it.

Edge, token, CA, inspector and log format: the flags, then BURROW_EDGE / BURROW_TOKEN / BURROW_CA,
then the file, then what "burrow login" saved.

Options:
  --all              run every tunnel of the file
  --config FILE      the config file (default: BURROW_CONFIG, ./burrow.yml, the user's burrow.yml)
  --edge URL         the edge (repeatable: failover order); default: BURROW_EDGE, the file, the login
  --token T          the token (default: BURROW_TOKEN, the file's token_env or token, the login's)
  --ca FILE          trust this CA (PEM) for an https:// edge (default: BURROW_CA, the file's ca)
  --resolve HOST:PORT:ADDRESS
                     connect to ADDRESS for the edge URL's HOST and PORT, without DNS (like curl
                     --resolve; repeatable; default: BURROW_RESOLVE, comma-separated)
  --insecure         allow sending the token over plain http:// to an edge not on this machine
  --edges K          in a cluster, keep the connection to K edges at once, each carrying every
                     tunnel (1 to 8; default: the file's edges, else 2); 1 keeps one connection
  --inspect ADDR     the inspector's address: PORT or HOST:PORT on a loopback address
  --no-inspect       no inspector: no bodies or WebSocket messages are kept
  --log text|json    one line per request and per WebSocket opened and closed (default: the
                     file's log, else text)
  --json             one JSON object per line per event, each with "tunnel": ready, request,
                     websocket, reconnect, failover, edges and store (no tunnel), warning, error,
                     closed
  -h, --help         show this help
`;

/** The settings every tunnel of one `burrow start` shares. */
interface SharedConnection {
  edges: string[];
  token: string;
  ca: string | undefined;
  insecure: boolean;
  resolve: Credentials['resolve'];
  recording: boolean;
  /** `--edges K`, else the file's `edges` (MultiEdgeTunnel's default without either). */
  edgesPerTunnel: number | undefined;
}

/**
 * The connections every tunnel of the file rides (docs/protocol.md section 18): one, and in a cluster one
 * per edge it is attached to (`--edges K`, src/client/multi-edge.ts). A connection names no tunnel
 * itself; each tunnel is bound on each of them (`onSession`) after its READY, again after each reconnect.
 */
function openConnections(shared: SharedConnection, onSession: (session: TunnelClient) => void): MultiEdgeTunnel {
  return new MultiEdgeTunnel({
    edge: shared.edges,
    token: shared.token,
    // Serves nothing and is never dialled (bindOnly): each tunnel has its own routes.
    routes: new RouteTable(localTarget(1)),
    bindOnly: true,
    recordLimit: shared.recording ? INSPECTOR_BODY_LIMIT : 0,
    ...(shared.ca === undefined ? {} : { ca: shared.ca }),
    insecure: shared.insecure,
    resolve: shared.resolve,
    ...(shared.edgesPerTunnel === undefined ? {} : { edgesPerTunnel: shared.edgesPerTunnel }),
    onSession,
  });
}

/** The one place a tunnel of the file becomes what a connection binds. */
function bindingOf(tunnel: TunnelConfig): BoundTunnelOptions {
  if (tunnel.kind !== 'http') {
    return {
      kind: tunnel.kind,
      routes: new RouteTable(localTarget(tunnel.port, tunnel.host)),
      ...(tunnel.kind === 'tls' && tunnel.subdomain !== undefined ? { subdomain: tunnel.subdomain } : {}),
      ...(tunnel.remotePort === undefined ? {} : { remotePort: tunnel.remotePort }),
      proxyProtocol: tunnel.proxyProtocol,
      ...(tunnel.policy === undefined ? {} : { policy: policySpecFromFlags(tunnel.policy.flags)! }),
    };
  }
  return {
    routes: new RouteTable(tunnel.target, tunnel.routes),
    hostHeader: tunnel.hostHeader,
    localInsecure: tunnel.localInsecure,
    ...(tunnel.subdomain === undefined ? {} : { subdomain: tunnel.subdomain }),
    // Checked when the file was read (config-file.ts policyFlags), so it builds here.
    ...(tunnel.policy === undefined ? {} : { policy: policySpecFromFlags(tunnel.policy.flags)! }),
  };
}

/** "Forwarding" lines: an http tunnel's routes, or a tcp or tls tunnel's one target (host:port). */
function forwardingOf(tunnel: TunnelConfig, publicUrl: string, table: RouteTable): string[] {
  return tunnel.kind === 'http' ? forwardingLines(publicUrl, table) : [`${publicUrl} -> ${table.defaultTarget.authority}`];
}

export async function startCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      all: { type: 'boolean' },
      config: { type: 'string' },
      edge: { type: 'string', multiple: true },
      token: { type: 'string' },
      ca: { type: 'string' },
      resolve: { type: 'string', multiple: true },
      insecure: { type: 'boolean' },
      inspect: { type: 'string' },
      'no-inspect': { type: 'boolean' },
      log: { type: 'string' },
      json: { type: 'boolean' },
      edges: { type: 'string' },
    },
    HELP,
  );
  if (parsed === null) return 0;
  const { values } = parsed;
  const loaded = loadConfig(values.config);
  const config = loaded.config;
  if (config === null) {
    throw new CliError(`no burrow.yml: looked at ${loaded.lookup.looked.map((place) => place.path).join(', ')}; "burrow config edit" creates one, --config FILE names another`);
  }
  const json = values.json === true;
  const out = process.stdout;
  const events = json ? jsonEvents(out) : null;
  const warn = (tunnel: string | null, code: string, message: string): void => {
    if (events !== null) events({ event: 'warning', ...(tunnel === null ? {} : { tunnel }), code, message });
    else process.stderr.write(`burrow: warning: ${tunnel === null ? '' : `tunnel ${tunnel}: `}${message}\n`);
  };
  for (const warning of loaded.warnings) warn(null, 'CONFIG_WARNING', formatProblem(warning));
  const tunnels = selectTunnels(config, parsed.positionals, values.all === true);
  const logFormat = values.log ?? config.log;
  if (logFormat !== undefined && logFormat !== 'text' && logFormat !== 'json') throw new UsageError('--log must be text or json');
  const inspect = inspectorAddress(values, config);
  const credentials = resolveCredentials(values, process.env, config);
  const token = requireToken(credentials);
  const ca = edgeAccess(credentials, values.insecure === true);
  const inspector = await startInspector(inspect, credentials, token, `--inspect PORT, inspect: in ${config.path}`);
  if (inspector !== null && events === null) out.write(`Inspector ${inspector.url}\n`);
  const shared: SharedConnection = {
    edges: credentials.edges,
    token,
    ca,
    insecure: values.insecure === true,
    resolve: credentials.resolve,
    recording: inspector !== null,
    edgesPerTunnel: edgesOption(values.edges, config),
  };
  const width = Math.max(...tunnels.map((tunnel) => tunnel.name.length));
  const lines = json || writesToNull(1) ? null : batchedWriter(out);

  // Each tunnel of the file, bound on every connection (one per edge in a cluster) as each is made.
  const bound = new Map(tunnels.map((tunnel) => [tunnel.name, new MultiEdgeBoundTunnel(bindingOf(tunnel), (session, options) => session.bind(options).tunnel)]));
  const connection = openConnections(shared, (session) => {
    for (const tunnel of bound.values()) tunnel.bindOnSession(session);
  });
  const stop = (): void => {
    void connection.close('the client was stopped (Ctrl-C)');
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);

  /** Runs one tunnel until it ends; true when it ended by Ctrl-C. */
  const run = (tunnel: TunnelConfig): Promise<boolean> =>
    new Promise<boolean>((resolve) => {
      const failed = (code: string, message: string): void => {
        if (events !== null) {
          events({ event: 'error', tunnel: tunnel.name, code, message });
          events({ event: 'closed', tunnel: tunnel.name, by_user: false, code, reason: message });
        } else process.stderr.write(`burrow: tunnel ${tunnel.name} not started: ${code}: ${message}\n`);
        resolve(false);
      };
      const client = bound.get(tunnel.name)!;
      const started = client.started;
      const table = client.routes;
      const detach = inspector?.attach(client, tunnel.name);
      let settled = false;
      let live = false;
      client.once('closed', (info: ClosedInfo) => {
        // Its requests stay in the inspector; the tunnel leaves its status.
        detach?.();
        // Refused before it was ever live: `started` rejects, and says "not started".
        if (settled || (!live && !info.byUser)) return;
        settled = true;
        if (events !== null) {
          if (!info.byUser) events({ event: 'error', tunnel: tunnel.name, code: info.code, message: info.reason });
          events({ event: 'closed', tunnel: tunnel.name, by_user: info.byUser, code: info.code, reason: info.reason });
        } else if (!info.byUser) {
          process.stderr.write(`burrow: tunnel ${tunnel.name} closed by the edge: ${info.code}: ${info.reason}\n`);
        }
        resolve(info.byUser);
      });
      started.then(
        (ready: ReadyInfo) => {
          live = true;
          const forwarding = forwardingOf(tunnel, ready.publicUrl, table);
          if (events !== null) events({ event: 'ready', tunnel: tunnel.name, subdomain: ready.subdomain, url: ready.publicUrl, forwarding, inspector: inspector?.url ?? null });
          else {
            lines?.flush();
            out.write(forwarding.map((line) => `Forwarding ${line}\n`).join(''));
          }
          for (const local of table.targets()) {
            void localProblem(local).then((problem) => {
              if (problem !== null) warn(tunnel.name, 'LOCAL_UNREACHABLE', `nothing answers on ${local.authority} (${problem}); requests to it get 502 LOCAL_UNREACHABLE until a server listens there`);
            });
          }
          follow(client, tunnel, table);
        },
        (error: unknown) => {
          detach?.();
          if (settled) return;
          settled = true;
          if (error instanceof TunnelRefusedError) failed(error.code, error.message);
          else failed('EDGE_UNREACHABLE', (error as Error).message);
        },
      );
    });

  /** Request lines and connection events of a live tunnel. */
  const follow = (client: MultiEdgeBoundTunnel, tunnel: TunnelConfig, table: RouteTable): void => {
    const name = tunnel.name;
    const protocol = tunnel.kind === 'tls' ? 'TLS' : 'TCP';
    if (events !== null) {
      client.on('connection', (end) =>
        events({ event: 'connection', tunnel: name, id: end.id, client_address: end.clientAddress, client_port: end.clientPort, bytes_in: end.bytesIn, bytes_out: end.bytesOut, duration_ms: end.durationMs, error: end.error }),
      );
      client.on('exchange', (exchange: Exchange) => events({ event: 'request', tunnel: name, ...requestEvent(exchange) }));
      client.on('websocket', (exchange: Exchange) => events({ event: 'websocket', tunnel: name, ...webSocketFields(exchange) }));
      client.on('reconnecting', ({ attempt, delayMs, reason, edge }) => events({ event: 'reconnect', tunnel: name, attempt, delay_ms: delayMs, reason, edge }));
      client.on('ready', (info) => {
        if (info.movedFrom !== null) {
          events({ event: 'failover', tunnel: name, from: info.movedFrom.edge, to: info.edge, cause: info.movedFrom.cause, subdomain: info.subdomain, url: info.publicUrl });
        }
        if (info.reconnected) events({ event: 'ready', tunnel: name, subdomain: info.subdomain, url: info.publicUrl, forwarding: forwardingOf(tunnel, info.publicUrl, table), reconnected: true });
      });
      return;
    }
    if (lines !== null) {
      const label = name.padEnd(width);
      // --log json: the `burrow http` line with the tunnel's name first (names are plain words, no escaping).
      const prefix = `{"tunnel":${JSON.stringify(name)},`;
      client.on('exchange', (exchange: Exchange) => lines(logFormat === 'json' ? `${prefix}${jsonLine(exchange).slice(1)}` : `${label}  ${textLine(exchange)}`));
      // WebSockets too, as burrow http prints them: a line when one opens (or is refused) and when it closes.
      client.on('websocket', (exchange: Exchange) =>
        lines(logFormat === 'json' ? `${prefix}${webSocketJsonLine(exchange).slice(1)}` : `${label}  ${webSocketLine(exchange)}`),
      );
      client.on('connection', (end) => lines(`${label}  ${connectionLine(end, protocol)}`));
    }
    client.on('reconnecting', ({ attempt, delayMs, reason, edge }) => {
      if (delayMs === 0) process.stderr.write(`burrow: tunnel ${name}: ${reason}; trying the next edge, ${edge}\n`);
      else process.stderr.write(`burrow: tunnel ${name}: ${reason}; reconnecting in ${delayMs} ms (attempt ${attempt})\n`);
    });
    client.on('ready', (info) => {
      if (info.movedFrom !== null) process.stderr.write(`burrow: tunnel ${name}: ${movedLine(info).slice('burrow: '.length)}\n`);
      lines?.flush();
      if (info.reconnected) out.write(`Reconnected: forwarding ${forwardingOf(tunnel, info.publicUrl, table)[0]}\n`);
    });
  };

  // In a cluster: how many edges carry the connections, and the store lines, once for all the tunnels.
  followCluster(connection, events, null);

  const outcomes = Promise.all(tunnels.map(run));
  // Tunnels are bound after the connection's READY; a connection that never gets one ends them all.
  connection.start().catch((error: unknown) => {
    const code = error instanceof TunnelRefusedError ? error.code : 'EDGE_UNREACHABLE';
    connection.endTunnels({ reason: (error as Error).message, code, byUser: false });
  });
  await outcomes;
  inspector?.close();
  const ended = await outcomes;
  await connection.close('no tunnel left on the connection');
  const code = ended.every((byUser) => byUser) ? 0 : 1;
  lines?.flush();
  if (events === null && ended.some((byUser) => byUser)) out.write(`${tunnels.length === 1 ? 'tunnel' : 'tunnels'} closed\n`);
  // Nothing should keep the process up now; if something does, it must not hold Ctrl-C hostage.
  setTimeout(() => process.exit(code), 2_000).unref();
  return code;
}

/** The tunnels asked for, in the file's order: every one with --all, else those named (each once). */
function selectTunnels(config: ConfigFile, names: string[], all: boolean): TunnelConfig[] {
  if (all && names.length > 0) throw new UsageError('give tunnel names or --all, not both');
  if (!all && names.length === 0) throw new UsageError(`name the tunnels to start, or --all; ${config.path} has: ${config.tunnels.map((tunnel) => tunnel.name).join(', ') || 'none'}`);
  if (config.tunnels.length === 0) throw new CliError(`${config.path} has no tunnels; add one under "tunnels:" (docs/config.md)`);
  if (all) return config.tunnels;
  const known = new Set(config.tunnels.map((tunnel) => tunnel.name));
  const unknown = names.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new UsageError(`${config.path} has no tunnel ${unknown.map((name) => `"${name}"`).join(', ')}; it has: ${[...known].join(', ')}`);
  }
  return config.tunnels.filter((tunnel) => names.includes(tunnel.name));
}
