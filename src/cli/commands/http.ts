import { parsePort, parseRoute, RouteTable, type Route } from '../../client/routes.js';
import { TunnelClient, TunnelRefusedError } from '../../client/tunnel-client.js';
import type { Exchange } from '../../client/exchange.js';
import { CliError, noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import { requireToken, resolveCredentials } from '../config.js';

const HELP = `
Usage: burrow http PORT [--subdomain NAME] [--route PREFIX=PORT ...] [--edge URL] [--token T]

Opens a tunnel: requests to the public URL the edge gives are forwarded to http://localhost:PORT.
Prints "Forwarding <public URL> -> http://localhost:PORT" once the tunnel is live; reconnects by
itself (keeping the URL) when the connection drops; Ctrl-C closes the tunnel.

Options:
  --subdomain NAME        ask for this subdomain (3-63 of a-z, 0-9, -); default: one is made up
  --route PREFIX=PORT     send paths under PREFIX to another local port (repeatable; longest wins)
  --edge URL              the edge (default: BURROW_EDGE, the config file, http://localhost:8080)
  --token T               the token (default: BURROW_TOKEN, the config file)
  --log text|json         one line per request (default text)
  -h, --help              show this help
`;

export async function httpCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      subdomain: { type: 'string' },
      route: { type: 'string', multiple: true },
      edge: { type: 'string' },
      token: { type: 'string' },
      log: { type: 'string' },
    },
    HELP,
  );
  if (parsed === null) return 0;
  const portText = requirePositional(parsed, 0, 'PORT', HELP);
  noExtraPositionals(parsed, 1, HELP);
  const port = parsePort(portText);
  if (port === null) throw new UsageError(`"${portText}" is not a port (1 to 65535)`);
  const routes: Route[] = [];
  for (const text of parsed.values.route ?? []) {
    const route = parseRoute(text);
    if (typeof route === 'string') throw new UsageError(`--route ${route}`);
    routes.push(route);
  }
  const logFormat = parsed.values.log ?? 'text';
  if (logFormat !== 'text' && logFormat !== 'json') throw new UsageError('--log must be text or json');
  const credentials = resolveCredentials(parsed.values);
  const token = requireToken(credentials);
  const table = new RouteTable(port, routes);
  const client = new TunnelClient({
    edge: credentials.edge,
    token,
    routes: table,
    ...(parsed.values.subdomain === undefined ? {} : { subdomain: parsed.values.subdomain.toLowerCase() }),
  });

  let ready;
  try {
    ready = await client.start();
  } catch (error) {
    if (error instanceof TunnelRefusedError) throw new CliError(`${error.code}: ${error.message}`);
    throw new CliError((error as Error).message);
  }
  const out = process.stdout;
  out.write(`Forwarding ${ready.publicUrl} -> http://localhost:${port}\n`);
  for (const route of table.rules) out.write(`Forwarding ${ready.publicUrl}${route.prefix} -> http://localhost:${route.port}\n`);

  client.on('exchange', (exchange: Exchange) => {
    if (logFormat === 'json') {
      out.write(
        `${JSON.stringify({ id: exchange.id, method: exchange.method, path: exchange.path, status: exchange.status, latency_ms: round(exchange.latencyMs), port: exchange.port, error: exchange.error })}\n`,
      );
    } else {
      const status = exchange.error !== null ? 'ERR' : String(exchange.status);
      out.write(`${exchange.method} ${exchange.path} ${status} ${round(exchange.latencyMs)}ms${exchange.error !== null ? ` ${exchange.error}` : ''}\n`);
    }
  });
  client.on('reconnecting', ({ attempt, delayMs, reason }) => {
    process.stderr.write(`burrow: connection lost (${reason}); reconnecting in ${delayMs} ms (attempt ${attempt})\n`);
  });
  client.on('ready', (info) => {
    if (info.reconnected) out.write(`Reconnected: forwarding ${info.publicUrl} -> http://localhost:${port}\n`);
  });

  return new Promise<number>((resolve) => {
    const stop = (): void => {
      void client.close('the client was stopped (Ctrl-C)');
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    client.on('closed', (info) => {
      if (info.byUser) {
        out.write('tunnel closed\n');
        resolve(0);
      } else {
        process.stderr.write(`burrow: tunnel closed by the edge: ${info.code}: ${info.reason}\n`);
        resolve(1);
      }
    });
  });
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
