/**
 * A real Redis for tests: Debian's redis-server (scripts/ensure-redis.mjs installs it from `npm test`) as a
 * child process on a free loopback port, its files in a temp dir, append-only with an fsync per write (the
 * persistence cluster mode asks for, docs/cluster.md), so a test can kill it and start it again on the same
 * port and data. Stopped when the test file ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after } from 'node:test';
import { ROOT, freePort, tempDir, waitFor } from './helpers.js';

const ensureRedis = (await import(pathToFileURL(join(ROOT, 'scripts', 'ensure-redis.mjs')).href)) as {
  REDIS_SERVER: string;
  redisMissing(): string | null;
};

/** Why Redis tests are skipped here, or false: pass as node:test's `skip`. */
export const redisSkip: string | false = ((): string | false => {
  const missing = ensureRedis.redisMissing();
  return missing === null ? false : `skipped: ${missing}`;
})();

export class TestRedis {
  private child: ChildProcess | null = null;
  private output = '';

  private constructor(readonly port: number, readonly dir: string) {}

  /** redis://127.0.0.1:PORT */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts a fresh Redis on a free port; stopped (kill -9) when the test file ends. */
  static async start(): Promise<TestRedis> {
    const redis = new TestRedis(await freePort(), tempDir('burrow-redis-'));
    await redis.restart();
    after(() => redis.kill());
    return redis;
  }

  /** Starts (again) on the same port and data dir; resolves when it accepts connections. */
  async restart(): Promise<void> {
    if (this.child !== null) throw new Error('redis-server is running already');
    this.output = '';
    const child = spawn(
      ensureRedis.REDIS_SERVER,
      [
        '--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '',
        '--appendonly', 'yes', '--appendfsync', 'always', '--protected-mode', 'no', '--loglevel', 'warning',
        // Test-sized: no background rewrite stalls in the middle of a run.
        '--auto-aof-rewrite-percentage', '0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    child.stdout!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.once('exit', () => {
      if (this.child === child) this.child = null;
    });
    await waitFor(() => this.ping(), 10_000, `redis-server on port ${this.port} (output: ${this.output.slice(-500)})`);
  }

  private async ping(): Promise<boolean> {
    const { connect } = await import('node:net');
    return new Promise((resolve) => {
      const socket = connect(this.port, '127.0.0.1');
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.once('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.once('error', () => resolve(false));
    });
  }

  /** kill -9: no shutdown save (the append-only file has every acknowledged write). */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null) return;
    this.child = null;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
}
