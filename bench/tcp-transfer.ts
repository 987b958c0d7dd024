/**
 * 1 GiB each way through a TCP tunnel (issue 27), with the edge's and the client's memory sampled: the
 * claim to check is that a raw stream holds about one socket read beyond its credit, so neither process
 * grows with the transfer. A real edge (`burrow edge --dev --tcp-ports`) and a real `burrow tcp` run as
 * child processes on loopback; this process is the public client and the local server.
 *
 *   npm run build && node dist/bench/tcp-transfer.js [MiB]      (default 1024)
 *
 * Prints one line per direction: MiB/s, and the peak RSS of the edge and of the client (VmHWM from
 * /proc, so Linux only). docs/tcp.md keeps the last run's numbers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

async function main(): Promise<void> {
  const first = 20_000 + Math.floor(Math.random() * 30_000);
  const edge = await start(['edge', '--dev', '--port', '0', '--data', join(dir, 'data'), '--tcp-ports', `${first}-${first + 9}`], /dev token \(shown once\): (svc_pat_\S+)\n/);
  const token = edge.match[1]!;
  const url = /listening on (http:\/\/\S+)/.exec(edge.match.input!)![1]!;
  let mode: 'upload' | 'download' = 'upload';
  let local: Promise<number> = Promise.resolve(0);
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    if (mode === 'upload') local = drain(socket).then((bytes) => (socket.end(), bytes));
    else local = pump(socket, total).then(() => total);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = await start(['tcp', String((server.address() as AddressInfo).port), '--edge', url, '--token', token], /Forwarding tcp:\/\/\S+:([0-9]+) ->/);
  const port = Number(client.match[1]);
  for (const direction of ['upload', 'download'] as const) {
    mode = direction;
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    const started = performance.now();
    const received = direction === 'upload' ? (await pump(socket, total), await drain(socket), await local) : await drain(socket);
    socket.end();
    const seconds = (performance.now() - started) / 1000;
    if (received !== total) throw new Error(`${direction}: ${received} of ${total} bytes arrived`);
    console.log(
      `${direction} ${total / MIB} MiB in ${seconds.toFixed(1)} s (${(total / MIB / seconds).toFixed(0)} MiB/s); peak RSS: edge ${peakMiB(edge.child.pid!)} MiB, client ${peakMiB(client.child.pid!)} MiB`,
    );
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
