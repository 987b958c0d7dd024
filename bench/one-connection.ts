/**
 * One connection, hop by hop (`node dist/bench/one-connection.js`): the target direct, through two bare
 * Node relays, and through a tunnel (this checkout's edge, capture on, and `burrow http`, inspector on),
 * sequential undici requests on one keep-alive connection per path, the paths alternated in blocks. Per
 * block: p50 and p99 of the round trip, and each process's CPU per request, from
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds, every thread: the 10 ms ticks of /proc/<pid>/stat are
 * coarse for a process that runs a few hundred µs at a time), its voluntary context switches (its
 * sleeps), and the whole machine's busy time per request from /proc/stat, which says whether the
 * processes' CPU is the latency (at one connection one process on the path works at a time).
 *
 * At one connection each hop handles one request per wake-up, so its cost is what a request costs when
 * nothing is shared with the next one; the tunnel takes thousands of requests to warm up (--warmup).
 * Figures and what they showed: bench/RESULTS.md, issue 25's tuning log, "one connection, measured hop
 * by hop".
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from 'undici';
import { burrowEnv, createBenchAccount, startBurrowEdge, startBurrowHttp } from './e2e/burrow.js';
import { payload } from './e2e/payloads.js';
import { Children } from './e2e/processes.js';
import { ALL_SYSCALLS, contextSwitches, countSyscalls, perfProblem } from './e2e/proc-counters.js';

const HELP = `
Usage: node dist/bench/one-connection.js [options]

  --blocks N        blocks per path, alternated (default 4)
  --requests N      requests per block (default 1500)
  --warmup N        requests on each path before the blocks (default 6000: the tunnel warms up slowly)
  --method M        POST (1 KiB up) or GET (1 KiB down) (default POST)
  --edge-arg=ARG    an extra "burrow edge" argument (repeat), e.g. --edge-arg=--no-capture
  --client-arg=ARG  an extra "burrow http" argument (repeat), e.g. --client-arg=--no-inspect
  --node-arg=ARG    an extra node flag for the edge and the client (repeat)
  --syscalls        after the blocks, one more block per path under \`perf stat\` (syscall tracepoints):
                    each process's syscalls a request, by name (counted apart, so tracing does not
                    inflate the CPU figures)
`;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPTS = fileURLToPath(new URL('./e2e/', import.meta.url));

interface Path {
  name: string;
  port: number;
  host: string;
  /** The processes on the path besides the target, named. */
  processes: { name: string; pid: number }[];
}

interface Block {
  p50: number;
  p99: number;
  /** Per process: CPU µs a request (all threads), of it the main thread, sleeps a request. */
  cpu: { all: number; main: number; sleeps: number }[];
  machineBusy: number;
}

/** CPU nanoseconds of a process: all its threads, and its main thread (schedstat's first field). */
function cpuNs(pid: number): { all: number; main: number } {
  let all = 0;
  let main = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let ns = 0;
    try {
      ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      continue; // a thread that ended between the listing and the read
    }
    all += ns;
    if (tid === String(pid)) main = ns;
  }
  return { all, main };
}

/** The machine's busy clock ticks (user, nice, system, irq, softirq) from /proc/stat. */
function machineBusyTicks(): number {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return fields[0]! + fields[1]! + fields[2]! + fields[5]! + fields[6]!;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      blocks: { type: 'string', default: '4' },
      requests: { type: 'string', default: '1500' },
      warmup: { type: 'string', default: '6000' },
      method: { type: 'string', default: 'POST' },
      'edge-arg': { type: 'string', multiple: true },
      'client-arg': { type: 'string', multiple: true },
      'node-arg': { type: 'string', multiple: true },
      syscalls: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) {
    process.stdout.write(HELP);
    return;
  }
  const blocks = Number(values.blocks);
  const requests = Number(values.requests);
  const warmup = Number(values.warmup);
  const method = values.method;
  if (![blocks, requests].every((n) => Number.isInteger(n) && n > 0) || !Number.isInteger(warmup) || warmup < 0 || (method !== 'GET' && method !== 'POST')) {
    process.stderr.write(`--blocks and --requests take whole numbers of at least 1, --warmup of at least 0, --method GET or POST\n${HELP}`);
    process.exitCode = 2;
    return;
  }
  const ticksPerSecond = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  const nodeArgs = values['node-arg'] ?? [];
  const children = new Children();
  const temp = mkdtempSync(join(tmpdir(), 'burrow-one-connection-'));
  const clients: Client[] = [];
  try {
    const target = await children.spawnServer('target', join(SCRIPTS, 'target.js'));
    const relay2 = await children.spawnServer('relay-2', join(SCRIPTS, 'relay.js'), [String(target.port)]);
    const relay1 = await children.spawnServer('relay-1', join(SCRIPTS, 'relay.js'), [String(relay2.port)]);
    const bin = join(ROOT, 'bin', 'burrow.js');
    const dataDir = join(temp, 'edge');
    const env = burrowEnv(join(temp, 'config'));
    const token = createBenchAccount({ bin, dataDir, email: 'one@bench.test', env });
    const { child: edge, port: edgePort } = await startBurrowEdge(children, { bin, name: 'edge', dataDir, env, nodeArgs, edgeArgs: values['edge-arg'] ?? [] });
    const { child: client } = await startBurrowHttp(children, {
      bin,
      name: 'client',
      targetPort: target.port,
      edgePort,
      token,
      subdomain: 'one',
      env: burrowEnv(join(temp, 'client-config')),
      nodeArgs,
      clientArgs: values['client-arg'] ?? [],
      stdoutFile: join(temp, 'client.log'),
    });

    const paths: Path[] = [
      { name: 'direct', port: target.port, host: `127.0.0.1:${target.port}`, processes: [] },
      { name: 'two relays', port: relay1.port, host: `127.0.0.1:${relay1.port}`, processes: [{ name: 'relay 1', pid: relay1.child.pid }, { name: 'relay 2', pid: relay2.child.pid }] },
      { name: 'tunnel', port: edgePort, host: `one.localhost:${edgePort}`, processes: [{ name: 'edge', pid: edge.pid }, { name: 'client', pid: client.pid }] },
    ];
    const body = method === 'POST' ? payload(1024) : undefined;
    const path = method === 'POST' ? '/bench/length/0' : '/bench/length/1024';
    const senders = new Map(paths.map((each) => [each.name, new Client(`http://127.0.0.1:${each.port}`, { pipelining: 1 })]));
    clients.push(...senders.values());

    const block = async (each: Path, count: number): Promise<Block> => {
      const sender = senders.get(each.name)!;
      const headers: Record<string, string> = { host: each.host };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const before = each.processes.map(({ pid }) => ({ ...cpuNs(pid), sleeps: contextSwitches(pid).voluntary }));
      const busyBefore = machineBusyTicks();
      const times: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = process.hrtime.bigint();
        const answer = await sender.request({ path, method, headers, body });
        await answer.body.arrayBuffer();
        if (answer.statusCode !== 200) throw new Error(`${each.name}: ${answer.statusCode}`);
        times.push(Number(process.hrtime.bigint() - started) / 1000);
      }
      const busy = machineBusyTicks() - busyBefore;
      const cpu = each.processes.map(({ pid }, i) => {
        const after = cpuNs(pid);
        return {
          all: (after.all - before[i]!.all) / 1000 / count,
          main: (after.main - before[i]!.main) / 1000 / count,
          sleeps: (contextSwitches(pid).voluntary - before[i]!.sleeps) / count,
        };
      });
      times.sort((a, b) => a - b);
      return { p50: times[Math.floor(count / 2)]!, p99: times[Math.floor(count * 0.99)]!, cpu, machineBusy: (busy * 1e6) / ticksPerSecond / count };
    };

    process.stdout.write(`${method} 1 KiB, one connection per path: ${warmup} warm-up requests a path, then ${blocks} blocks of ${requests}\n`);
    for (const each of paths) await block(each, warmup);
    const results = new Map<string, Block[]>(paths.map((each) => [each.name, []]));
    const row = (name: string, result: Block, processes: Path['processes']): string =>
      `${name.padEnd(10)}  p50 ${result.p50.toFixed(0).padStart(5)}  p99 ${result.p99.toFixed(0).padStart(6)} µs  machine busy ${result.machineBusy.toFixed(0).padStart(4)} µs` +
      processes.map((proc, i) => `  ${proc.name} ${result.cpu[i]!.all.toFixed(0).padStart(4)} (main ${result.cpu[i]!.main.toFixed(0)}, sleeps ${result.cpu[i]!.sleeps.toFixed(2)})`).join('') +
      '\n';
    for (let round = 1; round <= blocks; round++) {
      for (const each of paths) {
        const result = await block(each, requests);
        results.get(each.name)!.push(result);
        process.stdout.write(`block ${round}  ${row(each.name, result, each.processes)}`);
      }
    }
    const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    process.stdout.write('\nmedians (µs; CPU per request, all threads, from schedstat):\n');
    for (const each of paths) {
      const rows = results.get(each.name)!;
      const summary: Block = {
        p50: median(rows.map((r) => r.p50)),
        p99: median(rows.map((r) => r.p99)),
        machineBusy: median(rows.map((r) => r.machineBusy)),
        cpu: each.processes.map((_, i) => ({
          all: median(rows.map((r) => r.cpu[i]!.all)),
          main: median(rows.map((r) => r.cpu[i]!.main)),
          sleeps: median(rows.map((r) => r.cpu[i]!.sleeps)),
        })),
      };
      process.stdout.write(row(each.name, summary, each.processes));
    }
    if (values.syscalls === true) {
      const problem = perfProblem();
      if (problem !== null) process.stdout.write(`\nsyscalls: not counted: ${problem}\n`);
      else {
        process.stdout.write(`\nsyscalls a request (one more block of ${requests} per path, perf stat; named when 0.05 or more):\n`);
        for (const each of paths) {
          const stops = each.processes.map(({ pid }) => countSyscalls(pid));
          // perf attaches after it starts: give it a moment, so the block's first requests are counted.
          await new Promise((resolve) => setTimeout(resolve, 500));
          await block(each, requests);
          for (const [i, proc] of each.processes.entries()) {
            const counts = await stops[i]!();
            const named = [...counts].filter(([name, count]) => name !== ALL_SYSCALLS && count / requests >= 0.05).sort((a, b) => b[1] - a[1]);
            const all = (counts.get(ALL_SYSCALLS) ?? 0) / requests;
            process.stdout.write(`${each.name.padEnd(10)}  ${proc.name.padEnd(7)}  ${all.toFixed(2)}: ${named.map(([name, count]) => `${name} ${(count / requests).toFixed(2)}`).join(', ')}\n`);
          }
        }
      }
    }
  } finally {
    for (const each of clients) await each.close().catch(() => undefined);
    await children.stopAll(10_000);
    rmSync(temp, { recursive: true, force: true });
  }
}

await main();
