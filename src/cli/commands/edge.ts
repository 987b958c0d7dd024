import { resolve } from 'node:path';
import { TrustedProxies } from '../../edge/client-address.js';
import { Edge } from '../../edge/server.js';
import { CliError, intOption, noExtraPositionals, parse } from '../args.js';
import { configPath, readConfig, writeConfig } from '../config.js';

const HELP = `
Usage: burrow edge [--host 127.0.0.1] [--port 8080] [--domain localhost] [--data DIR] [--rate-limit N] [--json]

Runs the edge: the /api/v1 API on <domain> and api.<domain>, tunnels on <sub>.<domain>, all on one port.

Options:
  --host ADDR            address to bind (default 127.0.0.1)
  --port N               port to bind (default 8080; 0 picks a free one)
  --domain NAME          the edge's domain (default localhost)
  --data DIR             LMDB data directory (default ./.burrow); one edge per directory
  --rate-limit N         API requests per minute per token (default 100)
  --timeout MS           the edge's timeout for a local response, 504 after it (default 30000)
  --max-body BYTES       largest public request body, 413 beyond (default 104857600)
  --grace MS             how long an ended tunnel's subdomain (dropped, or closed with Ctrl-C) stays held
                         for its account (default 60000)
  --capture-body BYTES   bytes of each body kept in a capture (default 1048576)
  --no-capture           forward without capturing (benchmarks)
  --capture-fsync        fsync every capture commit: captures survive power loss too, at ~0.5-1 ms
                         of latency per commit (by default they survive a crash of the edge process)
  --public-port N        port shown in public URLs, when a proxy in front of the edge uses another
  --trust-proxy CIDR[,CIDR...]
                         believe X-Forwarded-For/-Proto/-Host (and a PROXY protocol v2 header) only from
                         these peers, e.g. 127.0.0.1/32 for an nginx on the same machine; the real client
                         address then feeds captures, auth throttling and X-Forwarded-For (repeatable;
                         default: believe nobody; see docs/deploy.md)
  --region NAME          region reported by /api/v1/instance (default local)
  --dev                  on a data directory without accounts, create a dev account, print its token once
                         and save it to the client config (what "npm start" does)
  --json                 print events as JSON lines: {"event":"listening","url":...}, dev_account, stopping
  -h, --help             show this help

Stops gracefully on SIGTERM or SIGINT: in-flight requests finish, tunnels are told, LMDB is flushed.
`;

export async function edgeCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      host: { type: 'string' },
      port: { type: 'string' },
      domain: { type: 'string' },
      data: { type: 'string' },
      'rate-limit': { type: 'string' },
      timeout: { type: 'string' },
      'max-body': { type: 'string' },
      grace: { type: 'string' },
      'capture-body': { type: 'string' },
      'no-capture': { type: 'boolean' },
      'capture-fsync': { type: 'boolean' },
      'public-port': { type: 'string' },
      'trust-proxy': { type: 'string', multiple: true },
      region: { type: 'string' },
      dev: { type: 'boolean' },
      json: { type: 'boolean' },
    },
    HELP,
  );
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, HELP);
  const { values } = parsed;
  const json = values.json === true;
  const say = (event: Record<string, unknown>, text: string): void => {
    process.stdout.write(json ? `${JSON.stringify(event)}\n` : text);
  };
  const dataDir = resolve(values.data ?? '.burrow');
  const publicPort = values['public-port'] === undefined ? undefined : intOption(values['public-port'], 'public-port', 0, 1, 65535);
  let trustProxy: string[] | undefined;
  if (values['trust-proxy'] !== undefined) {
    try {
      trustProxy = [...TrustedProxies.parse(values['trust-proxy']).ranges];
    } catch (error) {
      throw new CliError((error as Error).message);
    }
  }
  // A port in use or an unusable data directory is a one-line reason, not a stack trace.
  const edge = await Edge.start({
    dataDir,
    host: values.host ?? '127.0.0.1',
    port: intOption(values.port, 'port', 8080, 0, 65535),
    domain: values.domain ?? 'localhost',
    rateLimit: intOption(values['rate-limit'], 'rate-limit', 100, 1, 1_000_000),
    requestTimeoutMs: intOption(values.timeout, 'timeout', 30_000, 1, 3_600_000),
    maxRequestBody: intOption(values['max-body'], 'max-body', 100 * 1024 * 1024, 0, 2 ** 40),
    graceMs: intOption(values.grace, 'grace', 60_000, 0, 86_400_000),
    captureBodyLimit: intOption(values['capture-body'], 'capture-body', 1024 * 1024, 0, 64 * 1024 * 1024),
    capture: values['no-capture'] !== true,
    captureFsync: values['capture-fsync'] === true,
    ...(publicPort === undefined ? {} : { publicPort }),
    ...(trustProxy === undefined ? {} : { trustProxy }),
    region: values.region ?? 'local',
  }).catch((error: Error) => {
    throw new CliError(`cannot start the edge: ${error.message}`);
  });
  // Signals are handled before anything is announced: whoever waits for the listening line may stop us at once.
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    say({ event: 'stopping', signal }, `burrow edge: ${signal}, finishing in-flight requests and closing\n`);
    edge.close().then(
      () => process.exit(0),
      (error: Error) => {
        process.stderr.write(`burrow edge: shutdown failed: ${error.message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const host = values.host ?? '127.0.0.1';
  say(
    { event: 'listening', url: edge.url, message: `listening on ${edge.url}`, host, port: edge.port, data: dataDir },
    `burrow edge listening on ${edge.url} (bound to ${host}:${edge.port}, data in ${dataDir})\n`,
  );
  if (values.dev === true) await devAccount(edge, say);
  return new Promise<number>(() => {});
}

/** First start of a dev edge: an account, its token printed once and saved for `burrow http`. */
async function devAccount(edge: Edge, say: (event: Record<string, unknown>, text: string) => void): Promise<void> {
  const path = configPath();
  if (edge.store.countAccounts() > 0) {
    const saved = readConfig(path);
    say(
      { event: 'dev_account', created: false, config: path, token_saved: saved.token !== undefined },
      saved.token !== undefined
        ? `dev account ready; the client uses the token saved in ${path}\n`
        : `accounts exist in this data directory; log in with "burrow login TOKEN --edge ${edge.url}"\n`,
    );
    return;
  }
  const { account, token } = await edge.store.createAccount('dev@localhost', 'FREE', 'dev');
  writeConfig({ ...readConfig(path), edge: edge.url, token: token.token }, path);
  say(
    { event: 'dev_account', created: true, account: { id: account.id, email: account.email, plan: account.plan }, token: token.token, config: path },
    `created dev account ${account.email} (${account.id}, plan ${account.plan})\n` +
      `dev token (shown once): ${token.token}\n` +
      `saved to ${path}; now run: burrow http 3000 (or, in this directory, npx burrow http 3000)\n`,
  );
}
