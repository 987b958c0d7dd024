import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ClusterOptions } from '../../edge/cluster/types.js';
import { redisTarget } from '../../store/redis-url.js';
import { parseAdminAddress } from '../../edge/admin.js';
import { TrustedProxies } from '../../edge/client-address.js';
import { DEFAULT_SOURCE_RATE_LIMIT } from '../../edge/offline-queue.js';
import { Edge } from '../../edge/server.js';
import { apiHostProblem } from '../../edge/host.js';
import { parseMinFreeSpace } from '../../store/free-space.js';
import { lmdbBinaryPath, lmdbBinaryWarning } from '../../store/lmdb-native.js';
import { certificateCovers, type ServerName } from '../../edge/tls.js';
import { CliError, intOption, noExtraPositionals, parse, usageHint, UsageError } from '../args.js';
import { configPath, readConfig, writeConfig } from '../config.js';
import { readPlansFile } from '../plans-file.js';

const HELP = `
Usage: burrow edge [--host 127.0.0.1] [--port 8080] [--agent-port N] [--domain localhost] [--api-host HOST] [--data DIR]
                   [--rate-limit N] [--json] [--secret-key-file FILE] [--plans FILE]
                   [--admin [HOST:]PORT] [--access-log FILE|-] [--drain MS] [--min-free-disk BYTES|PERCENT]
                   [--tls-cert FILE --tls-key FILE [--http-port N] [--acme-webroot DIR]] [--public-url URL] [--hsts]
                   [--tcp-ports A-B [--tcp-host HOST]]
                   [--trust-proxy CIDR[,CIDR...]]
                   [--cluster redis://HOST:PORT[/DB]|redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
                    --node-id ID --advertise URL [--cluster-secret-file F]]

Runs the edge: the /api/v1 API and the dashboard on <domain> and api.<domain> (or on --api-host), tunnels
on <sub>.<domain>, all on one port; tunnel clients connect to the agent port, which GET /api/v1/instance
names (clients need only the edge URL).

Options:
  --host ADDR            address to bind (default 127.0.0.1)
  --port N               the public port: HTTP/1.x for every host (default 8080; 0 picks a free one)
  --agent-port N         the agent port, where tunnel clients connect (default: --port + 1, so 8081;
                         a free one with --port 0). Behind a front proxy, route /api/v1/connect on the
                         API host to it (deploy/)
  --agent-url URL        the agent endpoint as clients are told it (GET /api/v1/instance), when it is
                         neither this host on --agent-port nor the --public-url's route, e.g.
                         wss://agent.example.com/api/v1/connect
  --max-header-size BYTES
                         largest request head (request line and fields) on the public port, 431 beyond
                         (default 32768)
  --max-header-lines N   most field lines in a request head, 431 beyond (default 100)
  --domain NAME          the edge's domain (default localhost)
  --api-host HOST        serve the API and the dashboard on HOST, a name on another registrable domain
                         than the tunnels' (e.g. dashboard.example beside *.burrow-tunnels.example), so
                         no tunnel's page can set cookies for it (docs/deploy.md); <domain> and
                         api.<domain> then serve the API to tokens, without the dashboard. The edge's
                         URL (printed, saved by --dev) becomes https://HOST
  --data DIR             LMDB data directory (default ./.burrow); one edge per directory
  --secret-key-file FILE
                         the key that seals stored policies' secrets and OIDC sign-in cookies
                         (docs/policies.md; default DIR/secret.key): created with mode 0600 when
                         missing, refused when others can read it; every edge of a cluster needs the
                         same file; burrow admin rotate-secret-key replaces the key
  --rate-limit N         API requests per minute per token (default 100)
  --queue-rate-limit N   requests held per minute for one client address (an IPv6 /64) on one name in
                         offline mode queue, 429 beyond (default 120; docs/offline.md)
  --timeout MS           the edge's timeout for a local response, 504 after it (default 30000)
  --max-body BYTES       largest public request body, 413 beyond (default 104857600)
  --grace MS             how long an ended tunnel's subdomain (dropped, or closed with Ctrl-C) stays held
                         for its account (default 60000)
  --capture-body BYTES   bytes of each body kept in a capture (default 1048576)
  --plans FILE           the FREE and PRO plans' limits on this edge where they differ from the
                         defaults: a YAML (or JSON) map of plan to limits, e.g. "PRO: {capture_bytes:
                         16GiB, active_tunnels: 100}"; a limit left out keeps its default; every edge
                         of a cluster needs the same file (docs/deploy.md, "Plans and quotas")
  --no-capture           forward without capturing (benchmarks)
  --capture-fsync        fsync every capture commit: captures survive power loss too, at ~0.5-1 ms
                         of latency per commit (by default they survive a crash of the edge process)
  --min-free-disk BYTES|PERCENT
                         free space to keep on the data directory's file system, e.g. 512MiB, 2GiB or
                         10%: below it new captures are skipped (requests are still forwarded) and new
                         held webhooks are refused with 503 STORAGE_FULL; 0 turns it off (default: the
                         larger of 256MiB and 5%)
  --public-port N        port shown in public URLs, when a proxy in front of the edge uses another
  --public-url URL       the edge's URL as the public sees it, e.g. https://tunnels.example.com when a
                         TLS-terminating proxy is in front: printed URLs, the client's public URL and
                         X-Forwarded-Proto follow its scheme and port (its host is the domain)
  --tls-cert FILE        serve HTTPS on --port and wss:// on --agent-port with this certificate (PEM,
                         full chain): normally a wildcard for *.<domain> plus <domain>; TLS 1.2 and
                         1.3 only
  --tls-key FILE         the certificate's private key (PEM)
  --tls-sni NAME,CERT,KEY
                         serve another name (or *.name) with its own certificate, chosen by SNI
                         (repeatable)
  --tcp-ports A-B        serve TCP tunnels (burrow tcp, docs/tcp.md): each gets a public port from A-B,
                         listened on (on --host) while its tunnel is live; off by default. Not in
                         cluster mode yet
  --tcp-host HOST        the host TCP tunnels are printed with, tcp://HOST:PORT (default: --domain)
  --http-port N          with TLS: also listen for plain HTTP on port N and redirect it to HTTPS (308,
                         same path and query), except ACME challenges (see --acme-webroot)
  --acme-webroot DIR     with --http-port: serve /.well-known/acme-challenge/TOKEN from
                         DIR/.well-known/acme-challenge/ (certbot certonly --webroot -w DIR)
  --hsts                 send Strict-Transport-Security: max-age=31536000 on the API's and the
                         dashboard's answers (on <domain> and api.<domain>), never on a tunnel's, and
                         without includeSubDomains: each tunnel's own app decides (docs/deploy.md);
                         needs --tls-cert or an https --public-url (default: off)
  --trust-proxy CIDR[,CIDR...]
                         believe X-Forwarded-For/-Proto/-Host (and a PROXY protocol v2 header) only from
                         these peers, e.g. 127.0.0.1/32 for an nginx on the same machine; the real client
                         address then feeds captures, auth throttling and the access log (repeatable;
                         default: believe nobody; see docs/deploy.md)
  --region NAME          region reported by /api/v1/instance (default local)
  --admin [HOST:]PORT    serve GET /metrics (Prometheus text) and GET /healthz (200 serving, 503 draining)
                         on this address; a bare port binds 127.0.0.1 (default: off). It answers a Host
                         of localhost, an IP address or HOST only (421 otherwise: DNS rebinding)
  --access-log FILE|-    one JSON line per public request, appended to FILE or written to stdout (-)
  --drain MS             on SIGTERM/SIGINT, how long in-flight requests may take to finish before the
                         tunnels are told to go (GOAWAY) and the edge exits (default 10000)
  --cluster URL          cluster mode (docs/cluster.md): several edges share the Redis at
                         redis://[:PASSWORD@]HOST:PORT[/DB] for accounts, tokens, reservations and
                         the tunnel registry (a lease per subdomain); --data keeps this edge's
                         captures and offline queue. Redis should run with appendonly yes and
                         appendfsync always. Or a master found through Redis Sentinel:
                         redis-sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]; lease
                         grants and renewals then wait for a replica (?replicas=N, default 1).
                         Redis Cluster is refused. Needs --node-id and --advertise
  --node-id ID           this edge's name in the cluster: unique, stable across restarts
  --advertise URL        where the other edges reach this one, e.g. http://10.0.0.5:8080
  --cluster-secret-file F
                         the internal hop's shared secret (first line of F); by default the first
                         edge stores a random one in Redis and the others read it
  --dev                  on a data directory without accounts, create a dev account (dev@localhost, plan
                         PRO: 25 tunnels), print its token once and save it to the client config (what
                         "npm start" does)
  --json                 print events as JSON lines: {"event":"listening","url":...}, agent, admin, dev_account, stopping
  -h, --help             show this help

Stops gracefully on SIGTERM or SIGINT: /healthz turns 503, the port stops accepting, in-flight requests
finish (up to --drain MS), tunnels get GOAWAY (clients reconnect), captures and LMDB are flushed, exit 0.
Tunnel connects and disconnects, with their reasons, are logged to stderr.
With TLS, SIGHUP reads the certificate files again: new connections on both ports get the new
certificate, tunnels and other open connections stay up; a bad file is reported and the old one kept.
`;

export async function edgeCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    {
      host: { type: 'string' },
      port: { type: 'string' },
      'agent-port': { type: 'string' },
      'agent-url': { type: 'string' },
      'max-header-size': { type: 'string' },
      'max-header-lines': { type: 'string' },
      domain: { type: 'string' },
      'api-host': { type: 'string' },
      data: { type: 'string' },
      'rate-limit': { type: 'string' },
      'queue-rate-limit': { type: 'string' },
      timeout: { type: 'string' },
      'max-body': { type: 'string' },
      grace: { type: 'string' },
      'capture-body': { type: 'string' },
      plans: { type: 'string' },
      'no-capture': { type: 'boolean' },
      'capture-fsync': { type: 'boolean' },
      'min-free-disk': { type: 'string' },
      'secret-key-file': { type: 'string' },
      'public-port': { type: 'string' },
      'public-url': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-sni': { type: 'string', multiple: true },
      'http-port': { type: 'string' },
      'tcp-ports': { type: 'string' },
      'tcp-host': { type: 'string' },
      'acme-webroot': { type: 'string' },
      'trust-proxy': { type: 'string', multiple: true },
      hsts: { type: 'boolean' },
      region: { type: 'string' },
      admin: { type: 'string' },
      'access-log': { type: 'string' },
      drain: { type: 'string' },
      dev: { type: 'boolean' },
      json: { type: 'boolean' },
      cluster: { type: 'string' },
      'node-id': { type: 'string' },
      advertise: { type: 'string' },
      'cluster-secret-file': { type: 'string' },
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
  let publicPort = values['public-port'] === undefined ? undefined : intOption(values['public-port'], 'public-port', 0, 1, 65535);
  let domain = values.domain ?? 'localhost';
  let publicScheme: 'http' | 'https' | undefined;
  if (values['public-url'] !== undefined) {
    const publicUrl = parsePublicUrl(values['public-url']);
    if (values.domain !== undefined && values.domain.toLowerCase() !== publicUrl.hostname) {
      throw new UsageError(`--public-url names ${publicUrl.hostname} but --domain is ${values.domain}; give one, or the same name in both`);
    }
    if (publicPort !== undefined && publicPort !== publicUrl.port) throw new UsageError('give --public-url or --public-port, not both');
    domain = publicUrl.hostname;
    publicScheme = publicUrl.scheme;
    publicPort = publicUrl.port;
  }
  const apiHost = values['api-host']?.toLowerCase().replace(/\.$/, '');
  if (apiHost !== undefined) {
    const problem = apiHostProblem(apiHost, domain.toLowerCase());
    if (problem !== null) throw new UsageError(problem);
  }
  const tls = tlsOptions(values);
  if (values['tcp-host'] !== undefined && values['tcp-ports'] === undefined) throw new UsageError('--tcp-host names the host of TCP tunnels: give --tcp-ports too');
  const httpPort = values['http-port'] === undefined ? undefined : intOption(values['http-port'], 'http-port', 0, 0, 65535);
  if (httpPort !== undefined && tls === undefined) throw new UsageError('--http-port redirects to HTTPS: it needs --tls-cert and --tls-key');
  if (values['acme-webroot'] !== undefined && httpPort === undefined) throw new UsageError('--acme-webroot serves challenges on the --http-port listener: give --http-port too');
  const hsts = values.hsts === true;
  // The scheme browsers use: the --public-url's, else https exactly when the edge has a certificate.
  if (hsts && (publicScheme ?? (tls === undefined ? 'http' : 'https')) !== 'https') {
    throw new UsageError('--hsts tells browsers to use HTTPS only: it needs --tls-cert and --tls-key, or an https --public-url (a TLS proxy in front)');
  }
  const admin = values.admin === undefined ? undefined : parseAdminAddress(values.admin);
  if (typeof admin === 'string') throw new UsageError(`--admin: ${admin}; ${usageHint(HELP)}`);
  const drainMs = intOption(values.drain, 'drain', 10_000, 0, 3_600_000);
  const accessLog = values['access-log'] === undefined || values['access-log'] === '-' ? values['access-log'] : resolve(values['access-log']);
  let trustProxy: string[] | undefined;
  if (values['trust-proxy'] !== undefined) {
    try {
      trustProxy = [...TrustedProxies.parse(values['trust-proxy']).ranges];
    } catch (error) {
      throw new CliError((error as Error).message);
    }
  }
  const cluster = clusterOptions(values);
  const port = intOption(values.port, 'port', 8080, 0, 65535);
  // The agent port sits next to the public one, so a fixed --port gives a fixed, predictable pair.
  const agentPort = intOption(values['agent-port'], 'agent-port', port === 0 || port === 65535 ? 0 : port + 1, 0, 65535);
  if (agentPort !== 0 && agentPort === port) throw new UsageError('--agent-port must differ from --port');
  const advertisedAgent = values['agent-url'] === undefined ? undefined : parseAgentUrl(values['agent-url']);
  const http = {
    maxHeadBytes: intOption(values['max-header-size'], 'max-header-size', 32 * 1024, 1024, 1024 * 1024),
    maxFieldLines: intOption(values['max-header-lines'], 'max-header-lines', 100, 8, 10_000),
  };
  const plans = values.plans === undefined ? undefined : readPlansFile(resolve(values.plans));
  const minFreeDisk = values['min-free-disk'] === undefined ? undefined : parseMinFreeSpace(values['min-free-disk']);
  if (typeof minFreeDisk === 'string') throw new UsageError(`--min-free-disk must be ${minFreeDisk}`);
  // A port in use or an unusable data directory is a one-line reason, not a stack trace.
  const edge = await Edge.start({
    ...(cluster === undefined ? {} : { cluster }),
    dataDir,
    host: values.host ?? '127.0.0.1',
    port,
    agentPort,
    ...(advertisedAgent === undefined ? {} : { agentUrl: advertisedAgent }),
    http,
    domain,
    ...(apiHost === undefined ? {} : { apiHost }),
    rateLimit: intOption(values['rate-limit'], 'rate-limit', 100, 1, 1_000_000),
    requestTimeoutMs: intOption(values.timeout, 'timeout', 30_000, 1, 3_600_000),
    offlineQueue: { sourceRateLimit: intOption(values['queue-rate-limit'], 'queue-rate-limit', DEFAULT_SOURCE_RATE_LIMIT, 1, 1_000_000) },
    maxRequestBody: intOption(values['max-body'], 'max-body', 100 * 1024 * 1024, 0, 2 ** 40),
    graceMs: intOption(values.grace, 'grace', 60_000, 0, 86_400_000),
    captureBodyLimit: intOption(values['capture-body'], 'capture-body', 1024 * 1024, 0, 64 * 1024 * 1024),
    capture: values['no-capture'] !== true,
    captureFsync: values['capture-fsync'] === true,
    ...(values['secret-key-file'] === undefined ? {} : { secretKeyFile: resolve(values['secret-key-file']) }),
    ...(minFreeDisk === undefined ? {} : { minFreeDisk }),
    ...(plans === undefined ? {} : { plans }),
    ...(publicPort === undefined ? {} : { publicPort }),
    ...(trustProxy === undefined ? {} : { trustProxy }),
    ...(publicScheme === undefined ? {} : { publicScheme }),
    ...(tls === undefined ? {} : { tls }),
    ...(hsts ? { hsts } : {}),
    ...(httpPort === undefined
      ? {}
      : { httpRedirect: { port: httpPort, ...(values['acme-webroot'] === undefined ? {} : { acmeWebroot: resolve(values['acme-webroot']) }) } }),
    ...(values['tcp-ports'] === undefined ? {} : { tcp: { ports: values['tcp-ports'], ...(values['tcp-host'] === undefined ? {} : { host: values['tcp-host'] }) } }),
    region: values.region ?? 'local',
    ...(admin === undefined ? {} : { admin }),
    ...(accessLog === undefined ? {} : { accessLog }),
  }).catch((error: Error) => {
    throw new CliError(`cannot start the edge: ${error.message}`);
  });
  // Signals are handled before anything is announced: whoever waits for the listening line may stop us at once.
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    say({ event: 'stopping', signal }, `burrow edge: ${signal}, finishing in-flight requests and closing\n`);
    edge.close(drainMs).then(
      () => process.exit(0),
      (error: Error) => {
        process.stderr.write(`burrow edge: shutdown failed: ${error.message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  if (tls !== undefined) {
    process.on('SIGHUP', () => {
      edge.reloadCertificates().then(
        (certificate) =>
          say(
            { event: 'certificate_reloaded', serial: certificate.serial, valid_to: certificate.validTo },
            `burrow edge: SIGHUP, certificate reloaded (serial ${certificate.serial}, valid until ${certificate.validTo})\n`,
          ),
        (error: Error) => process.stderr.write(`burrow edge: SIGHUP, certificate reload failed, keeping the current one: ${error.message}\n`),
      );
    });
    const names = edge.certificate()?.names ?? [];
    const uncovered = [edge.domain, `tunnel.${edge.domain}`].filter((name) => !certificateCovers(names, name));
    if (apiHost !== undefined && !certificateCovers([...names, ...tls.serverNames.map((server) => server.name)], apiHost)) {
      process.stderr.write(`burrow edge: warning: no certificate covers the API host ${apiHost}; give one with --tls-sni ${apiHost},CERT,KEY or a certificate naming it too\n`);
    }
    if (uncovered.length > 0) {
      process.stderr.write(
        `burrow edge: warning: the certificate (${names.join(', ') || 'no DNS names'}) does not cover ${uncovered[0] === edge.domain ? edge.domain : `*.${edge.domain}`}; ` +
          `clients will refuse it. Use a certificate for *.${edge.domain} and ${edge.domain}\n`,
      );
    }
  }
  const lmdbWarning = lmdbBinaryWarning(lmdbBinaryPath());
  if (lmdbWarning !== null) process.stderr.write(`burrow edge: warning: ${lmdbWarning}\n`);
  const host = values.host ?? '127.0.0.1';
  // Plain HTTP: tokens and the session cookie travel in clear, and any tunnel's page can set cookies the
  // dashboard receives (no __Host- cookie without HTTPS): docs/security.md, "Cookie tossing".
  const plainHttp = !edge.url.startsWith('https:');
  const warning = 'plain HTTP: for this machine only, not safe to expose (tokens and the dashboard session travel in clear, and any tunnel page can set cookies for the dashboard); use --tls-cert or a TLS proxy with --public-url https://...';
  say(
    { event: 'listening', url: edge.url, message: `listening on ${edge.url}`, host, port: edge.port, data: dataDir, ...(plainHttp ? { warning } : {}) },
    `burrow edge listening on ${edge.url} (bound to ${host}:${edge.port}, data in ${dataDir})\n${plainHttp ? `burrow edge: ${warning}\n` : ''}`,
  );
  if (apiHost !== undefined) {
    say({ event: 'tunnels', url: edge.publicUrl('*') }, `burrow edge tunnels on ${edge.publicUrl('*')}\n`);
  }
  // As a client asking the edge's URL is told it (the host it asked by, on the agent port).
  const agentUrl = edge.agentUrl(new URL(edge.url).host);
  say({ event: 'agent', url: agentUrl, host, port: edge.agentPort }, `burrow edge tunnel clients connect on ${host}:${edge.agentPort} (advertised as ${agentUrl})\n`);
  if (edge.tcp !== null) {
    const { first, last } = edge.tcp.range;
    say({ event: 'tcp', host, ports: `${first}-${last}` }, `burrow edge TCP tunnels on ${host}:${first}-${last}\n`);
  }
  if (edge.httpPort !== 0) {
    say({ event: 'redirecting', host, port: edge.httpPort }, `burrow edge redirecting http on ${host}:${edge.httpPort} to HTTPS\n`);
  }
  if (admin !== undefined) {
    const adminUrl = `http://${admin.host.includes(':') ? `[${admin.host}]` : admin.host}:${edge.adminPort}`;
    say({ event: 'admin', url: adminUrl, metrics: `${adminUrl}/metrics`, health: `${adminUrl}/healthz` }, `burrow edge admin on ${adminUrl} (GET /metrics, GET /healthz)\n`);
  }
  if (values.dev === true) await devAccount(edge, say);
  return new Promise<number>(() => {});
}

/** First start of a dev edge: an account, its token printed once and saved for `burrow http`. */
async function devAccount(edge: Edge, say: (event: Record<string, unknown>, text: string) => void): Promise<void> {
  const path = configPath();
  if ((await edge.accounts.countAccounts()) > 0) {
    const saved = readConfig(path);
    say(
      { event: 'dev_account', created: false, config: path, token_saved: saved.token !== undefined },
      saved.token !== undefined
        ? `dev account ready; the client uses the token saved in ${path}\n`
        : `accounts exist in this data directory; log in with "burrow login TOKEN --edge ${edge.url}"\n`,
    );
    return;
  }
  // PRO, not FREE: this is the developer's own edge, and FREE's 3 tunnels are a hosted plan's cap.
  const { account, token } = await edge.accounts.createAccount('dev@localhost', 'PRO', 'dev');
  const saved = readConfig(path);
  // A CA saved by "burrow login --ca" was for the edge logged in to, not for this one.
  const config = { ...saved, edge: edge.url, token: token.token };
  if (saved.edge !== edge.url) delete config.ca;
  writeConfig(config, path);
  say(
    { event: 'dev_account', created: true, account: { id: account.id, email: account.email, plan: account.plan }, token: token.token, config: path },
    `created dev account ${account.email} (${account.id}, plan ${account.plan})\n` +
      `dev token (shown once): ${token.token}\n` +
      `saved to ${path}; now run: burrow http 3000 (or, in this directory, npx burrow http 3000)\n`,
  );
}

/** --cluster and its companions: all of --cluster, --node-id and --advertise, or none. */
export function clusterOptions(values: {
  cluster?: string | undefined;
  'node-id'?: string | undefined;
  advertise?: string | undefined;
  'cluster-secret-file'?: string | undefined;
}): ClusterOptions | undefined {
  const redis = values.cluster;
  if (redis === undefined) {
    for (const companion of ['node-id', 'advertise', 'cluster-secret-file'] as const) {
      if (values[companion] !== undefined) throw new UsageError(`--${companion} is for cluster mode: give --cluster redis://HOST:PORT (or redis-sentinel://...) too`);
    }
    return undefined;
  }
  try {
    redisTarget(redis);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const nodeId = values['node-id'];
  if (nodeId === undefined || !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(nodeId)) {
    throw new UsageError(
      nodeId === undefined
        ? '--cluster needs --node-id ID: this edge\'s name in the cluster, unique and stable across restarts'
        : '--node-id must be 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit',
    );
  }
  const advertise = values.advertise;
  if (advertise === undefined) throw new UsageError('--cluster needs --advertise URL: where the other edges reach this one, e.g. http://10.0.0.5:8080');
  let advertised: URL;
  try {
    advertised = new URL(advertise);
  } catch {
    throw new UsageError(`--advertise "${advertise}" is not a URL; use e.g. http://10.0.0.5:8080`);
  }
  if (advertised.protocol !== 'http:' && advertised.protocol !== 'https:') throw new UsageError('--advertise must be an http:// or https:// URL');
  let secret: string | undefined;
  const secretFile = values['cluster-secret-file'];
  if (secretFile !== undefined) {
    try {
      secret = readFileSync(resolve(secretFile), 'utf8').split('\n')[0]!.trim();
    } catch (error) {
      throw new CliError(`cannot read --cluster-secret-file: ${(error as Error).message}`);
    }
    if (secret.length < 16) throw new CliError('the cluster secret (first line of --cluster-secret-file) must be at least 16 characters');
  }
  return { redis, nodeId, advertise: advertised.origin, ...(secret === undefined ? {} : { secret }) };
}

function parseAgentUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--agent-url "${text}" is not a URL; use e.g. wss://agent.example.com/api/v1/connect`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new UsageError('--agent-url must be a ws:// or wss:// URL');
  return url.href;
}

function parsePublicUrl(text: string): { scheme: 'http' | 'https'; hostname: string; port: number } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--public-url "${text}" is not a URL; use e.g. https://tunnels.example.com`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--public-url must be an http:// or https:// URL');
  if (url.pathname !== '/' || url.search !== '' || url.username !== '') throw new UsageError('--public-url is a scheme, a host and maybe a port, without a path');
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  return { scheme, hostname: url.hostname.toLowerCase(), port: url.port === '' ? (scheme === 'https' ? 443 : 80) : Number(url.port) };
}

function tlsOptions(values: { 'tls-cert'?: string; 'tls-key'?: string; 'tls-sni'?: string[] }): { certFile: string; keyFile: string; serverNames: ServerName[] } | undefined {
  const cert = values['tls-cert'];
  const key = values['tls-key'];
  if (cert === undefined && key === undefined) {
    if ((values['tls-sni'] ?? []).length > 0) throw new UsageError('--tls-sni adds names to a TLS edge: give --tls-cert and --tls-key too');
    return undefined;
  }
  if (cert === undefined || key === undefined) throw new UsageError('give --tls-cert and --tls-key together');
  const serverNames = (values['tls-sni'] ?? []).map((text) => {
    const [name, certFile, keyFile, ...rest] = text.split(',');
    if (name === undefined || name === '' || certFile === undefined || certFile === '' || keyFile === undefined || keyFile === '' || rest.length > 0) {
      throw new UsageError(`--tls-sni "${text}" must be NAME,CERT,KEY`);
    }
    return { name: name.toLowerCase(), certFile: resolve(certFile), keyFile: resolve(keyFile) };
  });
  return { certFile: resolve(cert), keyFile: resolve(key), serverNames };
}
