/**
 * TCP tunnel measurements shared by `npm run bench`'s tcp phase (bench/e2e.ts) and bench/tcp-transfer.ts:
 * a local server in this process that takes a bulk upload, sends a bulk download or echoes, and from
 * the public side a transfer each way through a port and one-byte round trips on one open connection.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { MIB } from './payloads.js';

export type TcpMode = 'upload' | 'download' | 'echo';

/** Writes `bytes` to `socket` in 64 KiB pieces, waiting for drain, then ends it. */
export async function pump(socket: Socket, bytes: number): Promise<void> {
  const piece = Buffer.alloc(64 * 1024, 0x5a);
  for (let sent = 0; sent < bytes; sent += piece.byteLength) {
    if (!socket.write(piece)) await once(socket, 'drain');
  }
  socket.end();
}

/** Counts what `socket` delivers until its end. */
export function drain(socket: Socket): Promise<number> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    socket.on('data', (chunk: Buffer) => (bytes += chunk.byteLength));
    socket.on('end', () => resolve(bytes));
    socket.on('error', reject);
  });
}

/** The local server behind the tunnels: what it does with the next connection is `mode`. */
export class TcpLocal {
  mode: TcpMode = 'echo';
  private received: Promise<number> = Promise.resolve(0);
  readonly server: Server;

  constructor(private readonly total: number) {
    this.server = createServer({ allowHalfOpen: true }, (socket) => {
      socket.setNoDelay(true);
      if (this.mode === 'upload') this.received = drain(socket).then((bytes) => (socket.end(), bytes));
      else if (this.mode === 'download') this.received = pump(socket, this.total).then(() => this.total);
      else socket.on('data', (chunk: Buffer) => socket.write(chunk));
    });
  }

  async listen(): Promise<number> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return (this.server.address() as AddressInfo).port;
  }

  /** What the last upload connection delivered to the local server. */
  lastReceived(): Promise<number> {
    return this.received;
  }

  close(): void {
    this.server.close();
  }
}

/** One byte there and back `count` times on one connection to `port` (an echoing local server): p50 and p99 in µs. */
export async function roundTrips(port: number, count: number): Promise<{ p50Us: number; p99Us: number }> {
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
  return { p50Us: Math.round(times[Math.floor(count / 2)]!), p99Us: Math.round(times[Math.floor(count * 0.99)]!) };
}

export interface TcpPathResult {
  label: string;
  /** MiB/s from the public client to the local server, and back. */
  uploadMiBs: number;
  downloadMiBs: number;
  uploadS: number;
  downloadS: number;
  p50Us: number;
  p99Us: number;
}

/** Both directions of `local`'s total through `port`, then `trips` round trips; a short transfer throws. */
export async function measureTcpPath(label: string, port: number, local: TcpLocal, total: number, trips: number): Promise<TcpPathResult> {
  const seconds: Record<'upload' | 'download', number> = { upload: 0, download: 0 };
  for (const direction of ['upload', 'download'] as const) {
    local.mode = direction;
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    const started = performance.now();
    const received = direction === 'upload' ? (await pump(socket, total), await drain(socket), await local.lastReceived()) : await drain(socket);
    socket.end();
    seconds[direction] = (performance.now() - started) / 1000;
    if (received !== total) throw new Error(`${label} ${direction}: ${received} of ${total} bytes arrived`);
  }
  local.mode = 'echo';
  const { p50Us, p99Us } = await roundTrips(port, trips);
  const rate = (s: number): number => Math.round(total / MIB / s);
  return { label, uploadMiBs: rate(seconds.upload), downloadMiBs: rate(seconds.download), uploadS: seconds.upload, downloadS: seconds.download, p50Us, p99Us };
}

/** The lines both benchmarks print for a path. */
export function tcpPathLines(result: TcpPathResult, total: number, memory = ''): string[] {
  const mib = total / MIB;
  return [
    `${result.label} upload ${mib} MiB in ${result.uploadS.toFixed(1)} s (${result.uploadMiBs} MiB/s)${memory}`,
    `${result.label} download ${mib} MiB in ${result.downloadS.toFixed(1)} s (${result.downloadMiBs} MiB/s)${memory}`,
    `${result.label} one connection, 1-byte round trip: p50 ${result.p50Us} µs, p99 ${result.p99Us} µs`,
  ];
}

/** A process's peak resident set so far (VmHWM), in MiB; null where /proc has none (not Linux, gone). */
export function peakMiB(pid: number): number | null {
  try {
    const line = /VmHWM:\s+([0-9]+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return line === null ? null : Math.round(Number(line[1]) / 1024);
  } catch {
    return null;
  }
}

/** `npm run bench`'s tcp phase, as its results file keeps it. */
export interface TcpRecord {
  /** MiB sent each way per path. */
  mib: number;
  trips: number;
  paths: TcpPathResult[];
  /** The edge's and `burrow tcp`'s peak RSS (VmHWM) after the burrow path's transfers. */
  peakRssMiB: { edge: number | null; client: number | null };
  /** Why `ssh -R` was not measured, or null. */
  sshSkipped: string | null;
  error: string | null;
}
