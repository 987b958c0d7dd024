/**
 * `npm run bench:hops`: what extra processes on the path cost on this machine, with nothing of Burrow in
 * them (bench/e2e/hops.ts): the benchmark's target measured directly, through one and two bare Node TCP
 * relays and through a minimal uWS + undici one-hop proxy, latency with the end-to-end probe, throughput
 * with autocannon, and the CPU time per request of each path's processes. `npm run bench` measures
 * the same at the end of its run; this runs it alone, in about a minute and a half.
 *
 *   node dist/bench/hops.js [--requests N] [--block N] [--warmup N] [--duration SEC] [--rounds N]
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { hopsTables, measureHops } from './e2e/hops.js';
import { Children } from './e2e/processes.js';

const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));

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
  const plan = {
    requests: count(values.requests, 'requests', 10_000),
    block: count(values.block, 'block', 100),
    warmup: count(values.warmup, 'warmup', 2_000),
    durationS: count(values.duration, 'duration', 5),
    rounds: count(values.rounds, 'rounds', 3),
    connections: 100,
  };
  const children = new Children();
  try {
    const { child: target, port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
    process.stdout.write(`probing ${plan.requests} requests per path and method (warm-up ${plan.warmup}, blocks of ${plan.block}), then autocannon\n\n`);
    const result = await measureHops(children, { port: targetPort, pid: target.pid }, plan, () => false);
    process.stdout.write(`${hopsTables(result)}\n`);
  } finally {
    await children.stopAll();
  }
}

main().catch((error: Error) => {
  process.stderr.write(`bench:hops: ${error.message}\n`);
  process.exit(1);
});
