/**
 * The C floor: Debian's nginx in front of nginx in front of the target, two processes on the path as in a
 * tunnel (edge, client), each an nginx of its own (master + one worker) with a temp config on loopback
 * ports, run as children of the benchmark (never a system service). Both hops keep their upstream
 * connections alive and stream both ways (`proxy_buffering off`, `proxy_request_buffering off`), as the
 * tunnel does; access logs off. scripts/ensure-nginx.mjs installs nginx when it is missing (Linux with
 * apt-get), as `npm test` does for the front-proxy test.
 *
 * With `tls`, both hops are encrypted, as the HTTPS phase's tunnel is (HTTPS on the public side, wss to
 * the client): the front terminates HTTPS and speaks TLS to the back, reusing its upstream sessions and
 * keep-alive connections; the back terminates that and speaks plain HTTP to the target. OpenSSL's
 * defaults choose the protocol and cipher (TLS 1.3), as Node's do for Burrow.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Child, Children } from './processes.js';

export const NGINX = process.env.BURROW_NGINX ?? '/usr/sbin/nginx';

/** Makes sure nginx is there (installing Debian's package when it can); null when ready, else why not. */
export function ensureNginx(root: string): string | null {
  if (existsSync(NGINX)) return null;
  const result = spawnSync(process.execPath, [join(root, 'scripts', 'ensure-nginx.mjs')], { encoding: 'utf8', timeout: 300_000 });
  if (existsSync(NGINX)) return null;
  return `no nginx at ${NGINX} (${(result.stderr ?? '').trim().split('\n').pop() ?? 'ensure-nginx failed'})`;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The certificate both hops serve and the CA the front checks the back's against. */
export interface NginxTls {
  cert: string;
  key: string;
  ca: string;
}

function config(dir: string, name: string, listen: number, upstream: number, tls: NginxTls | null, upstreamTls: boolean): string {
  const listenTls = tls === null ? [] : [`    ssl_certificate ${tls.cert};`, `    ssl_certificate_key ${tls.key};`];
  const upstreamTlsLines =
    tls === null || !upstreamTls
      ? []
      : [
          `      proxy_ssl_trusted_certificate ${tls.ca};`,
          '      proxy_ssl_verify on;',
          '      proxy_ssl_server_name on;',
          '      proxy_ssl_name localhost;',
          '      proxy_ssl_session_reuse on;',
        ];
  return [
    'worker_processes 1;',
    `pid ${join(dir, `${name}.pid`)};`,
    `error_log ${join(dir, `${name}-error.log`)} warn;`,
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `  ${kind}_temp_path ${join(dir, `${name}-${kind}_temp`)};`),
    `  upstream next { server 127.0.0.1:${upstream}; keepalive 256; keepalive_requests 10000000; keepalive_timeout 300s; }`,
    '  server {',
    `    listen 127.0.0.1:${listen}${tls === null ? '' : ' ssl'};`,
    ...listenTls,
    '    keepalive_requests 10000000;',
    '    keepalive_timeout 300s;',
    '    client_max_body_size 0;',
    '    location / {',
    `      proxy_pass ${tls !== null && upstreamTls ? 'https' : 'http'}://next;`,
    '      proxy_http_version 1.1;',
    '      proxy_set_header Connection "";',
    '      proxy_buffering off;',
    '      proxy_request_buffering off;',
    ...upstreamTlsLines,
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

/** The worker of an nginx master (the process that does the work), found through /proc. */
function workerOf(master: number): number | null {
  try {
    const children = readFileSync(`/proc/${master}/task/${master}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    return children[0] ?? null;
  } catch {
    return null;
  }
}

async function waitForWorker(child: Child, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!child.alive) throw new Error(`${child.name} exited: ${child.describeOutput()}`);
    const worker = workerOf(child.pid);
    if (worker !== null) return worker;
    await new Promise((done) => setTimeout(done, 25));
  }
  throw new Error(`${child.name}: no worker within ${timeoutMs} ms`);
}

export interface NginxTwoHop {
  /** The front's port: requests go here. */
  port: number;
  /** Worker pids, front first: what the per-request CPU is read from (the masters sleep). */
  workers: { front: number; back: number };
  /** The masters, to stop them. */
  masters: Child[];
  /** The children's names, front first (the sampler's names of the workers too). */
  names: { front: string; back: string };
  /** How requests reach the front: `http`, or `https` with `tls`. */
  scheme: 'http' | 'https';
}

/**
 * Starts back (→ target) and front (→ back) in `dir`, as children named `prefix`-back and `prefix`-front;
 * resolves once both listen. With `tls`, both hops speak TLS (the back's upstream, the target, stays plain).
 */
export async function startNginxTwoHop(children: Children, dir: string, targetPort: number, tls: NginxTls | null = null, prefix = 'nginx'): Promise<NginxTwoHop> {
  mkdirSync(dir, { recursive: true });
  // Workers drop to an unprivileged user when nginx starts as root: they must reach the temp paths.
  chmodSync(dir, 0o755);
  const backPort = await freePort();
  const frontPort = await freePort();
  const masters: Child[] = [];
  const start = async (name: string, listen: number, upstream: number, upstreamTls: boolean): Promise<number> => {
    const file = join(dir, `${name}.conf`);
    writeFileSync(file, config(dir, name, listen, upstream, tls, upstreamTls));
    const child = children.spawn({ name, command: NGINX, args: ['-p', dir, '-e', join(dir, `${name}-error.log`), '-c', file, '-g', 'daemon off;'] });
    masters.push(child);
    return waitForWorker(child, 10_000);
  };
  const back = await start(`${prefix}-back`, backPort, targetPort, false);
  const front = await start(`${prefix}-front`, frontPort, backPort, true);
  // Listening: the master binds before it forks the worker, so a connect now succeeds.
  return { port: frontPort, workers: { front, back }, masters, names: { front: `${prefix}-front`, back: `${prefix}-back` }, scheme: tls === null ? 'http' : 'https' };
}
