/**
 * Debian's nginx as a front proxy in tests, run from a shipped deploy/*.conf the way the guides tell an
 * operator to: certbot-named certificates from a throwaway CA, the guide's substitutions (each must still
 * match the shipped file), loopback ports, and nginx's own main file in the temp dir. Shared by
 * test/edge/front-proxy.test.ts (deploy/nginx-burrow.conf) and test/cluster/front-proxy-cluster.test.ts
 * (deploy/nginx-burrow-cluster.conf).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { docBlock } from './doc-blocks.js';
import { ROOT, freePort, waitFor } from './helpers.js';
import { makeCa, makeServerCert } from './tls-fixtures.js';

export const ensureNginx = (await import(pathToFileURL(join(ROOT, 'scripts', 'ensure-nginx.mjs')).href)) as {
  NGINX: string;
  nginxMissing(): string | null;
  nginxPlan(options: { platform: string; exists: boolean; explicit: boolean; aptGet: () => boolean }): string;
};

/** Why a front-proxy test cannot run here (no nginx, no openssl for its certificates), or false. */
export function frontProxySkip(): string | false {
  const missing = ensureNginx.nginxMissing();
  if (missing !== null) return `skipped: ${missing}`;
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
  } catch {
    return 'skipped: openssl is missing (the test makes its throwaway certificates with it)';
  }
  return false;
}

/** A throwaway CA, and a certificate it signs for <domain> and *.<domain>, in certbot's file names. */
export function makeCertificates(dir: string, domain: string): { caFile: string; caPem: Buffer; certDir: string } {
  const certDir = join(dir, 'live', domain);
  mkdirSync(certDir, { recursive: true });
  const ca = makeCa(dir, 'ca');
  const server = makeServerCert(certDir, 'fullchain', [domain, `*.${domain}`], ca);
  renameSync(server.key, join(certDir, 'privkey.pem'));
  return { caFile: ca.cert, caPem: readFileSync(ca.cert), certDir };
}

/**
 * `count` different loopback ports, each free a moment ago, outside the ephemeral range (freePort):
 * for a front and the edges behind it, which bind them later. freePort alone may give one twice when
 * nothing has bound the first yet; an edge bound to nginx's front port would then answer in its place.
 */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

export interface FrontConfig {
  /** The shipped file, e.g. 'nginx-burrow.conf' under deploy/. */
  shipped: string;
  domain: string;
  certDir: string;
  webroot: string;
  httpsPort: number;
  httpPort: number;
  /** The guide's substitutions of the edge addresses. */
  edges: [RegExp, string][];
  /**
   * The file as the guide's own commands wrote it (installAsDeployGuide); then only the loopback
   * substitutions below are the test's, the rest was the guide's.
   */
  installed?: string;
}

/**
 * docs/deploy.md, "Behind a front proxy", step 2, run as written by sh in the project directory: its
 * variables set to `values` (each must be one of the step's), its sed writing into `dir` instead of
 * /etc/nginx/conf.d. The step's mkdir of certbot's webroot and its nginx reload are the test's own to do
 * (a webroot in the temp dir, nginx started from it). Returns the file it wrote.
 */
export function installAsDeployGuide(dir: string, values: Record<'DOMAIN' | 'EDGE' | 'AGENT' | 'CERTS', string>): string {
  const output = join(dir, 'guide-burrow.conf');
  const script: string[] = [];
  const assigned: string[] = [];
  for (const { command: line } of docBlock('docs/deploy.md', '2. Install the example with your names')) {
    if (line === 'mkdir -p /var/www/acme' || line === 'nginx -t && systemctl reload nginx') continue;
    const assignment = /^([A-Z]+)=\S+$/.exec(line);
    if (assignment !== null) {
      const name = assignment[1] as keyof typeof values;
      assert.ok(Object.hasOwn(values, name), `deploy.md step 2 sets ${name}, which the test does not know`);
      script.push(`${name}='${values[name]}'`);
      assigned.push(name);
    } else if (line.startsWith('sed ') && line.endsWith(' deploy/nginx-burrow.conf > /etc/nginx/conf.d/burrow.conf')) {
      script.push(line.replace(/ > \/etc\/nginx\/conf\.d\/burrow\.conf$/, ` > '${output}'`));
    } else {
      assert.fail(`deploy.md step 2 has a line the test does not know: ${line}`);
    }
  }
  assert.deepEqual(assigned.sort(), Object.keys(values).sort(), 'the step sets each variable');
  execFileSync('sh', ['-e', '-c', script.join('\n')], { cwd: ROOT });
  return readFileSync(output, 'utf8');
}

/**
 * The shipped file with the guide's substitutions (certificate directory, domain, edges, ACME webroot)
 * and the ones a test on loopback needs (ports instead of 80 and 443, no IPv6 listeners). Each must
 * match: if the shipped file changes shape, the test (and the guide) must follow.
 */
export function installConfig(config: FrontConfig): string {
  const guide: [RegExp, string][] = [
    [/\/etc\/letsencrypt\/live\/tunnels\.example\.com\//g, `${config.certDir}/`],
    [/tunnels\.example\.com/g, config.domain],
    ...config.edges,
  ];
  const replacements: [RegExp, string][] = [
    ...(config.installed === undefined ? guide : []),
    [/\/var\/www\/acme/g, config.webroot],
    [/listen 443 /g, `listen 127.0.0.1:${config.httpsPort} `],
    [/listen 80;/g, `listen 127.0.0.1:${config.httpPort};`],
    [/^\s*listen \[::\]:.*$/gm, ''],
  ];
  let text = config.installed ?? readFileSync(join(ROOT, 'deploy', config.shipped), 'utf8');
  for (const [pattern, value] of replacements) {
    assert.match(text, pattern, `deploy/${config.shipped} no longer contains ${pattern}`);
    text = text.replace(pattern, value);
  }
  return text;
}

export interface RunningNginx {
  child: ChildProcess;
  /** SIGQUIT (nginx's graceful stop), and its exit; nothing when it already exited. */
  stop(): Promise<void>;
}

/**
 * nginx from `dir` with the installed config and nginx's own main file (what the package's
 * /etc/nginx/nginx.conf would give; `httpLines` go into its http block), once it has bound its ports
 * (its pid file written) and listens on httpsPort. Throws, with nginx's error log, when it cannot bind
 * them (another process holds one) or exits: the ports are the caller's (the edges behind it were told
 * httpsPort), so it does not pick others.
 */
export async function startNginx(dir: string, config: FrontConfig, httpLines: string[] = [`access_log ${join(dir, 'access.log')};`]): Promise<RunningNginx> {
  // Workers drop to an unprivileged user when nginx starts as root: they must reach the webroot.
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, 'burrow.conf'), installConfig(config));
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'error.log')} notice;`,
      'events { worker_connections 256; }',
      'http {',
      ...httpLines.map((line) => `  ${line}`),
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `  ${kind}_temp_path ${join(dir, `${kind}_temp`)};`),
      `  include ${join(dir, 'burrow.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  const pidFile = join(dir, 'nginx.pid');
  const errorLog = join(dir, 'error.log');
  rmSync(pidFile, { force: true });
  const readOr = (file: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  };
  // This start's lines only, should `dir` have run an nginx before.
  const logFrom = readOr(errorLog).length;
  const log = (): string => readOr(errorLog).slice(logFrom);
  const child = spawn(ensureNginx.NGINX, ['-p', dir, '-e', errorLog, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit');
  process.once('exit', () => child.kill('SIGKILL'));
  const failed = async (why: string): Promise<Error> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    return new Error(`nginx ${why} (front ports 127.0.0.1:${config.httpsPort} and :${config.httpPort}); its output: ${output.trim() || '(none)'}; ${errorLog}:\n${log()}`);
  };
  // Ready once nginx has written its pid file (it does so only after binding every listen address) and
  // the HTTPS port answers. A connection alone is not proof: when another process holds the port, nginx
  // keeps retrying bind() for a few seconds before it exits ("Address already in use"), and meanwhile
  // the connect reaches that other process (likely what a CI run saw: the tunnels' TLS handshake to "nginx"
  // closing before it completed). So a bind failure, or an exit, fails here with nginx's error log.
  let why = '';
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          why = `exited (${child.exitCode ?? child.signalCode}) before it was ready`;
          return true;
        }
        const bindFailure = /bind\(\) to \S+ failed[^\n]*/.exec(`${output}\n${log()}`);
        if (bindFailure !== null) {
          why = `could not bind its ports: ${bindFailure[0]}`;
          return true;
        }
        if (readOr(pidFile).trim() !== String(child.pid)) return false;
        return new Promise<boolean>((resolve) => {
          const socket = connect(config.httpsPort, '127.0.0.1');
          socket.once('connect', () => {
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => resolve(false));
        });
      },
      10_000,
      'nginx to write its pid file and listen',
    );
  } catch (error) {
    why = `was not ready: ${(error as Error).message}`;
  }
  if (why !== '') throw await failed(why);
  return {
    child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGQUIT');
      await exited;
    },
  };
}

/**
 * The shipped deploy/nginx-burrow-cluster.conf in front of three edges on loopback (their public and
 * agent ports, in the file's order), started from `dir`; its access log, `dir`/upstreams.log, names the
 * edge of each request (`$request_uri $status $upstream_addr`).
 */
export async function startClusterNginx(
  dir: string,
  front: { domain: string; certDir: string; httpsPort: number; httpPort: number; edgePorts: readonly number[]; agentPorts: readonly number[] },
): Promise<{ nginx: RunningNginx; log: string }> {
  const edgePlaceholders = ['10.0.0.11:8080', '10.0.0.12:8080', '10.0.0.13:8080'];
  const agentPlaceholders = ['10.0.0.11:8081', '10.0.0.12:8081', '10.0.0.13:8081'];
  const webroot = join(dir, 'webroot');
  mkdirSync(webroot, { recursive: true });
  const log = join(dir, 'upstreams.log');
  const placeholder = (text: string): RegExp => new RegExp(text.replace(/\./g, '\\.'), 'g');
  const nginx = await startNginx(
    dir,
    {
      shipped: 'nginx-burrow-cluster.conf',
      domain: front.domain,
      certDir: front.certDir,
      webroot,
      httpsPort: front.httpsPort,
      httpPort: front.httpPort,
      edges: [
        ...edgePlaceholders.map((text, index): [RegExp, string] => [placeholder(text), `127.0.0.1:${front.edgePorts[index]}`]),
        ...agentPlaceholders.map((text, index): [RegExp, string] => [placeholder(text), `127.0.0.1:${front.agentPorts[index]}`]),
      ],
    },
    // Which edge served each request: the test's own log line, beside the shipped file.
    ["log_format upstreams '$request_uri $status $upstream_addr';", `access_log ${log} upstreams;`],
  );
  return { nginx, log };
}

