/**
 * `npm run bench:cluster-scale` (issue 28): three edges in cluster mode, each in its own network namespace
 * with one address on a private 10.x /24 (bench/cluster-scale/netns.ts), Redis and the shipped
 * deploy/nginx-burrow-cluster.conf on the host side of the bridge, and 5,000 tunnels spread over the
 * edges by two fleet processes (bench/e2e/fleet.ts: the client library's own TunnelClient and
 * MultiEdgeTunnel, many tunnels per process, each tunnel k starting at edge k mod 3). Two phases, each on
 * a fresh Redis, fresh edges and a fresh nginx: the clients on 1 edge (`--edges 1`), then on 2. Each
 * measures autocannon through nginx (HTTPS, 1 KiB POST) against a sample of the tunnels, the CPU µs per
 * request of every process from /proc, the hop share (each sampled request's edge, from nginx's log,
 * against the edges its tunnel is attached to, from its lease in Redis) and each edge's RSS per tunnel
 * session it holds. Needs root (`ip netns`); stays on the addresses it creates; cleans up on every exit.
 *
 *   node dist/bench/cluster-scale.js [--tunnels N] [--sample N] [--duration SEC] [--connections N]
 *                                    [--subnet 10.X.Y] [--quick]
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon, { type Result } from 'autocannon';
import { RedisStore } from '../src/store/redis-store.js';
import { createNamespaces, planNamespaces, remainingNamespaces, removeNamespaces, subnetInUse, type NamespaceSet } from './cluster-scale/netns.js';
import { payload, postBody } from './e2e/payloads.js';
import { Children, type Child } from './e2e/processes.js';
import { clockTicks, readProc } from './e2e/sampler.js';
import { formatNumber, textTable } from './e2e/table.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'burrow.js');
const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));
const FLEET_SCRIPT = fileURLToPath(new URL('./e2e/fleet.js', import.meta.url));
const REDIS_SERVER = process.env.BURROW_REDIS_SERVER ?? '/usr/bin/redis-server';
const NGINX = process.env.BURROW_NGINX ?? '/usr/sbin/nginx';
const DOMAIN = 'scale.test';
const PUBLIC_PORT = 8080;
const AGENT_PORT = 8081;
const ADMIN_PORT = 9090;
const TUNNELS_PER_ACCOUNT = 25;
const FLEETS = 2;
/** The whole run stops by itself after this long, cleaning up. */
const RUN_LIMIT_MS = 5 * 60_000;

const log = (line: string): void => void process.stderr.write(`bench:cluster-scale: ${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Options {
  tunnels: number;
  sample: number;
  durationS: number;
  connections: number;
  subnet: string;
}

interface PhaseResult {
  edgesPerTunnel: number;
  connected: number;
  failed: number;
  connectS: number;
  sessions: number[];
  reqPerSec: number;
  requests: number;
  p50: number;
  p99: number;
  bad: number;
  hopShare: number;
  cpu: Record<string, number>;
  kibPerSession: number[];
  rssMiB: number[];
}

function whole(value: string | undefined, name: string, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > max) throw new Error(`--${name} must be a whole number from 1 to ${max}, not "${value}"`);
  return parsed;
}

/** nginx's master and its workers: the CPU of all of them counts. */
function withChildren(pid: number): number[] {
  try {
    return [pid, ...readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)];
  } catch {
    return [pid];
  }
}

async function metric(address: string, name: string): Promise<number> {
  const text = await (await fetch(`http://${address}:${ADMIN_PORT}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name) && (line[name.length] === ' ' || line[name.length] === '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

/** The shipped cluster file with the guide's substitutions, on the namespaces' addresses and host ports. */
function nginxConfig(dir: string, set: NamespaceSet, httpsPort: number, httpPort: number): string {
  const certDir = join(dir, 'live', DOMAIN);
  mkdirSync(certDir, { recursive: true });
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${DOMAIN}`, '-addext', `subjectAltName=DNS:${DOMAIN},DNS:*.${DOMAIN}`,
    '-keyout', join(certDir, 'privkey.pem'), '-out', join(certDir, 'fullchain.pem'),
  ], { stdio: 'ignore' });
  const webroot = join(dir, 'webroot');
  mkdirSync(webroot, { recursive: true });
  const replacements: [RegExp, string][] = [
    [/\/etc\/letsencrypt\/live\/tunnels\.example\.com\//g, `${certDir}/`],
    [/tunnels\.example\.com/g, DOMAIN],
    ...set.namespaces.map((ns, i): [RegExp, string] => [new RegExp(`10\\.0\\.0\\.1${i + 1}:`, 'g'), `${ns.address}:`]),
    [/\/var\/www\/acme/g, webroot],
    [/listen 443 /g, `listen 127.0.0.1:${httpsPort} `],
    [/listen 80;/g, `listen 127.0.0.1:${httpPort};`],
    [/^\s*listen \[::\]:.*$/gm, ''],
  ];
  let text = readFileSync(join(ROOT, 'deploy', 'nginx-burrow-cluster.conf'), 'utf8');
  for (const [pattern, value] of replacements) {
    if (!pattern.test(text)) throw new Error(`deploy/nginx-burrow-cluster.conf no longer contains ${pattern}`);
    text = text.replace(pattern, value);
  }
  writeFileSync(join(dir, 'burrow.conf'), text);
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'error.log')} notice;`,
      'events { worker_connections 4096; }',
      'http {',
      "  log_format upstreams '$host $upstream_addr $status';",
      `  access_log ${join(dir, 'upstreams.log')} upstreams;`,
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `  ${kind}_temp_path ${join(dir, `${kind}_temp`)};`),
      `  include ${join(dir, 'burrow.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  return join(dir, 'nginx.conf');
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startFleet(children: Children, name: string, plan: object, temp: string): Promise<{ child: Child; done: { connected: number; failed: number; ms: number; errors: { message: string; count: number }[] } }> {
  const file = join(temp, `${name}.json`);
  writeFileSync(file, JSON.stringify(plan));
  const child = children.spawn({ name, command: process.execPath, args: [FLEET_SCRIPT, file], stdinPipe: true });
  const match = await child.waitFor(/(\{"event":"done".*\})/, 200_000);
  return { child, done: JSON.parse(match[1]!) as never };
}

async function phase(set: NamespaceSet, options: Options, edgesPerTunnel: number, temp: string): Promise<PhaseResult> {
  const children = new Children();
  const dir = join(temp, `edges-${edgesPerTunnel}`);
  mkdirSync(dir, { recursive: true });
  chmodSync(temp, 0o755);
  chmodSync(dir, 0o755);
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: join(dir, 'config') };
    delete env.BURROW_TOKEN;
    delete env.BURROW_EDGE;
    const redisPort = await freePort();
    const redis = children.spawn({
      name: 'redis',
      command: REDIS_SERVER,
      args: ['--port', String(redisPort), '--bind', set.hostAddress, '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--protected-mode', 'no'],
    });
    await redis.waitFor(/Ready to accept connections/, 10_000);
    const redisUrl = `redis://${set.hostAddress}:${redisPort}`;
    const { child: target, port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
    const edges: Child[] = [];
    for (const [index, ns] of set.namespaces.entries()) {
      const child = children.spawn({
        name: `edge ${index + 1}`,
        command: 'ip',
        // `ip netns exec` execs the command: the child's pid is the edge's.
        args: [
          'netns', 'exec', ns.name, process.execPath, BIN, 'edge', '--cluster', redisUrl, '--node-id', `scale-e${index + 1}`,
          '--advertise', `http://${ns.address}:${PUBLIC_PORT}`, '--host', ns.address, '--port', String(PUBLIC_PORT), '--agent-port', String(AGENT_PORT),
          '--domain', DOMAIN, '--data', join(dir, `edge-${index + 1}`), '--rate-limit', '1000000', '--admin', `${ns.address}:${ADMIN_PORT}`,
        ],
        env,
        stdoutFile: join(dir, `edge-${index + 1}.log`),
      });
      edges.push(child);
    }
    for (const [index, ns] of set.namespaces.entries()) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          await metric(ns.address, 'burrow_tunnels_active');
          break;
        } catch {
          if (edges[index]!.process.exitCode !== null || Date.now() > deadline) throw new Error(`edge ${index + 1} did not start: ${edges[index]!.describeOutput()}`);
          await sleep(250);
        }
      }
    }
    const httpsPort = await freePort();
    const nginx = children.spawn({ name: 'nginx', command: NGINX, args: ['-p', dir, '-e', join(dir, 'error.log'), '-c', nginxConfig(dir, set, httpsPort, await freePort()), '-g', 'daemon off;'] });
    await sleep(1_000);
    if (nginx.process.exitCode !== null) throw new Error(`nginx exited: ${readFileSync(join(dir, 'error.log'), 'utf8')}`);

    const store = await RedisStore.connect(redisUrl);
    const accounts: { token: string; tunnels: number }[][] = Array.from({ length: FLEETS }, () => []);
    try {
      const count = Math.ceil(options.tunnels / TUNNELS_PER_ACCOUNT);
      for (let i = 0; i < count; i++) {
        const created = await store.createAccount(`scale-${i}@bench.test`, 'PRO', 'bench');
        accounts[i % FLEETS]!.push({ token: created.token.token, tunnels: Math.min(TUNNELS_PER_ACCOUNT, options.tunnels - i * TUNNELS_PER_ACCOUNT) });
      }
    } finally {
      await store.close();
    }
    await sleep(1_000);
    const rssBefore = edges.map((edge) => readProc(edge.pid)?.rssKiB ?? Number.NaN);
    log(`edges --edges ${edgesPerTunnel}: redis ${redisUrl}, edges ${set.namespaces.map((ns) => ns.address).join(' ')}, nginx https://127.0.0.1:${httpsPort}; connecting ${options.tunnels} tunnels`);
    const edgeUrls = set.namespaces.map((ns) => `http://${ns.address}:${AGENT_PORT}`);
    const started = Date.now();
    const fleets = await Promise.all(
      accounts.map((list, f) =>
        startFleet(children, `fleet ${f + 1}`, { edge: edgeUrls, edgesPerTunnel, insecure: true, targetPort, prefix: `s${edgesPerTunnel}f${f}`, concurrency: 32, deadlineMs: 120_000, accounts: list }, dir),
      ),
    );
    const connectS = (Date.now() - started) / 1000;
    const connected = fleets.reduce((sum, fleet) => sum + fleet.done.connected, 0);
    const failed = fleets.reduce((sum, fleet) => sum + fleet.done.failed, 0);
    log(`  ${connected} connected, ${failed} failed in ${formatNumber(connectS, 1)} s${fleets.flatMap((f) => f.done.errors).map((e) => `; ${e.count}× ${e.message}`).join('')}`);
    // Second sessions attach in the background: wait until the edges' session counts settle.
    let sessions: number[] = [];
    for (let i = 0; i < 30; i++) {
      await sleep(2_000);
      const now = await Promise.all(set.namespaces.map((ns) => metric(ns.address, 'burrow_tunnels_active')));
      const settled = sessions.length > 0 && now.every((value, k) => value === sessions[k]) && (edgesPerTunnel === 1 || now.reduce((a, b) => a + b, 0) >= connected * edgesPerTunnel);
      sessions = now;
      if (settled) break;
    }
    const rssAfter = edges.map((edge) => readProc(edge.pid)?.rssKiB ?? Number.NaN);
    log(`  sessions per edge ${sessions.join(' / ')}; edge RSS ${rssBefore.map((kib) => formatNumber(kib / 1024, 1)).join('/')} → ${rssAfter.map((kib) => formatNumber(kib / 1024, 1)).join('/')} MiB`);

    // The sample: tunnels spread over both fleets' names.
    const names: string[] = [];
    const perFleet = accounts.map((list) => list.reduce((sum, a) => sum + a.tunnels, 0));
    for (let i = 0; i < options.sample; i++) {
      const f = i % FLEETS;
      const k = Math.floor((Math.floor(i / FLEETS) * perFleet[f]!) / Math.ceil(options.sample / FLEETS));
      names.push(`s${edgesPerTunnel}f${f}-${k}`);
    }
    // autocannon's expectBody does not go with `requests`: each answer is compared here.
    const expected = postBody(1024);
    let wrongBodies = 0;
    const onResponse = (status: number, body: string): void => {
      if (status === 200 && body !== expected) wrongBodies++;
    };
    const requests = names.map((name) => ({ method: 'POST', path: '/bench/length/0', headers: { host: `${name}.${DOMAIN}`, 'content-type': 'application/json' }, body: payload(1024), onResponse }));
    const run = (durationS: number): Promise<Result> =>
      new Promise((resolve, reject) => {
        autocannon(
          { url: `https://127.0.0.1:${httpsPort}/bench/length/0`, servername: DOMAIN, connections: options.connections, duration: durationS, timeout: 10, requests },
          (error, result) => (error ? reject(error) : resolve(result)),
        );
      });
    await run(2);
    wrongBodies = 0;
    writeFileSync(join(dir, 'upstreams.log'), '');
    execFileSync('kill', ['-USR1', String(nginx.pid)]);
    await sleep(300);
    const pids: Record<string, number[]> = {
      ...Object.fromEntries(edges.map((edge, i) => [`edge ${i + 1}`, [edge.pid]])),
      ...Object.fromEntries(fleets.map((fleet, i) => [`client ${i + 1}`, [fleet.child.pid]])),
      nginx: withChildren(nginx.pid),
      target: [target.pid],
      redis: [redis.pid],
    };
    const ticks = (): Record<string, number> => Object.fromEntries(Object.entries(pids).map(([name, list]) => [name, list.reduce((sum, pid) => sum + (readProc(pid)?.ticks ?? 0), 0)]));
    log(`  autocannon through nginx: ${options.sample} tunnels, ${options.connections} connections, ${options.durationS} s`);
    const before = ticks();
    const result = await run(options.durationS);
    const after = ticks();
    const usPerTick = 1e6 / clockTicks();
    const cpu = Object.fromEntries(Object.keys(pids).map((name) => [name, ((after[name]! - before[name]!) * usPerTick) / Math.max(1, result.requests.total)]));

    // Hop share: each request's edge (nginx's log) against its tunnel's attached edges (its lease).
    await sleep(500);
    const attached = new Map<string, Set<string>>();
    for (const name of names) {
      const lease = execFileSync('redis-cli', ['-h', set.hostAddress, '-p', String(redisPort), '--no-raw', 'HGETALL', `burrow:cluster:lease:${name}`], { encoding: 'utf8' });
      attached.set(name, new Set([...lease.matchAll(/scale-e(\d)/g)].map((m) => set.namespaces[Number(m[1]) - 1]!.address)));
    }
    let hops = 0;
    let total = 0;
    for (const line of readFileSync(join(dir, 'upstreams.log'), 'utf8').split('\n')) {
      const [host, ...upstream] = line.split(' ');
      if (host === undefined || upstream.length < 2) continue;
      const edgeAddress = upstream[upstream.length - 2]!.replace(/,$/, '').split(':')[0]!;
      const name = host.slice(0, -(DOMAIN.length + 1));
      total++;
      if (!(attached.get(name)?.has(edgeAddress) ?? false)) hops++;
    }
    const attachedCounts = [...attached.values()].map((s) => s.size);
    log(`  ${formatNumber(result.requests.total / result.duration)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms; hop share ${formatNumber((100 * hops) / Math.max(1, total), 1)} % of ${total} logged; sampled tunnels on ${attachedCounts.filter((n) => n === 1).length}×1 / ${attachedCounts.filter((n) => n === 2).length}×2 edges`);
    const crashed = children.crashed();
    if (crashed.length > 0) throw new Error(`${crashed.map((child) => child.name).join(', ')} exited during the run`);
    return {
      edgesPerTunnel,
      connected,
      failed,
      connectS,
      sessions,
      reqPerSec: result.requests.total / result.duration,
      requests: result.requests.total,
      p50: result.latency.p50,
      p99: result.latency.p99,
      bad: result.errors + result.timeouts + result.non2xx + wrongBodies,
      hopShare: hops / Math.max(1, total),
      cpu,
      kibPerSession: rssAfter.map((kib, i) => (kib - rssBefore[i]!) / Math.max(1, sessions[i]!)),
      rssMiB: rssAfter.map((kib) => kib / 1024),
    };
  } finally {
    await children.stopAll(3_000);
  }
}

function report(results: PhaseResult[], options: Options, loadBefore: number[], loadAfter: number[]): string {
  const processes = Object.keys(results[0]!.cpu);
  const main = textTable(
    ['Clients on', 'Tunnels up', 'Sessions per edge', 'req/s', 'p50 ms', 'p99 ms', 'Bad', 'Hop share', ...processes.map((name) => `${name} µs/req`), 'µs/req, all'],
    results.map((r) => [
      `${r.edgesPerTunnel} edge${r.edgesPerTunnel === 1 ? '' : 's'}`,
      `${r.connected} (${formatNumber(r.connectS, 0)} s)`,
      r.sessions.join(' / '),
      formatNumber(r.reqPerSec),
      r.p50,
      r.p99,
      r.bad,
      `${formatNumber(100 * r.hopShare, 1)} %`,
      ...processes.map((name) => formatNumber(r.cpu[name], 0)),
      formatNumber(Object.values(r.cpu).reduce((a, b) => a + b, 0), 0),
    ]),
  );
  const memory = textTable(
    ['Clients on', 'Edge RSS after, MiB', 'KiB per tunnel session, per edge'],
    results.map((r) => [`${r.edgesPerTunnel} edge${r.edgesPerTunnel === 1 ? '' : 's'}`, r.rssMiB.map((v) => formatNumber(v, 1)).join(' / '), r.kibPerSession.map((v) => formatNumber(v, 1)).join(' / ')]),
  );
  return [
    `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}, ${new Date().toISOString().slice(0, 16)}Z; load average ${loadBefore.map((v) => v.toFixed(2)).join(' ')} before, ${loadAfter.map((v) => v.toFixed(2)).join(' ')} after`,
    `${options.tunnels} tunnels in ${FLEETS} client processes; autocannon through nginx (HTTPS), 1 KiB POST over ${options.sample} of the tunnels, ${options.connections} connections, ${options.durationS} s:`,
    '',
    main,
    '',
    memory,
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tunnels: { type: 'string' },
      sample: { type: 'string' },
      duration: { type: 'string' },
      connections: { type: 'string' },
      subnet: { type: 'string' },
      quick: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) {
    process.stdout.write('usage: node dist/bench/cluster-scale.js [--tunnels N (5000)] [--sample N (100)] [--duration SEC (10)] [--connections N (50)] [--subnet 10.X.Y (10.231.28)] [--quick]\n');
    return;
  }
  const quick = values.quick === true;
  const options: Options = {
    tunnels: whole(values.tunnels, 'tunnels', quick ? 300 : 5_000, 20_000),
    sample: whole(values.sample, 'sample', quick ? 20 : 100, 1_000),
    durationS: whole(values.duration, 'duration', quick ? 2 : 10, 60),
    connections: whole(values.connections, 'connections', 50, 1_000),
    subnet: values.subnet ?? '10.231.28',
  };
  const set = planNamespaces('burrow-scale', options.subnet, 3);
  // Leftovers of a run that was killed: ours by name, so they may go.
  removeNamespaces(set);
  if (subnetInUse(set)) throw new Error(`${options.subnet}.0/24 is in use on this host: pick another with --subnet`);
  const temp = mkdtempSync(join(tmpdir(), 'burrow-bench-scale-'));
  let cleaned = false;
  const cleanUp = (): void => {
    if (cleaned) return;
    cleaned = true;
    const problems = removeNamespaces(set);
    rmSync(temp, { recursive: true, force: true });
    const left = remainingNamespaces(set);
    log(`cleaned up: ${left.length === 0 ? 'no namespace left' : `left: ${left.join(', ')}`}${problems.length > 0 ? ` (${problems.join('; ')})` : ''}`);
  };
  // A signal or the run's limit: the phase's processes get killed by the runner's exit, then the namespaces go.
  const abort = (why: string): void => {
    log(`stopping: ${why}`);
    // nginx's workers do not name the dir: they go with their master's children.
    for (const pid of readdirPids(temp).flatMap(withChildren)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    setTimeout(() => {
      cleanUp();
      process.exit(130);
    }, 500);
  };
  process.once('SIGINT', () => abort('SIGINT'));
  process.once('SIGTERM', () => abort('SIGTERM'));
  const limit = setTimeout(() => abort(`the run's limit of ${RUN_LIMIT_MS / 1000} s`), RUN_LIMIT_MS);
  try {
    createNamespaces(set);
    const loadBefore = loadavg();
    const results: PhaseResult[] = [];
    for (const edgesPerTunnel of [1, 2]) results.push(await phase(set, options, edgesPerTunnel, temp));
    const text = report(results, options, loadBefore, loadavg());
    process.stdout.write(`\n${text}\n`);
  } finally {
    clearTimeout(limit);
    cleanUp();
  }
}

/** Every process whose command line names the run's temp dir (its edges, nginx, Redis, fleets). */
function readdirPids(temp: string): number[] {
  const pids: number[] = [];
  for (const entry of execFileSync('ls', ['/proc'], { encoding: 'utf8' }).split('\n')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(temp)) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

main().catch((error: Error) => {
  process.stderr.write(`bench:cluster-scale: ${error.stack ?? error.message}\n`);
  process.exitCode = 1;
});
