/**
 * The edge under fuzzing runs as its own process (`burrow edge`), because a uWebSockets.js misuse can
 * abort the process: the fuzzer must survive the edge dying, tell how it died, and start it again on the
 * same port and data directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { BIN, testEdgeArgs } from '../helpers.js';

export interface EdgeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The end of what the edge wrote to stdout and stderr. */
  output: string;
}

/** What a crash is known by: the error and the edge's own frame that threw it, or the signal. */
export interface CrashSignature {
  key: string;
  /** The lines of the edge's output that show the crash. */
  excerpt: string;
}

const OUTPUT_KEPT = 32 * 1024;

export class EdgeProcess {
  private output = '';
  private stopping = false;
  readonly exited: Promise<EdgeExit>;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    const keep = (chunk: Buffer): void => {
      this.output += chunk.toString('utf8');
      if (this.output.length > 2 * OUTPUT_KEPT) this.output = this.output.slice(-OUTPUT_KEPT);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        // The pipes may still hold the last lines of a crash: read them to their end first.
        let open = 2;
        const done = (): void => {
          if (--open === 0) resolve({ code, signal, output: this.output.slice(-OUTPUT_KEPT) });
        };
        if (child.stdout!.readableEnded) done();
        else child.stdout!.once('close', done);
        if (child.stderr!.readableEnded) done();
        else child.stderr!.once('close', done);
      });
    });
  }

  /** Starts `burrow edge` on `port` (a fixed port, so tunnels reconnect to the same URL after a restart). */
  static async start(port: number, dataDir: string, env: Record<string, string>, extraArgs: string[] = []): Promise<EdgeProcess> {
    const child = spawn(process.execPath, [BIN, ...testEdgeArgs(['edge', '--port', String(port), '--data', dataDir, ...extraArgs])], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const edge = new EdgeProcess(child, port);
    const listening = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the edge did not start in 20 s:\n${edge.output}`)), 20_000);
      const check = (): void => {
        if (/listening on/.test(edge.output)) {
          clearTimeout(timer);
          child.stdout!.off('data', check);
          resolve();
        }
      };
      child.stdout!.on('data', check);
      void edge.exited.then((exit) => {
        clearTimeout(timer);
        reject(new Error(`the edge exited with ${exit.code ?? exit.signal} before listening:\n${exit.output}`));
      });
    });
    await listening;
    return edge;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Whether this exit was asked for (stop()), not a crash. */
  get stopped(): boolean {
    return this.stopping;
  }

  /**
   * What the edge's threads are doing (Linux): for an edge that is alive but does not answer, whether
   * its main thread spins (R) or sleeps on a lock (S, futex_wait) tells a busy loop from a deadlock.
   */
  threads(): string {
    const pid = this.child.pid;
    if (pid === undefined || !this.alive) return 'not running';
    try {
      return readdirSync(`/proc/${pid}/task`)
        .map((task) => {
          const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
          const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ', 1)[0];
          let wchan = '';
          try {
            wchan = readFileSync(`/proc/${pid}/task/${task}/wchan`, 'utf8');
          } catch {
            // Not readable on this kernel.
          }
          const name = readFileSync(`/proc/${pid}/task/${task}/comm`, 'utf8').trim();
          return `${name}:${state}${wchan === '' || wchan === '0' ? '' : `(${wchan})`}`;
        })
        .join(' ');
    } catch (error) {
      return `unknown (${(error as Error).message})`;
    }
  }

  /** A graceful stop, then SIGKILL if it takes too long. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (!this.alive) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * The crash's identity: Node's report of an uncaught exception names the error and where it was thrown
 * (`Error: uWS.HttpResponse must not be accessed ... @ PublicHttpStream.tryWrite (dist/src/edge/public-stream.js:193)`);
 * a native abort has only its signal and last lines.
 */
export function crashSignature(exit: EdgeExit): CrashSignature {
  const lines = exit.output.split('\n');
  const errorAt = lines.findIndex((line) => /^(?:Uncaught )?[A-Za-z]*(?:Error|Exception)\b/.test(line));
  if (errorAt >= 0) {
    const message = lines[errorAt]!.trim();
    const frameLine = lines.slice(errorAt + 1).find((line) => /^\s+at /.test(line));
    const where = frameLine === undefined ? 'unknown place' : shortenFrame(frameLine);
    const start = Math.max(0, errorAt - 4);
    const excerpt = lines
      .slice(start, errorAt + 8)
      .filter((line) => line.trim() !== '')
      .join('\n');
    return { key: `${message.length > 160 ? `${message.slice(0, 160)}…` : message} @ ${where}`, excerpt };
  }
  const tail = lines.filter((line) => line.trim() !== '').slice(-8);
  const last = tail.length === 0 ? 'no output' : tail[tail.length - 1]!.trim();
  return { key: `exit ${exit.code ?? exit.signal}: ${last.slice(0, 160)}`, excerpt: tail.join('\n') };
}

/** `    at PublicHttpStream.tryWrite (file:///.../dist/src/edge/public-stream.js:193:32)` → the function and file:line. */
function shortenFrame(line: string): string {
  const text = line.trim().replace(/^at /, '');
  const match = /^(.*?)\s*\((?:file:\/\/)?(.*?):(\d+):\d+\)$/.exec(text);
  if (match === null) return text.replace(/file:\/\/\S*\/(dist\/)/, '$1');
  const file = match[2]!.replace(/^.*?\/(dist\/)/, '$1');
  return `${match[1]} (${file}:${match[3]})`;
}
