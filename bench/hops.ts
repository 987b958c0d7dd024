/**
 * `npm run bench:hops`: what extra processes on the path cost on this machine, with nothing of Burrow in
 * them. The benchmark's target is measured directly, through one bare TCP relay process and through two
 * (bench/e2e/relay.ts): latency with the end-to-end benchmark's probe (one keep-alive connection, hrtime
 * per request, paths interleaved in blocks), then throughput with autocannon (1 KiB POST, 100
 * connections, paths interleaved over rounds). A tunnel puts two processes (edge, client) on the path;
 * the two-relay rows are what any two-hop design in Node pays here before it parses, frames, forwards or
 * captures anything.
 *
 *   node dist/bench/hops.js [--requests N] [--block N] [--warmup N] [--duration SEC] [--rounds N]
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runLoad, type Method, type Target } from './e2e/load.js';
import { probe } from './e2e/probe.js';
import { Children } from './e2e/processes.js';
import { median } from './e2e/stats.js';
import { formatNumber, textTable } from './e2e/table.js';

const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));
const RELAY_SCRIPT = fileURLToPath(new URL('./e2e/relay.js', import.meta.url));

function count(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 10_000_000) throw new Error(`--${name} must be a whole number from 1 to 10000000, not "${value}"`);
  return parsed;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string' },
      block: { type: 'string' },
      warmup: { type: 'string' },
      duration: { type: 'string' },
      rounds: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) {
    process.stdout.write(
      'usage: node dist/bench/hops.js [--requests N (default 10000)] [--block N (default 100)] [--warmup N (default 2000)]\n' +
        '                               [--duration SEC per autocannon run (default 5)] [--rounds N (default 3)]\n',
    );
    return;
  }
  const plan = { requests: count(values.requests, 'requests', 10_000), block: count(values.block, 'block', 100), warmup: count(values.warmup, 'warmup', 2_000) };
  const durationS = count(values.duration, 'duration', 5);
  const rounds = count(values.rounds, 'rounds', 3);
  const children = new Children();
  try {
    const target = children.spawn({ name: 'target', command: process.execPath, args: [TARGET_SCRIPT], stdinPipe: true });
    const targetPort = Number((await target.waitFor(/"port":(\d+)/, 10_000))[1]);
    const first = children.spawn({ name: 'relay-1', command: process.execPath, args: [RELAY_SCRIPT, String(targetPort)], stdinPipe: true });
    const firstPort = Number((await first.waitFor(/"port":(\d+)/, 10_000))[1]);
    const second = children.spawn({ name: 'relay-2', command: process.execPath, args: [RELAY_SCRIPT, String(firstPort)], stdinPipe: true });
    const secondPort = Number((await second.waitFor(/"port":(\d+)/, 10_000))[1]);
    const paths = new Map<string, Target>([
      ['direct', { origin: `http://127.0.0.1:${targetPort}`, host: null }],
      ['one relay', { origin: `http://127.0.0.1:${firstPort}`, host: null }],
      ['two relays', { origin: `http://127.0.0.1:${secondPort}`, host: null }],
    ]);
    process.stdout.write(`probing ${plan.requests} requests per path and method (warm-up ${plan.warmup}, blocks of ${plan.block})\n\n`);
    const rows: (string | number)[][] = [];
    for (const method of ['GET', 'POST'] as Method[]) {
      const results = await probe(paths, method, plan, () => false);
      const direct = results.get('direct')!;
      for (const [name, result] of results) {
        rows.push([
          method === 'POST' ? 'POST 1 KiB' : 'GET',
          name,
          result.samples,
          formatNumber(result.p50),
          formatNumber(result.p99),
          formatNumber(result.p999),
          name === 'direct' ? '' : `+${formatNumber(result.p50 - direct.p50)}`,
          result.errors,
        ]);
      }
    }
    process.stdout.write(`${textTable(['Method', 'Path', 'Samples', 'p50 µs', 'p99 µs', 'p99.9 µs', '+p50 µs', 'Errors'], rows)}\n\n`);

    process.stdout.write(`autocannon, 1 KiB POST, 100 connections, ${durationS} s per run, ${rounds} round(s) of every path\n\n`);
    const rates = new Map<string, number[]>([...paths.keys()].map((name) => [name, []]));
    const bad = new Map<string, number>([...paths.keys()].map((name) => [name, 0]));
    await runLoad(paths.get('two relays')!, 'POST', 100, 1); // warm every process on the longest path
    for (let round = 0; round < rounds; round++) {
      for (const [name, target] of paths) {
        const load = await runLoad(target, 'POST', 100, durationS);
        rates.get(name)!.push(load.reqPerSec);
        bad.set(name, bad.get(name)! + load.errors + load.timeouts + load.non2xx + load.mismatches);
      }
    }
    const directRate = median(rates.get('direct')!);
    const loadRows = [...rates].map(([name, list]) => {
      const rate = median(list);
      return [name, list.length, formatNumber(rate), name === 'direct' ? '' : formatNumber(rate / directRate, 3), bad.get(name)!];
    });
    process.stdout.write(`${textTable(['Path', 'Runs', 'Median req/s', 'Ratio', 'Bad'], loadRows)}\n`);
  } finally {
    await children.stopAll();
  }
}

main().catch((error: Error) => {
  process.stderr.write(`bench:hops: ${error.message}\n`);
  process.exit(1);
});
