/**
 * The anchor issues 24 and 25 are measured against: OpenSSH's reverse tunnel, `ssh -R` (Debian's OpenSSH,
 * aes128-gcm, one TCP connection carrying every public connection as a channel), as serveo, localhost.run
 * and sish use it. A private sshd runs as a child of the benchmark on a loopback port, with its own host
 * key, config and authorized key in the run's temp dir (never the system's sshd or keys); `ssh -N -R`
 * connects to it, and sshd's session process then listens on the public port and forwards each connection
 * over the channel to ssh, which dials the target. Two processes on the path, as in a tunnel: the sshd
 * session process (the edge's role) and ssh (the client's).
 *
 * scripts/ensure-ssh.mjs installs Debian's openssh-server and openssh-client when they are missing.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import type { Children } from './processes.js';

export const SSHD = process.env.BURROW_SSHD ?? '/usr/sbin/sshd';
export const SSH = process.env.BURROW_SSH ?? '/usr/bin/ssh';
const SSH_KEYGEN = '/usr/bin/ssh-keygen';
/** The cipher OpenSSH picks first on x86 with AES-NI, named so the row says what it measured. */
export const SSH_CIPHER = 'aes128-gcm@openssh.com';

/** Makes sure sshd and ssh are there (installing Debian's packages when it can); null when ready, else why not. */
export function ensureSsh(root: string): string | null {
  if (existsSync(SSHD) && existsSync(SSH) && existsSync(SSH_KEYGEN)) return null;
  const result = spawnSync(process.execPath, [join(root, 'scripts', 'ensure-ssh.mjs')], { encoding: 'utf8', timeout: 300_000 });
  if (existsSync(SSHD) && existsSync(SSH) && existsSync(SSH_KEYGEN)) return null;
  return `no OpenSSH at ${SSHD} / ${SSH} (${(result.stderr ?? '').trim().split('\n').pop() ?? 'ensure-ssh failed'})`;
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

function keygen(file: string): void {
  const result = spawnSync(SSH_KEYGEN, ['-q', '-t', 'ed25519', '-N', '', '-f', file], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`ssh-keygen failed: ${result.stderr}`);
}

function sshdConfig(dir: string, port: number, user: string): string {
  return [
    `ListenAddress 127.0.0.1:${port}`,
    `HostKey ${join(dir, 'host_key')}`,
    `PidFile ${join(dir, 'sshd.pid')}`,
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
    `AllowUsers ${user}`,
    'PermitRootLogin prohibit-password',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'StrictModes no',
    'AllowTcpForwarding remote',
    'GatewayPorts no',
    'X11Forwarding no',
    'PrintMotd no',
    'UseDNS no',
    `Ciphers ${SSH_CIPHER}`,
    'Compression no',
    'LogLevel ERROR',
    '',
  ].join('\n');
}

/** Pids of the direct children of `pid` (through /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The process under sshd's listener that owns the channels and the forwarded port: the deepest one (with
 * privilege separation the monitor forks it; for root without a session it may be the only child).
 */
function sessionProcess(listener: number): number | null {
  let current = childrenOf(listener);
  let deepest: number | null = null;
  while (current.length > 0) {
    deepest = current[0]!;
    current = current.flatMap(childrenOf);
  }
  return deepest;
}

async function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface SshReverse {
  /** The forwarded port on the "server" side: requests go here. */
  port: number;
  /** sshd's session process (forwards public connections into the channel) and the ssh client. */
  pids: { sshd: number; ssh: number };
}

/** Starts a private sshd and `ssh -N -R` to it in `dir`, as children; resolves once the forwarded port accepts. */
/** `name`: the ssh client's process name among `children` (its sshd's is `${name}d`), when a run has two. */
export async function startSshReverse(children: Children, dir: string, targetPort: number, name = 'ssh'): Promise<SshReverse> {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o700);
  // sshd insists on its privilege-separation directory even when it never drops to it for this user.
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) mkdirSync('/run/sshd', { mode: 0o755, recursive: true });
  const user = userInfo().username;
  keygen(join(dir, 'host_key'));
  keygen(join(dir, 'client_key'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'client_key.pub')));
  chmodSync(join(dir, 'authorized_keys'), 0o600);
  const sshdPort = await freePort();
  const forwardedPort = await freePort();
  const configFile = join(dir, 'sshd_config');
  writeFileSync(configFile, sshdConfig(dir, sshdPort, user));
  const listener = children.spawn({ name: `${name}d`, command: SSHD, args: ['-D', '-e', '-f', configFile] });
  const deadline = Date.now() + 10_000;
  while (!(await accepts(sshdPort))) {
    if (!listener.alive) throw new Error(`sshd exited: ${listener.describeOutput()}`);
    if (Date.now() > deadline) throw new Error('sshd did not listen within 10 s');
    await new Promise((done) => setTimeout(done, 25));
  }
  const client = children.spawn({
    name,
    command: SSH,
    args: [
      '-N', '-T',
      '-o', 'BatchMode=yes',
      '-o', 'StrictHostKeyChecking=no',
      '-o', `UserKnownHostsFile=${join(dir, 'known_hosts')}`,
      '-o', 'ExitOnForwardFailure=yes',
      '-o', `Ciphers=${SSH_CIPHER}`,
      '-o', 'Compression=no',
      '-o', 'ServerAliveInterval=30',
      '-i', join(dir, 'client_key'),
      '-p', String(sshdPort),
      '-R', `127.0.0.1:${forwardedPort}:127.0.0.1:${targetPort}`,
      `${user}@127.0.0.1`,
    ],
  });
  while (!(await accepts(forwardedPort))) {
    if (!client.alive) throw new Error(`ssh exited: ${client.describeOutput()}`);
    if (Date.now() > deadline + 10_000) throw new Error('ssh -R did not forward within 20 s');
    await new Promise((done) => setTimeout(done, 25));
  }
  const session = sessionProcess(listener.pid);
  if (session === null) throw new Error(`no sshd session process under ${listener.pid}`);
  return { port: forwardedPort, pids: { sshd: session, ssh: client.pid } };
}
