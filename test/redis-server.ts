/**
 * A real Redis for tests: Debian's redis-server (scripts/ensure-redis.mjs installs it from `npm test`) as a
 * child process on a free loopback port, its files in a temp dir, append-only with an fsync per write (the
 * persistence cluster mode asks for, docs/cluster.md), so a test can kill it and start it again on the same
 * port and data. Stopped when the test file ends.
 *
 * `TestSentinels` is Redis high availability for tests: a master, its replicas and three sentinels
 * (the same binary with --sentinel, as Debian's redis-sentinel is), each on a free loopback port with
 * its own temp dir, watching the master as `burrow` with test-sized timings (down after 1 s).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before } from 'node:test';
import { Redis } from 'ioredis';
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

  private constructor(
    readonly port: number,
    readonly dir: string,
    /** Given after the usual ones (--replicaof, or a config file with --sentinel first). */
    private readonly extraArgs: string[] = [],
    private readonly configFile: string | null = null,
  ) {}

  /** redis://127.0.0.1:PORT */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts a fresh Redis on a free port (a replica of `replicaOf` when given); stopped (kill -9) when the test file ends. */
  static async start(options: { replicaOf?: number; args?: string[] } = {}): Promise<TestRedis> {
    const extra = [...(options.replicaOf === undefined ? [] : ['--replicaof', '127.0.0.1', String(options.replicaOf)]), ...(options.args ?? [])];
    const redis = new TestRedis(await freePort(), tempDir('burrow-redis-'), extra);
    await redis.restart();
    after(() => redis.kill());
    return redis;
  }

  /** A sentinel watching the master on `masterPort` as `name` (quorum 2): its own config file, which it rewrites. */
  static async sentinel(masterPort: number, name: string): Promise<TestRedis> {
    const port = await freePort();
    const dir = tempDir('burrow-sentinel-');
    const config = join(dir, 'sentinel.conf');
    writeFileSync(
      config,
      [
        `port ${port}`, 'bind 127.0.0.1', 'protected-mode no', `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${masterPort} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 10000`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    );
    const sentinel = new TestRedis(port, dir, ['--sentinel'], config);
    await sentinel.restart();
    after(() => sentinel.kill());
    return sentinel;
  }

  /** Starts (again) on the same port and data dir; resolves when it accepts connections. */
  async restart(): Promise<void> {
    if (this.child !== null) throw new Error('redis-server is running already');
    this.output = '';
    const args =
      this.configFile !== null
        ? [this.configFile, ...this.extraArgs, '--loglevel', 'warning']
        : [
            '--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '',
            '--appendonly', 'yes', '--appendfsync', 'always', '--protected-mode', 'no', '--loglevel', 'warning',
            // Test-sized: no background rewrite stalls in the middle of a run.
            '--auto-aof-rewrite-percentage', '0',
            ...this.extraArgs,
          ];
    const child = spawn(ensureRedis.REDIS_SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
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

  /** Runs one command (RESP, as redis-cli would send it) and returns the raw reply once it stops growing. */
  async command(...words: string[]): Promise<string> {
    const { connect } = await import('node:net');
    return new Promise((resolve, reject) => {
      const socket = connect(this.port, '127.0.0.1');
      let reply = '';
      let settle: NodeJS.Timeout | null = null;
      socket.once('connect', () => socket.write(`*${words.length}\r\n${words.map((word) => `$${Buffer.byteLength(word)}\r\n${word}\r\n`).join('')}`));
      socket.on('data', (data) => {
        reply += data.toString();
        if (settle !== null) clearTimeout(settle);
        settle = setTimeout(() => {
          socket.destroy();
          resolve(reply);
        }, 20);
      });
      socket.once('error', reject);
    });
  }

  /** SIGSTOP / SIGCONT: a process that hangs (no replies, connections stay open), then goes on. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
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

/**
 * A master with its replicas under three sentinels, as docs/cluster.md recommends: `url` is the
 * redis-sentinel:// URL the edges take. Everything is killed when the test file ends.
 */
export class TestSentinels {
  static readonly MASTER_NAME = 'burrow';

  private constructor(
    readonly master: TestRedis,
    readonly replicas: TestRedis[],
    readonly sentinels: TestRedis[],
  ) {}

  get url(): string {
    return `redis-sentinel://${this.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(',')}/${TestSentinels.MASTER_NAME}`;
  }

  /** Starts them and waits until every sentinel knows every replica and the other sentinels (bounded). */
  static async start(replicaCount = 2): Promise<TestSentinels> {
    // A replica's first sync starts at once (Redis waits 5 s by default for more replicas to share it).
    const args = ['--repl-diskless-sync-delay', '0'];
    const master = await TestRedis.start({ args });
    const replicas: TestRedis[] = [];
    for (let i = 0; i < replicaCount; i++) replicas.push(await TestRedis.start({ replicaOf: master.port, args }));
    await waitFor(
      async () => (await master.command('INFO', 'replication')).split('state=online').length - 1 >= replicaCount,
      30_000,
      'the replicas to be in sync with the master',
    );
    const sentinels: TestRedis[] = [];
    for (let i = 0; i < 3; i++) sentinels.push(await TestRedis.sentinel(master.port, TestSentinels.MASTER_NAME));
    const set = new TestSentinels(master, replicas, sentinels);
    await waitFor(
      async () => {
        for (const sentinel of sentinels) {
          const known = await sentinel.command('SENTINEL', 'REPLICAS', TestSentinels.MASTER_NAME);
          const others = await sentinel.command('SENTINEL', 'SENTINELS', TestSentinels.MASTER_NAME);
          if (countEntries(known) < replicaCount || countEntries(others) < 2) return false;
        }
        return true;
      },
      30_000,
      'the sentinels to find the replicas and each other',
    );
    return set;
  }

  /** The port of the master the sentinels name now (asks the first one that answers). */
  async masterPort(): Promise<number> {
    for (const sentinel of this.sentinels) {
      const reply = await sentinel.command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', TestSentinels.MASTER_NAME).catch(() => '');
      const port = /\r\n(\d+)\r\n$/.exec(reply)?.[1];
      if (port !== undefined) return Number(port);
    }
    throw new Error('no sentinel names a master');
  }
}

/** The number of entries in a RESP array reply (`*N`). */
function countEntries(reply: string): number {
  return Number(/^\*(\d+)/.exec(reply)?.[1] ?? 0);
}

/**
 * A store test file's Redis and one ioredis client on it (fails fast, no offline queue), both started at
 * the top level and ended with the file; a client that never connects when Redis tests are skipped.
 */
export async function testRedisClient(): Promise<{ server: TestRedis; client: Redis }> {
  const server = redisSkip === false ? await TestRedis.start() : (null as unknown as TestRedis);
  const client = new Redis(server?.url ?? 'redis://127.0.0.1:1', { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 2_000, lazyConnect: redisSkip !== false });
  before(async () => {
    if (redisSkip === false && client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  });
  after(() => client.disconnect());
  return { server, client };
}

