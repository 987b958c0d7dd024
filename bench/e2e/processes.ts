/**
 * The benchmark's child processes: spawned, watched and always stopped. Every child goes into one
 * `Children` set; `stopAll()` ends them gracefully (SIGTERM, then SIGKILL after a grace period) and a
 * synchronous `process.on('exit')` hook SIGKILLs whatever is still alive, so a failing or interrupted run
 * leaves nothing behind.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';
import { createServer } from 'node:net';

/** Keeps the last `limit` characters of a stream's text. */
class Tail {
  private text = '';
  constructor(private readonly limit = 64 * 1024) {}
  push(chunk: string): void {
    this.text += chunk;
    if (this.text.length > this.limit * 2) this.text = this.text.slice(-this.limit);
  }
  get value(): string {
    return this.text.length > this.limit ? this.text.slice(-this.limit) : this.text;
  }
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when the runner asked it to stop (not a crash). */
  requested: boolean;
  at: number;
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Send stdout to this file (opened for append) instead of a pipe the runner reads. */
  stdoutFile?: string;
  /** Keep stdin as an open pipe; the child sees EOF when the runner dies. */
  stdinPipe?: boolean;
}

export class Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly pid: number;
  readonly stdoutFile: string | undefined;
  private readonly out = new Tail();
  private readonly err = new Tail();
  private readonly listeners = new Set<(text: string) => void>();
  exit: ExitInfo | null = null;
  stopRequested = false;
  readonly exited: Promise<ExitInfo>;

  constructor(options: SpawnOptions) {
    this.name = options.name;
    this.stdoutFile = options.stdoutFile;
    let stdoutFd: number | undefined;
    if (options.stdoutFile !== undefined) stdoutFd = openSync(options.stdoutFile, 'a');
    const stdio: StdioOptions = [options.stdinPipe === true ? 'pipe' : 'ignore', stdoutFd ?? 'pipe', 'pipe'];
    this.process = spawn(options.command, options.args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio,
    });
    if (stdoutFd !== undefined) closeSync(stdoutFd);
    if (this.process.pid === undefined) throw new Error(`could not start ${options.name}`);
    this.pid = this.process.pid;
    this.process.stdout?.setEncoding('utf8');
    this.process.stderr?.setEncoding('utf8');
    this.process.stdout?.on('data', (chunk: string) => {
      this.out.push(chunk);
      for (const listener of this.listeners) listener(chunk);
    });
    this.process.stderr?.on('data', (chunk: string) => {
      this.err.push(chunk);
      for (const listener of this.listeners) listener(chunk);
    });
    this.exited = new Promise<ExitInfo>((resolve) => {
      this.process.once('exit', (code, signal) => {
        this.exit = { code, signal, requested: this.stopRequested, at: Date.now() };
        resolve(this.exit);
      });
    });
  }

  /** Calls `listener` with every chunk of output (stdout and stderr) from now on; returns the unsubscribe. */
  onOutput(listener: (text: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get alive(): boolean {
    return this.exit === null;
  }

  /** What the child wrote to stdout: the piped tail, or the first 64 KiB of its stdout file. */
  get stdout(): string {
    if (this.stdoutFile === undefined) return this.out.value;
    try {
      const fd = openSync(this.stdoutFile, 'r');
      try {
        const buffer = Buffer.alloc(64 * 1024);
        const read = readSync(fd, buffer, 0, buffer.length, 0);
        return buffer.subarray(0, read).toString('utf8');
      } finally {
        closeSync(fd);
      }
    } catch {
      return '';
    }
  }

  get stderr(): string {
    return this.err.value;
  }

  /** Resolves with the first match of `pattern` in the child's output; rejects on exit or timeout. */
  async waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    return new Promise<RegExpMatchArray>((resolve, reject) => {
      let poll: NodeJS.Timeout | undefined;
      const done = (): void => {
        clearTimeout(timer);
        if (poll !== undefined) clearInterval(poll);
        this.listeners.delete(check);
      };
      const check = (): void => {
        const found = `${this.stdout}\n${this.stderr}`.match(pattern);
        if (found !== null) {
          done();
          resolve(found);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.name}: no ${pattern} within ${timeoutMs} ms; output:\n${this.describeOutput()}`));
      }, timeoutMs);
      this.listeners.add(check);
      if (this.stdoutFile !== undefined) poll = setInterval(check, 25);
      void this.exited.then((exit) => {
        done();
        reject(new Error(`${this.name} exited (code ${exit.code}, signal ${exit.signal}) before ${pattern}; output:\n${this.describeOutput()}`));
      });
      check();
    });
  }

  describeOutput(): string {
    const out = this.stdout.trim();
    const err = this.stderr.trim();
    return [out === '' ? '' : `stdout: ${out.slice(-2000)}`, err === '' ? '' : `stderr: ${err.slice(-2000)}`].filter(Boolean).join('\n') || '(no output)';
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves with how it ended. */
  async stop(graceMs = 5_000): Promise<ExitInfo & { killed: boolean }> {
    this.stopRequested = true;
    if (this.exit !== null) return { ...this.exit, killed: false };
    this.process.kill('SIGTERM');
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      this.process.kill('SIGKILL');
    }, graceMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return { ...exit, killed };
  }
}

/** Every child the runner started; stops them all, in reverse start order, and on process exit. */
export class Children {
  readonly all: Child[] = [];

  constructor() {
    process.on('exit', () => {
      for (const child of this.all) if (child.alive) child.process.kill('SIGKILL');
    });
  }

  spawn(options: SpawnOptions): Child {
    const child = new Child(options);
    this.all.push(child);
    return child;
  }

  /**
   * Starts a helper server script of the benchmark (bench/e2e/child-server.ts: it announces `{"port":N}`
   * and stops when its stdin closes) and waits for its port.
   */
  async spawnServer(name: string, script: string, args: string[] = []): Promise<{ child: Child; port: number }> {
    const child = this.spawn({ name, command: process.execPath, args: [script, ...args], stdinPipe: true });
    const port = Number((await child.waitFor(/"port":(\d+)/, 10_000))[1]);
    return { child, port };
  }

  /** Children that ended without being asked to. */
  crashed(): Child[] {
    return this.all.filter((child) => child.exit !== null && !child.exit.requested);
  }

  async stopAll(graceMs = 5_000): Promise<Map<string, ExitInfo & { killed: boolean }>> {
    const exits = new Map<string, ExitInfo & { killed: boolean }>();
    for (const child of [...this.all].reverse()) exits.set(child.name, await child.stop(graceMs));
    return exits;
  }

  killAll(): void {
    for (const child of this.all) {
      child.stopRequested = true;
      if (child.alive) child.process.kill('SIGKILL');
    }
  }
}

/** A loopback port free at the moment of asking, for a child to listen on. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
