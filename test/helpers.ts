/**
 * Shared test set-up: real parts only. A real edge on a free loopback port with LMDB in a temp dir, real
 * accounts, a real local HTTP server, the real tunnel client, and the real CLI as a subprocess.
 */
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import { Edge, type EdgeOptions } from '../src/edge/server.js';
import { ERROR_CODES, type ErrorCode } from '../src/errors.js';
import { RouteTable, type Route } from '../src/client/routes.js';
import { TunnelClient, TunnelRefusedError, type TunnelClientOptions } from '../src/client/tunnel-client.js';
import type { PlanName } from '../src/store/plans.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BIN = join(ROOT, 'bin', 'burrow.js');

/** Every temp dir this process made: removed when it exits, whatever the test did (issue 16, point 9). */
const madeDirs = new Set<string>();

/** A fresh temp dir, removed at the latest when the process exits. */
export function tempDir(prefix = 'burrow-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  madeDirs.add(dir);
  return dir;
}

function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  madeDirs.delete(dir);
}

/** A maker of fresh temp dirs for one test file, all removed when the file's tests are done. */
export function tempDirs(prefix: string): () => string {
  const dirs: string[] = [];
  after(() => {
    for (const dir of dirs) removeTempDir(dir);
  });
  return () => {
    const dir = tempDir(prefix);
    dirs.push(dir);
    return dir;
  };
}

export interface TestEdge {
  edge: Edge;
  dataDir: string;
  /** http://127.0.0.1:PORT: connect here and set Host to pick API or tunnel. */
  base: string;
  /** The edge URL a client uses (http://localhost:PORT). */
  url: string;
  port: number;
  /** The edge's last log lines (startEdge's edges): a failed startClient names them. */
  recentLog?: () => readonly string[];
  close(): Promise<void>;
}

/**
 * A test edge's free-space floor: off, so what a test's edge captures and holds does not depend on the
 * free space of the machine's temp file system (a CI runner may have less than the default floor of
 * 256 MiB). The disk tests (issue 23) set their own.
 */
export const TEST_MIN_FREE_DISK = { bytes: 0 } as const;

/**
 * `burrow edge` arguments as tests run them: `--min-free-disk 0` added unless the test gives one (see
 * TEST_MIN_FREE_DISK), and `--agent-port 0` unless the test gives one: the default agent port is
 * --port + 1, which another test's free port may hold (clients learn the agent port from GET
 * /api/v1/instance, tests from `agentUrlOf`). Any other command's arguments, and `--help`, unchanged.
 */
export function testEdgeArgs(args: readonly string[]): string[] {
  if (args[0] !== 'edge' || args.some((arg) => arg === '--help' || arg === '-h')) return [...args];
  const given = (flag: string): boolean => args.some((arg) => arg === flag || arg.startsWith(`${flag}=`));
  return [...args, ...(given('--min-free-disk') ? [] : ['--min-free-disk', '0']), ...(given('--agent-port') ? [] : ['--agent-port', '0'])];
}

/** The agent endpoint an edge advertises to clients asking at `base` (GET /api/v1/instance's agent_url). */
export async function agentUrlOf(base: string, host?: string): Promise<string> {
  const response = await request(`${base}/api/v1/instance`, host === undefined ? {} : { headers: { host } });
  const instance = (await response.body.json()) as { agent_url?: string };
  if (typeof instance.agent_url !== 'string') throw new Error(`${base} names no agent endpoint (${response.statusCode})`);
  return instance.agent_url;
}

/** How many of a test edge's last log lines it keeps for a failed startClient to show. */
const RECENT_LOG_LINES = 30;

/**
 * Test edges' log lines: dropped, unless BURROW_TEST_EDGE_LOG=1 asks for them on stderr, timestamped, to
 * see what the edges of a failing test did.
 */
const EDGE_LOG: (line: string) => void =
  process.env.BURROW_TEST_EDGE_LOG === '1' ? (line) => process.stderr.write(`[edge ${new Date().toISOString()}] ${line}\n`) : () => {};

/** Starts an edge on a free port with data in a fresh temp dir (or `dataDir`), the floor off unless set. */
export async function startEdge(options: Partial<EdgeOptions> = {}): Promise<TestEdge> {
  const dataDir = options.dataDir ?? tempDir();
  const recent: string[] = [];
  const given = options.log;
  const log = (line: string): void => {
    EDGE_LOG(line);
    given?.(line);
    recent.push(`${new Date().toISOString()} ${line}`);
    if (recent.length > RECENT_LOG_LINES) recent.shift();
  };
  const edge = await Edge.start({ port: 0, minFreeDisk: TEST_MIN_FREE_DISK, ...options, log, dataDir });
  let closed = false;
  return {
    edge,
    recentLog: () => recent,
    dataDir,
    base: `http://127.0.0.1:${edge.port}`,
    url: `http://localhost:${edge.port}`,
    port: edge.port,
    async close() {
      if (closed) return;
      closed = true;
      await edge.close(2_000);
      if (options.dataDir === undefined) removeTempDir(dataDir);
    },
  };
}

export interface TestAccount {
  id: string;
  email: string;
  token: string;
  tokenId: string;
}

let accountCounter = 0;

export async function createAccount(target: TestEdge, plan: PlanName = 'FREE', email?: string): Promise<TestAccount> {
  const address = email ?? `user${++accountCounter}-${process.pid}@example.test`;
  const { account, token } = await target.edge.accounts.createAccount(address, plan, 'test');
  return { id: account.id, email: account.email, token: token.token, tokenId: token.id };
}

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/** One HTTP request to the edge with a chosen Host header (API host by default). */
export async function call(
  target: TestEdge,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string>; host?: string } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { host: options.host ?? `localhost:${target.port}`, ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | Buffer | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  } else if (options.rawBody !== undefined) {
    body = options.rawBody;
  }
  const response = await request(`${target.base}${path}`, { method: method as 'GET', headers, ...(body === undefined ? {} : { body }) });
  const text = await response.body.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers, text, json };
}

/**
 * A live request to a tunnel name whose offline queue has just drained (docs/offline.md). The moment
 * between the last delivery and the edge seeing nothing left in line holds a request (202, delivered
 * after the rest); ask again until one goes straight through.
 */
export async function callPastQueue(target: TestEdge, method: string, path: string, host: string): Promise<HttpResult> {
  let answer = await call(target, method, path, { host });
  for (let tries = 0; answer.status === 202 && tries < 20; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    answer = await call(target, method, path, { host });
  }
  return answer;
}

/** The spec's timestamps: ISO 8601 UTC ending in Z (spec conventions). */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** The spec's error response (section 7): the code's status, JSON, exactly {"error":{"code","message"}}. */
export function assertApiError(response: HttpResult, code: ErrorCode): void {
  const status = ERROR_CODES[code].status;
  assert.equal(response.status, status, `expected ${status} ${code}, got ${response.status} ${response.text}`);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  assert.deepEqual(Object.keys(response.json ?? {}), ['error'], response.text);
  assert.deepEqual(Object.keys(response.json.error), ['code', 'message']);
  assert.equal(response.json.error.code, code);
  assert.equal(typeof response.json.error.message, 'string');
  assert.ok(response.json.error.message.length > 0, 'a message');
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface LocalServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

/** A real local HTTP server on a free loopback port. */
export async function startLocal(handler: Handler): Promise<LocalServer> {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A local server that answers HTTP with "http" and echoes every WebSocket message back. */
export async function startEchoLocal(): Promise<LocalServer> {
  const local = await startLocal((_req, res) => res.end('http'));
  const sockets = new WebSocketServer({ server: local.server });
  sockets.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })));
  return local;
}

/** One WebSocket through the edge at `port` to `host`'s /chat?room=1: "hello" out, its echo back, closed 1000 "bye". */
export async function echoOnce(port: number, host: string): Promise<void> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/chat?room=1`, { headers: { host: `${host}:${port}` } });
  await once(socket, 'open');
  socket.send('hello');
  await once(socket, 'message');
  socket.close(1000, 'bye');
  await once(socket, 'close');
}

/** Reads a request body whole. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** An echo handler: method, url, headers and body length and text. */
export const echo: Handler = (req, res) => {
  void readBody(req).then((body) => {
    res.setHeader('content-type', 'application/json');
    res.setHeader('x-echo', 'yes');
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: body.toString('utf8'), length: body.length }));
  });
};

/**
 * Clients started here and not closed by their test (an assertion failed before its close): a client
 * reconnects for ever, which would keep the file's process alive until the runner's timeout. Closed when
 * the file's tests are done; closing twice is harmless.
 */
const openClients = new Set<TunnelClient>();
after(async () => {
  await Promise.all([...openClients].map((client) => client.close().catch(() => undefined)));
  openClients.clear();
});

/** Starts the real tunnel client in-process; resolves once READY. */
export async function startClient(
  target: TestEdge,
  token: string,
  port: number,
  options: Partial<Omit<TunnelClientOptions, 'routes'>> & { routes?: Route[] } = {},
): Promise<{ client: TunnelClient; subdomain: string; publicUrl: string; host: string }> {
  const { routes, ...rest } = options;
  const client = new TunnelClient({
    edge: target.url,
    token,
    routes: new RouteTable(port, routes ?? []),
    minBackoffMs: 50,
    maxBackoffMs: 500,
    ...rest,
  });
  openClients.add(client);
  const ready = await client.start().catch((error: Error) => {
    // A refusal is what some tests expect; anything else is a failure to explain (a flaky connect in CI).
    if (error instanceof TunnelRefusedError || target.recentLog === undefined) throw error;
    error.message += `\n  the edge's last log lines:\n${target.recentLog().map((line) => `    ${line}`).join('\n') || '    (none)'}`;
    throw error;
  });
  return { client, subdomain: ready.subdomain, publicUrl: ready.publicUrl, host: `${ready.subdomain}.localhost:${target.port}` };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Long-running children still alive when the test process exits are killed, even after a failure. */
const children = new Set<ChildProcess>();
function track(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of madeDirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the real `burrow` binary with a private config directory; `burrow edge` with the floor off unless set (testEdgeArgs). */
export async function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 20_000, cwd?: string): Promise<CliResult> {
  const child = spawn(process.execPath, [BIN, ...testEdgeArgs(args)], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd === undefined ? {} : { cwd }) });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

export interface SpawnedProcess {
  child: ChildProcess;
  output: () => string;
  match: RegExpMatchArray;
  exited: Promise<number | null>;
}

/**
 * Starts a long-running CLI command (burrow http, burrow edge) and waits for a line matching `ready`;
 * `burrow edge` with the floor off unless the test sets one (testEdgeArgs).
 */
export async function spawnCli(args: string[], env: Record<string, string>, ready: RegExp, timeoutMs = 20_000, cwd?: string): Promise<SpawnedProcess> {
  return spawnNode([BIN, ...testEdgeArgs(args)], env, ready, timeoutMs, cwd);
}

/** Starts `node ...args` and waits for a line matching `ready`; killed when the test process exits. */
export async function spawnNode(args: string[], env: Record<string, string>, ready: RegExp, timeoutMs = 20_000, cwd?: string): Promise<SpawnedProcess> {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd === undefined ? {} : { cwd }) });
  track(child);
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const match = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${ready} in:\n${output}`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const found = output.match(ready);
      if (found !== null) {
        clearTimeout(timer);
        resolve(found);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before ${ready}:\n${output}`));
    });
  });
  return { child, output: () => output, match, exited };
}

/** Sends raw bytes on a fresh connection and collects the answer until the server closes or `untilMs` passes. */
export async function rawRequest(port: number, bytes: string | Buffer, untilMs = 2_000): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(bytes);
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  await Promise.race([once(socket, 'close'), new Promise((resolve) => setTimeout(resolve, untilMs))]);
  socket.destroy();
  return answer;
}

/**
 * Ports for processes that bind them later come from below the kernel's ephemeral range. A port from
 * listen(0) is an ephemeral one, and any outgoing connection of a test running beside this one may take
 * it as its source port before the process binds it (a CI run: "cannot bind 127.0.0.1:45205 (in use)",
 * an edge of a three-edge cluster started a second after its port was picked).
 */
const PICKED_PORTS_FROM = 10_000;
const EPHEMERAL_FROM = ((): number => {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
})();

/**
 * Ports this process handed out: never handed out twice. A port is free until its taker binds it, and
 * a test that picks several before starting what binds them (three edges of a cluster, nginx and the
 * edges behind it) could otherwise be given one twice.
 */
const handedOut = new Set<number>();

/** Whether nothing listens on 127.0.0.1:`port` (it was free a moment ago). */
function portFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const probe = createNetServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** A loopback port that was free a moment ago, outside the ephemeral range (for processes that bind it later, or restart on it). */
export async function freePort(): Promise<number> {
  return Number((await freePortRange(1)).split('-')[0]);
}

/** Polls `check` until it returns true or the time is up. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A free run of `count` ports for the edge's range (checked free now; the edge binds them on demand). */
export async function freePortRange(count: number): Promise<string> {
  const span = EPHEMERAL_FROM - PICKED_PORTS_FROM - count;
  if (span < 1_000) throw new Error(`the ephemeral port range starts at ${EPHEMERAL_FROM}: too little room below it for test ports`);
  for (let tries = 0; tries < 50; tries++) {
    const first = PICKED_PORTS_FROM + Math.floor(Math.random() * span);
    let free = true;
    for (let port = first; port < first + count && free; port++) free = !handedOut.has(port) && (await portFree(port));
    if (free) {
      for (let port = first; port < first + count; port++) handedOut.add(port);
      return `${first}-${first + count - 1}`;
    }
  }
  throw new Error('no free port range');
}
