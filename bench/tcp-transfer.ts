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
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Children } from './e2e/processes.js';
import { ensureSsh, startSshReverse } from './e2e/ssh.js';
import { MIB } from './e2e/payloads.js';
import { measureTcpPath, peakMiB, TcpLocal, tcpPathLines } from './e2e/tcp.js';

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

async function main(): Promise<void> {
  const first = 20_000 + Math.floor(Math.random() * 30_000);
  const edge = await start(['edge', '--dev', '--port', '0', '--data', join(dir, 'data'), '--tcp-ports', `${first}-${first + 9}`], /dev token \(shown once\): (svc_pat_\S+)\n/);
  const token = edge.match[1]!;
  const url = /listening on (http:\/\/\S+)/.exec(edge.match.input!)![1]!;
  const local = new TcpLocal(total);
  const localPort = await local.listen();
  const client = await start(['tcp', String(localPort), '--edge', url, '--token', token], /Forwarding tcp:\/\/\S+:([0-9]+) ->/);
  const burrow = await measureTcpPath('burrow tcp', Number(client.match[1]), local, total, 2_000);
  for (const line of tcpPathLines(burrow, total, `; peak RSS: edge ${peakMiB(edge.child.pid!)} MiB, client ${peakMiB(client.child.pid!)} MiB`)) console.log(line);
  const missing = ensureSsh(join(import.meta.dirname, '..', '..'));
  if (missing !== null) console.log(`ssh -R skipped: ${missing}`);
  else {
    const ssh = new Children();
    try {
      const reverse = await startSshReverse(ssh, join(dir, 'ssh'), localPort);
      for (const line of tcpPathLines(await measureTcpPath('ssh -R', reverse.port, local, total, 2_000), total)) console.log(line);
    } finally {
      await ssh.stopAll(2_000);
    }
  }
  local.close();
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
