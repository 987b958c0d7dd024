/**
 * Samples the RSS and CPU time of the benchmark's processes from /proc every ~200 ms (Linux only; elsewhere
 * the numbers are null). A run asks for a `Window` over its start and end and gets each process's peak RSS
 * and mean CPU over exactly that span; the whole series is kept at a coarser step for the results file.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

export interface ProcSample {
  /** ms since the epoch. */
  t: number;
  /** Resident set size, KiB. */
  rssKiB: number;
  /** Peak RSS so far (VmHWM), KiB. */
  hwmKiB: number;
  /** The anonymous part of the RSS (heap, stacks, buffers), KiB: without the file pages an LMDB map brings in. */
  anonKiB: number;
  /** utime + stime, clock ticks. */
  ticks: number;
}

export interface ProcStats {
  peakRssMiB: number | null;
  /** Mean CPU over the window, percent of one core (up to 100 x cores). */
  cpuPct: number | null;
}

export function clockTicks(): number {
  try {
    const value = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(value) && value > 0 ? value : 100;
  } catch {
    return 100;
  }
}

export function readProc(pid: number): ProcSample | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces: state is field 3,
    // utime field 14 and stime field 15 (proc(5)).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+) kB/.exec(status);
    const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
    const anon = /RssAnon:\s+(\d+) kB/.exec(status);
    if (rss === null) return null; // a zombie has no memory lines
    return { t: Date.now(), rssKiB: Number(rss[1]), hwmKiB: hwm === null ? 0 : Number(hwm[1]), anonKiB: anon === null ? Number(rss[1]) : Number(anon[1]), ticks };
  } catch {
    return null;
  }
}

/**
 * Clock ticks of the whole machine, from the first line of /proc/stat: what processes ran (user, nice,
 * system), interrupt work (irq, softirq: on this benchmark mostly its own loopback traffic, which the
 * kernel does not charge to any process), what the hypervisor gave other guests (steal), and the total.
 */
export function readSystem(): { tasks: number; interrupts: number; steal: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const at = (index: number): number => ticks[index] ?? 0;
    const total = ticks.slice(0, 8).reduce((sum, value) => sum + value, 0);
    return { tasks: at(0) + at(1) + at(2), interrupts: at(5) + at(6), steal: at(7), total };
  } catch {
    return null;
  }
}

export interface WindowStats {
  procs: Record<string, ProcStats>;
  /**
   * What the whole machine's processes used over the window, percent of one core (up to 100 x cores);
   * null off Linux. Interrupt work and steal are not in it.
   */
  systemCpuPct: number | null;
  /** irq + softirq over the window, percent of one core. */
  interruptCpuPct: number | null;
  /** CPU time the hypervisor gave to other guests while this one wanted it, percent of one core. */
  stealCpuPct: number | null;
}

interface Tracked {
  pid: number;
  samples: ProcSample[];
  /** Every sample ever taken, thinned to one per `keepEveryMs`, for the results file. */
  series: ProcSample[];
  peakRssKiB: number;
  peakAnonKiB: number;
  lastHwmKiB: number;
}

export class Sampler {
  readonly hz = clockTicks();
  private readonly tracked = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly intervalMs = 200,
    private readonly keepEveryMs = 1_000,
  ) {}

  track(name: string, pid: number): void {
    this.tracked.set(name, { pid, samples: [], series: [], peakRssKiB: 0, peakAnonKiB: 0, lastHwmKiB: 0 });
    this.sampleOne(name);
  }

  /** The pid a process is tracked under (nginx workers and sshd's session process are no direct children). */
  pidOf(name: string): number | undefined {
    return this.tracked.get(name)?.pid;
  }

  start(): void {
    this.timer ??= setInterval(() => this.sampleAll(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  sampleAll(): void {
    for (const name of this.tracked.keys()) this.sampleOne(name);
  }

  private sampleOne(name: string): void {
    const entry = this.tracked.get(name)!;
    const sample = readProc(entry.pid);
    if (sample === null) return;
    entry.samples.push(sample);
    // Only the last ten minutes stay at full resolution; windows are shorter than that.
    if (entry.samples.length > 3_000) entry.samples.splice(0, 1_000);
    const last = entry.series[entry.series.length - 1];
    if (last === undefined || sample.t - last.t >= this.keepEveryMs) entry.series.push(sample);
    if (sample.rssKiB > entry.peakRssKiB) entry.peakRssKiB = sample.rssKiB;
    if (sample.anonKiB > entry.peakAnonKiB) entry.peakAnonKiB = sample.anonKiB;
    entry.lastHwmKiB = sample.hwmKiB;
  }

  /** Marks the start of a window; `end()` of the returned object gives per-process stats over it. */
  window(): { end(): WindowStats } {
    this.sampleAll();
    const system = readSystem();
    const startedAt = Date.now();
    const first = new Map<string, ProcSample | undefined>();
    for (const [name, entry] of this.tracked) first.set(name, entry.samples[entry.samples.length - 1]);
    return {
      end: () => {
        this.sampleAll();
        const systemEnd = readSystem();
        const stats: Record<string, ProcStats> = {};
        for (const [name, entry] of this.tracked) {
          const start = first.get(name);
          const end = entry.samples[entry.samples.length - 1];
          if (start === undefined || end === undefined || end === start) {
            stats[name] = { peakRssMiB: null, cpuPct: null };
            continue;
          }
          let peak = 0;
          for (let i = entry.samples.length - 1; i >= 0 && entry.samples[i]!.t >= startedAt - this.intervalMs; i--) {
            if (entry.samples[i]!.rssKiB > peak) peak = entry.samples[i]!.rssKiB;
          }
          const seconds = (end.t - start.t) / 1000;
          stats[name] = {
            peakRssMiB: peak / 1024,
            cpuPct: seconds > 0 ? ((end.ticks - start.ticks) / this.hz / seconds) * 100 : null,
          };
        }
        if (system === null || systemEnd === null || systemEnd.total <= system.total) {
          return { procs: stats, systemCpuPct: null, interruptCpuPct: null, stealCpuPct: null };
        }
        const share = (start: number, end: number): number => ((end - start) / (systemEnd.total - system.total)) * availableParallelism() * 100;
        return {
          procs: stats,
          systemCpuPct: share(system.tasks, systemEnd.tasks),
          interruptCpuPct: share(system.interrupts, systemEnd.interrupts),
          stealCpuPct: share(system.steal, systemEnd.steal),
        };
      },
    };
  }

  /** Peak RSS (and its anonymous part) over everything sampled and the kernel's own high-water mark, MiB. */
  peaks(): Record<string, { peakRssMiB: number; peakAnonMiB: number; hwmMiB: number }> {
    const out: Record<string, { peakRssMiB: number; peakAnonMiB: number; hwmMiB: number }> = {};
    for (const [name, entry] of this.tracked) out[name] = { peakRssMiB: entry.peakRssKiB / 1024, peakAnonMiB: entry.peakAnonKiB / 1024, hwmMiB: entry.lastHwmKiB / 1024 };
    return out;
  }

  /** The thinned series: [seconds since `origin`, RSS MiB, cumulative CPU seconds] per process. */
  series(origin: number): Record<string, Array<[number, number, number]>> {
    const out: Record<string, Array<[number, number, number]>> = {};
    for (const [name, entry] of this.tracked) {
      out[name] = entry.series.map((s) => [
        Math.round((s.t - origin) / 100) / 10,
        Math.round((s.rssKiB / 1024) * 10) / 10,
        Math.round((s.ticks / this.hz) * 100) / 100,
      ]);
    }
    return out;
  }
}
