/** What the benchmark ran on and against: machine, Node, and the Burrow checkout's commit. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, release, totalmem, type as osType } from 'node:os';

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  ramBytes: number;
  node: string;
  os: string;
}

export function machineInfo(): MachineInfo {
  let cpuModel = cpus()[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((entry) => entry.startsWith('model name'));
    if (line !== undefined) cpuModel = line.slice(line.indexOf(':') + 1).trim();
  } catch {
    // not Linux: keep os.cpus()'s answer
  }
  return { cpuModel, cores: availableParallelism(), ramBytes: totalmem(), node: process.version, os: `${osType()} ${release()}` };
}

export interface SourceInfo {
  dir: string;
  commit: string | null;
  /** Files changed or untracked in the checkout when the run started (its dist/ may hold them). */
  dirtyFiles: string[];
}

export function sourceInfo(dir: string): SourceInfo {
  const git = (...args: string[]): string | null => {
    try {
      return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return null;
    }
  };
  const commit = git('rev-parse', 'HEAD')?.trim() ?? null;
  const status = git('status', '--porcelain', '--untracked-files=normal') ?? '';
  const dirtyFiles = status
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => line.slice(3));
  return { dir, commit, dirtyFiles };
}
