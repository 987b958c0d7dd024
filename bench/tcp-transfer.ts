/**
 * 1 GiB each way through a TCP tunnel (issue 27), with the edge's and the client's memory sampled: the
 * claim to check is that a raw stream holds about one socket read beyond its credit, so neither process
 * grows with the transfer. A real edge (`burrow edge --dev --tcp-ports`) and a real `burrow tcp` run as
 * child processes on loopback; this process is the public client and the local server. Then the same
 * through OpenSSH's `ssh -R` (bench/e2e/ssh.ts: a private sshd and `ssh -N -R`), and for both the
 * round trip of one byte on one open connection (2,000 of them: p50 and p99).
 *
 *   npm run build && node dist/bench/tcp-transfer.js [MiB]      (default 1024)
 *
 * Prints one line per path and direction: MiB/s, and for Burrow the peak RSS of the edge and of the
 * client (VmHWM from /proc, so Linux only). docs/tcp.md keeps the last run's numbers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Children } from './e2e/processes.js';
import { ensureSsh, startSshReverse } from './e2e/ssh.js';

const MIB = 1024 * 1024;
const total = Number(process.argv[2] ?? 1024) * MIB;
const BIN = join(import.meta.dirname, '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'burrow-tcp-transfer-'));
const children: ChildProcess[] = [];

function start(args: string[], ready: RegExp): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, XDG_CONFIG_HOME: join(dir, 'config') }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = ready.exec(output);
      if (match !== null) resolve({ child, match });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', () => reject(new Error(`exited before ${ready}:\n${output}`)));
  });
}

/** The process's peak resident set so far (VmHWM), in MiB. */
function peakMiB(pid: number): number {
  const line = /VmHWM:\s+([0-9]+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return line === null ? NaN : Math.round(Number(line[1]) / 1024);
}

/** Writes `bytes` to `socket` in 64 KiB pieces, waiting for drain, then ends it. */
async function pump(socket: Socket, bytes: number): Promise<void> {
  const piece = Buffer.alloc(64 * 1024, 0x5a);
  for (let sent = 0; sent < bytes; sent += piece.byteLength) {
    if (!socket.write(piece)) await once(socket, 'drain');
  }
  socket.end();
}

/** Counts what `socket` delivers until its end. */
function drain(socket: Socket): Promise<number> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    socket.on('data', (chunk: Buffer) => (bytes += chunk.byteLength));
    socket.on('end', () => resolve(bytes));
    socket.on('error', reject);
  });
}

/** One byte there and back `count` times on one connection to `port` (an echoing local server): p50 and p99 in µs. */
async function roundTrips(port: number, count: number): Promise<{ p50: number; p99: number }> {
  const socket = connect({ port, host: '127.0.0.1', noDelay: true });
  await once(socket, 'connect');
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    socket.write('x');
    await once(socket, 'data');
    times.push((performance.now() - started) * 1000);
  }
  socket.destroy();
  times.sort((a, b) => a - b);
  return { p50: Math.round(times[Math.floor(count / 2)]!), p99: Math.round(times[Math.floor(count * 0.99)]!) };
}

/** Both directions of `total` bytes through `port`, whose connections reach the local server of `local`. */
async function transfers(label: string, port: number, setMode: (mode: 'upload' | 'download' | 'echo') => void, local: () => Promise<number>, memory: () => string): Promise<void> {
  for (const direction of ['upload', 'download'] as const) {
    setMode(direction);
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    const started = performance.now();
    const received = direction === 'upload' ? (await pump(socket, total), await drain(socket), await local()) : await drain(socket);
    socket.end();
    const seconds = (performance.now() - started) / 1000;
    if (received !== total) throw new Error(`${label} ${direction}: ${received} of ${total} bytes arrived`);
    console.log(`${label} ${direction} ${total / MIB} MiB in ${seconds.toFixed(1)} s (${(total / MIB / seconds).toFixed(0)} MiB/s)${memory()}`);
  }
  setMode('echo');
  const { p50, p99 } = await roundTrips(port, 2_000);
  console.log(`${label} one connection, 1-byte round trip: p50 ${p50} µs, p99 ${p99} µs`);
}

async function main(): Promise<void> {
  const first = 20_000 + Math.floor(Math.random() * 30_000);
  const edge = await start(['edge', '--dev', '--port', '0', '--data', join(dir, 'data'), '--tcp-ports', `${first}-${first + 9}`], /dev token \(shown once\): (svc_pat_\S+)\n/);
  const token = edge.match[1]!;
  const url = /listening on (http:\/\/\S+)/.exec(edge.match.input!)![1]!;
  let mode: 'upload' | 'download' | 'echo' = 'upload';
  let local: Promise<number> = Promise.resolve(0);
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.setNoDelay(true);
    if (mode === 'upload') local = drain(socket).then((bytes) => (socket.end(), bytes));
    else if (mode === 'download') local = pump(socket, total).then(() => total);
    else socket.on('data', (chunk: Buffer) => socket.write(chunk));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = await start(['tcp', String((server.address() as AddressInfo).port), '--edge', url, '--token', token], /Forwarding tcp:\/\/\S+:([0-9]+) ->/);
  const port = Number(client.match[1]);
  const setMode = (next: typeof mode): void => {
    mode = next;
  };
  await transfers('burrow tcp', port, setMode, () => local, () => `; peak RSS: edge ${peakMiB(edge.child.pid!)} MiB, client ${peakMiB(client.child.pid!)} MiB`);
  const missing = ensureSsh(join(import.meta.dirname, '..', '..'));
  if (missing !== null) console.log(`ssh -R skipped: ${missing}`);
  else {
    const ssh = new Children();
    try {
      const reverse = await startSshReverse(ssh, join(dir, 'ssh'), (server.address() as AddressInfo).port);
      await transfers('ssh -R', reverse.port, setMode, () => local, () => '');
    } finally {
      await ssh.stopAll(2_000);
    }
  }
  server.close();
}

main()
  .catch((error: Error) => {
    console.error(error.message);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const child of children) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
