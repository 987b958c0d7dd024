/**
 * Per-process counters the benchmarks read around a run (Linux): CPU ticks split into user and system
 * (/proc/<pid>/stat, every thread, living or gone), voluntary and involuntary context switches (the sum
 * over /proc/<pid>/task/<tid>/status: the process's own lines count its main thread only), and syscalls by
 * name (`perf stat` on the syscall tracepoints). Used by bench/ab.ts and the end-to-end benchmark's floor
 * profile (bench/e2e/floor-profile.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * The syscalls counted by name: what an event loop, a proxy and sshd spend their time in. `(all)` is every
 * syscall (raw_syscalls:sys_enter), so the ones not named here still show in the total.
 */
export const SYSCALLS = [
  'read', 'readv', 'recvfrom', 'recvmsg',
  'write', 'writev', 'sendto', 'sendmsg',
  'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'epoll_ctl', 'poll', 'ppoll', 'select', 'pselect6',
  'futex', 'getpid', 'getrandom', 'accept4', 'close', 'setsockopt', 'ioctl', 'fcntl',
  'pwrite64', 'pread64', 'fdatasync', 'msync', 'madvise', 'mprotect', 'mmap', 'munmap',
] as const;
export const ALL_SYSCALLS = '(all)';
/** Syscalls that read from or write to a socket (or a pipe), as counted in the floor profile's columns. */
export const READ_SYSCALLS = ['read', 'readv', 'recvfrom', 'recvmsg'] as const;
export const WRITE_SYSCALLS = ['write', 'writev', 'sendto', 'sendmsg'] as const;

/** Why `perf stat` cannot count syscall tracepoints here, or null when it can. */
export function perfProblem(): string | null {
  const result = spawnSync('perf', ['stat', '-x,', '-e', 'syscalls:sys_enter_write', '--', 'true'], { encoding: 'utf8', timeout: 20_000 });
  if (result.error !== undefined) return `perf is not available (${result.error.message})`;
  if (result.status !== 0) return `perf stat on syscall tracepoints is not permitted or not supported: ${(result.stderr ?? '').trim().split('\n').filter(Boolean).slice(-1)[0] ?? `exit ${result.status}`}`;
  return null;
}

/** Counts a process's syscalls (all its threads) until the returned function is called (perf stat, tracepoints). */
export function countSyscalls(pid: number): () => Promise<Map<string, number>> {
  const events = ['raw_syscalls:sys_enter', ...SYSCALLS.map((name) => `syscalls:sys_enter_${name}`)].join(',');
  const perf = spawn('perf', ['stat', '-x,', '-e', events, '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let text = '';
  perf.stderr.on('data', (data: Buffer) => (text += data.toString()));
  const closed = new Promise<void>((done) => perf.once('close', () => done()));
  return async () => {
    perf.kill('SIGINT');
    await closed;
    const counts = new Map<string, number>();
    for (const line of text.split('\n')) {
      const [count, , event] = line.split(',');
      if (event === 'raw_syscalls:sys_enter') counts.set(ALL_SYSCALLS, Number(count));
      else if (event?.startsWith('syscalls:sys_enter_') === true) counts.set(event.slice('syscalls:sys_enter_'.length), Number(count));
    }
    return counts;
  };
}

/** utime and stime of a process (all threads) or of one thread, clock ticks (proc(5): fields 14 and 15). */
export function ticksOf(pid: number, tid: number | null = null): { user: number; system: number } {
  const stat = readFileSync(tid === null ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]), system: Number(fields[12]) };
}

/** Context switches summed over a process's threads alive now. */
export function contextSwitches(pid: number): { voluntary: number; involuntary: number } {
  let voluntary = 0;
  let involuntary = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return { voluntary, involuntary };
}
