/**
 * Edge memory per stalled upload (issue 11 finding 6; the figure is in docs/security.md).
 *
 * A real edge runs as a child process (`burrow edge`, data in a temp dir); a real tunnel client in this
 * process forwards to a local server that accepts connections and never reads them. N public clients
 * (1,000 by default) each POST a body of 4 MiB over raw TCP to 127.0.0.1 and keep writing as fast as
 * the edge lets them. Once the edge's RSS stops growing, the script prints the edge's RSS before and
 * with the stalled uploads, and the difference per upload. The edge runs a full GC every second, so its
 * RSS is what it holds rather than garbage not yet collected. Not part of `npm test`; bounded in count and
 * time; it stops everything it started.
 *
 *   npm run build && node dist/bench/edge/stalled-uploads.js [--uploads 1000] [--body-mib 4]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'burrow.js');
const { values } = parseArgs({ options: { uploads: { type: 'string' }, 'body-mib': { type: 'string' } } });
const UPLOADS = Number(values.uploads ?? 1000);
const BODY = Number(values['body-mib'] ?? 4) * 1024 * 1024;
const MIB = 1024 * 1024;

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until the RSS changed by less than 1 MiB over 3 s (at most `limitMs`); returns it. */
async function settledRss(pid: number, limitMs: number): Promise<number> {
  const deadline = Date.now() + limitMs;
  let last = rssOf(pid);
  for (;;) {
    await sleep(3_000);
    const now = rssOf(pid);
    if (Math.abs(now - last) < MIB || Date.now() > deadline) return now;
    last = now;
  }
}

async function startEdge(dataDir: string): Promise<{ child: ChildProcess; port: number }> {
  // A full GC every second in the edge, so the RSS shows what the edge holds, not garbage not yet collected.
  const gc = ['--expose-gc', '--import', 'data:text/javascript,setInterval(() => globalThis.gc(), 1000).unref()'];
  const child = spawn(process.execPath, [...gc, BIN, 'edge', '--port', '0', '--data', dataDir, '--timeout', '600000'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = /listening on http:\/\/[^:]+:(\d+)/.exec(output);
      if (match !== null) resolve(Number(match[1]));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the edge exited (${code}): ${output}`)));
  });
  return { child, port };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-stalled-'));
  const { child, port } = await startEdge(dataDir);
  const locals = new Set<Socket>();
  const local = createServer((socket) => {
    // Accepts and never reads: the local app is stuck.
    socket.pause();
    locals.add(socket);
  });
  local.listen(0, '127.0.0.1');
  await new Promise((resolve) => local.once('listening', resolve));
  const uploaders: Socket[] = [];
  let client: TunnelClient | null = null;
  try {
    const created = spawnSync(process.execPath, [BIN, 'admin', 'create-account', '--email', 'stall@example.test', '--plan', 'PRO', '--data', dataDir, '--json'], { encoding: 'utf8' });
    const token: string = JSON.parse(created.stdout).token.token;
    client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable((local.address() as AddressInfo).port, []) });
    const ready = await client.start();
    const host = `${ready.subdomain}.localhost:${port}`;
    const before = await settledRss(child.pid!, 10_000);

    const body = Buffer.alloc(BODY, 0x61);
    for (let i = 0; i < UPLOADS; i++) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`POST /upload/${i} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${BODY}\r\n\r\n`);
      socket.write(body);
      uploaders.push(socket);
      if (i % 100 === 99) await sleep(50);
    }
    const stalled = await settledRss(child.pid!, 60_000);
    let unsent = 0;
    for (const socket of uploaders) unsent += socket.writableLength;
    const accepted = UPLOADS * (BODY + 100) - unsent;
    const line = (label: string, bytes: number): string => `${label.padEnd(34)} ${(bytes / MIB).toFixed(1).padStart(8)} MiB`;
    console.log(`${UPLOADS} stalled uploads of ${BODY / MIB} MiB against a real edge on 127.0.0.1 (local server never reads)`);
    console.log(line('edge RSS, tunnel up, idle', before));
    console.log(line('edge RSS, uploads stalled', stalled));
    console.log(line('difference', stalled - before));
    console.log(`${'per stalled upload'.padEnd(34)} ${((stalled - before) / UPLOADS / 1024).toFixed(0).padStart(8)} KiB`);
    console.log(line('taken off the uploaders\' sockets', accepted));
  } finally {
    for (const socket of uploaders) socket.destroy();
    await client?.close();
    for (const socket of locals) socket.destroy();
    local.close();
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
