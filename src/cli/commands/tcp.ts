/**
 * `burrow tcp [host:]port`: a TCP tunnel (docs/tcp.md). The edge (started with --tcp-ports) gives it a
 * public port; every connection to that port is carried raw to the local target. One line per connection
 * when it ends (text or --json), and the edge records each one (address, start, duration, bytes each
 * way, how it ended), listed by `burrow requests tcp:PORT` and the API.
 *
 * `burrow tls [host:]port`: a TLS passthrough tunnel, the same on the edge's HTTPS port: a TLS connection
 * whose ClientHello names `<subdomain>.<domain>` is carried, unterminated, to the local server, which
 * holds the certificate.
 */
import { CONNECTION_OPTIONS } from '../api-client.js';
import { CliError, noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import { requireToken, resolveCredentials } from '../config.js';
import { loadConfig } from '../config-file.js';
import { RouteTable, parseTarget } from '../../client/routes.js';
import { TunnelClient, TunnelRefusedError } from '../../client/tunnel-client.js';
import type { RawConnectionEnd } from '../../client/raw-stream.js';
import { peerText } from '../../edge/raw-stream.js';
import { encodePolicyHeader, policySpecFromFlags } from '../../protocol/policy.js';
import { edgeAccess, jsonEvents, localProblem } from './http.js';

/** The options `burrow tcp` and `burrow tls` both take, for both helps. */
const SHARED_OPTIONS = `  --allow-cidr CIDR   only clients from these blocks may connect (repeatable); others are cut at once
  --deny-cidr CIDR    clients from these blocks may not connect (repeatable)
  --proxy-protocol    write a PROXY protocol v2 header naming the public client before each
                      connection's bytes (for nginx "proxy_protocol", HAProxy "accept-proxy", ...)
  --edge URL          the edge (repeatable: failover order); default: BURROW_EDGE, the config, the login
  --token T           the token (default: BURROW_TOKEN, the config file, the login)
  --ca FILE           trust this CA (PEM) for an https:// edge (default: BURROW_CA)
  --resolve HOST:PORT:ADDRESS
                      connect to ADDRESS for the edge URL's HOST and PORT, without DNS (repeatable)
  --insecure          allow sending the token over plain http:// to an edge not on this machine
  --json              one JSON object per line per event: ready, connection, reconnect, warning,
                      error, closed
  --config FILE       the config file whose edge, token and CA to use
  -h, --help          show this help
`;

const TLS_HELP = `
Usage: burrow tls [host:]port [--subdomain NAME] [--allow-cidr CIDR ...] [--deny-cidr CIDR ...]
                  [--proxy-protocol] [--edge URL ...] [--token T] [--ca FILE] [--resolve HOST:PORT:ADDRESS ...]
                  [--insecure] [--json] [--config FILE]

Opens a TLS passthrough tunnel: TLS connections to <name>.<domain> on the edge's HTTPS port are carried,
without the edge terminating them, to the local target (8443, 127.0.0.1:8443), which holds the
certificate: clients see the local server's own certificate, and the edge never sees the plaintext.
The same HTTPS port keeps serving the edge's terminated tunnels beside it (routed by the ClientHello's
server name, SNI). Prints "Forwarding tls://NAME.DOMAIN:PORT -> host:port" once live; reconnects by
itself, keeping the name; Ctrl-C closes it. Needs an edge with --tls-cert.

Each connection is recorded by the edge (burrow requests NAME) and printed here when it ends:
  TLS 203.0.113.7:51234 closed 1.2 kB in, 3.4 kB out, 5.0 s

Options:
  --subdomain NAME    ask for this name (default: one is made up); a name reserved for HTTP
                      tunnels is refused
${SHARED_OPTIONS}`;

const HELP = `
Usage: burrow tcp [host:]port [--remote-port N] [--allow-cidr CIDR ...] [--deny-cidr CIDR ...]
                  [--proxy-protocol] [--edge URL ...] [--token T] [--ca FILE] [--resolve HOST:PORT:ADDRESS ...]
                  [--insecure] [--json] [--config FILE]

Opens a TCP tunnel: connections to the public port the edge gives are carried, byte for byte, to the
local target (22, 127.0.0.1:5432, [::1]:6379, db.lan:3306; a port alone is localhost, tried on
127.0.0.1 and ::1). Prints "Forwarding tcp://HOST:PORT -> host:port" once live; reconnects by itself,
asking for the same public port; Ctrl-C closes it. Needs an edge started with --tcp-ports.

Each connection is recorded by the edge (client address and port, start, duration, bytes each way, how
it ended: burrow requests tcp:PORT) and printed here when it ends:
  TCP 203.0.113.7:51234 closed 1.2 kB in, 3.4 kB out, 5.0 s

Options:
  --remote-port N     ask for this public port (in the edge's range; one another account reserved
                      is refused, keep your own with burrow reserve --tcp N); default: the edge
                      picks a free one, and this client's reconnects ask for it again
${SHARED_OPTIONS}`;

function size(bytes: number): string {
  return bytes < 1000 ? `${bytes} B` : bytes < 1_000_000 ? `${(bytes / 1000).toFixed(1)} kB` : `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/** The line a connection leaves when it ends. */
export function connectionLine(end: RawConnectionEnd, protocol: 'TCP' | 'TLS' = 'TCP'): string {
  const how = end.error === null ? 'closed' : `cut (${end.error})`;
  return `${protocol} ${peerText(end.clientAddress, end.clientPort)} ${how} ${size(end.bytesIn)} in, ${size(end.bytesOut)} out, ${(end.durationMs / 1000).toFixed(1)} s`;
}

export function tcpCommand(args: string[]): Promise<number> {
  return rawTunnelCommand('tcp', args);
}

export function tlsCommand(args: string[]): Promise<number> {
  return rawTunnelCommand('tls', args);
}

async function rawTunnelCommand(kind: 'tcp' | 'tls', args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      'remote-port': { type: 'string' },
      subdomain: { type: 'string' },
      'allow-cidr': { type: 'string', multiple: true },
      'deny-cidr': { type: 'string', multiple: true },
      'proxy-protocol': { type: 'boolean' },
      ...CONNECTION_OPTIONS,
      config: { type: 'string' },
    },
    kind === 'tcp' ? HELP : TLS_HELP,
  );
  if (parsed === null) return 0;
  const help = kind === 'tcp' ? HELP : TLS_HELP;
  const targetText = requirePositional(parsed, 0, 'the local target ([host:]port)', help);
  noExtraPositionals(parsed, 1, help);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(targetText)) throw new UsageError(`a ${kind.toUpperCase()} target is [host:]port, without a scheme`);
  if (kind === 'tcp' && parsed.values.subdomain !== undefined) throw new UsageError('a TCP tunnel has a public port, not a subdomain: --remote-port N');
  if (kind === 'tls' && parsed.values['remote-port'] !== undefined) throw new UsageError("a TLS tunnel is reached on the edge's HTTPS port by its name: --subdomain NAME");
  const target = parseTarget(targetText);
  if (typeof target === 'string') throw new UsageError(target);
  const remoteText = parsed.values['remote-port'];
  const remotePort = remoteText === undefined ? 0 : /^[0-9]{1,5}$/.test(remoteText) && Number(remoteText) >= 1 && Number(remoteText) <= 65535 ? Number(remoteText) : -1;
  if (remotePort < 0) throw new UsageError('--remote-port must be a port, 1 to 65535');
  let policy;
  try {
    policy = policySpecFromFlags({ 'allow-cidr': parsed.values['allow-cidr'], 'deny-cidr': parsed.values['deny-cidr'] });
    if (policy !== undefined) encodePolicyHeader(policy);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const loaded = loadConfig(parsed.values.config);
  const credentials = resolveCredentials(parsed.values, process.env, loaded.config);
  const token = requireToken(credentials);
  const ca = edgeAccess(credentials, parsed.values.insecure === true);
  const out = process.stdout;
  const events = parsed.values.json === true ? jsonEvents(out) : null;
  const routes = new RouteTable(target, []);
  const authority = target.authority;

  const connection = new TunnelClient({
    edge: credentials.edges,
    token,
    routes,
    bindOnly: true,
    ...(ca === undefined ? {} : { ca }),
    insecure: parsed.values.insecure === true,
    resolve: credentials.resolve,
  });
  const { tunnel, started } = connection.bind({
    kind,
    routes,
    remotePort,
    ...(parsed.values.subdomain === undefined ? {} : { subdomain: parsed.values.subdomain.toLowerCase() }),
    proxyProtocol: parsed.values['proxy-protocol'] === true,
    ...(policy === undefined ? {} : { policy }),
  });
  const stop = (): void => {
    void connection.close('the client was stopped (Ctrl-C)');
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  let live = false;
  const closed = new Promise<number>((resolve) => {
    tunnel.once('closed', (info) => {
      if (info.byUser) {
        if (events !== null) events({ event: 'closed', by_user: true, code: info.code, reason: info.reason });
        else out.write('tunnel closed\n');
        resolve(0);
        return;
      }
      // Refused before it was live: said below, where `started` rejects.
      if (live && events !== null) {
        events({ event: 'error', code: info.code, message: info.reason });
        events({ event: 'closed', by_user: false, code: info.code, reason: info.reason });
      } else if (live) process.stderr.write(`burrow: the edge closed the tunnel: ${info.code}: ${info.reason}\n`);
      resolve(1);
    });
  });
  connection.start().catch((error: unknown) => {
    connection.endTunnels({ reason: (error as Error).message, code: error instanceof TunnelRefusedError ? error.code : 'EDGE_UNREACHABLE', byUser: false });
  });
  try {
    const ready = await started;
    live = true;
    if (events !== null) events({ event: 'ready', name: ready.subdomain, url: ready.publicUrl, forwarding: [`${ready.publicUrl} -> ${authority}`] });
    else out.write(`Forwarding ${ready.publicUrl} -> ${authority}\n`);
  } catch (error) {
    await connection.close('not started');
    const code = error instanceof TunnelRefusedError ? error.code : 'EDGE_UNREACHABLE';
    if (events !== null) {
      events({ event: 'error', code, message: (error as Error).message });
      return 1;
    }
    throw new CliError(`${code}: ${(error as Error).message}`, 1, code);
  }
  void localProblem(target).then((problem) => {
    if (problem === null) return;
    const message = `nothing answers on ${authority} (${problem}); connections to it are cut until a server listens there`;
    if (events !== null) events({ event: 'warning', code: 'LOCAL_UNREACHABLE', message });
    else process.stderr.write(`burrow: warning: ${message}\n`);
  });
  tunnel.on('connection', (end) => {
    if (events !== null) {
      events({ event: 'connection', id: end.id, client_address: end.clientAddress, client_port: end.clientPort, bytes_in: end.bytesIn, bytes_out: end.bytesOut, duration_ms: end.durationMs, error: end.error });
    } else out.write(`${connectionLine(end, kind === 'tcp' ? 'TCP' : 'TLS')}\n`);
  });
  tunnel.on('reconnecting', ({ delayMs, reason }) => {
    if (events !== null) events({ event: 'reconnect', delay_ms: delayMs, reason });
    else process.stderr.write(`burrow: ${reason}; reconnecting in ${delayMs} ms\n`);
  });
  tunnel.on('ready', (info) => {
    if (!info.reconnected) return;
    if (events !== null) events({ event: 'ready', name: info.subdomain, url: info.publicUrl, reconnected: true });
    else out.write(`Reconnected: forwarding ${info.publicUrl} -> ${authority}\n`);
  });
  const code = await closed;
  setTimeout(() => process.exit(code), 2_000).unref();
  return code;
}
