/**
 * The table every tinybench micro-benchmark prints: name, ns/op, ops/s, relative margin of error and
 * samples, under a line naming the machine. Shared so `npm run bench:micro` prints one format.
 */
import { appendFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { Bench } from 'tinybench';

export function printBenchTable(title: string, bench: Bench, note?: string): void {
  const rows = bench.tasks.map((task) => {
    const result = task.result;
    if (result.state !== 'completed') return { name: task.name, 'ns/op': result.state, 'ops/s': '', '±%': '', samples: '' };
    // period is the measured time per run in ms; both columns derive from it so they agree.
    return {
      name: task.name,
      'ns/op': Math.round(result.period * 1e6),
      'ops/s': Math.round(1000 / result.period).toLocaleString('en-US'),
      '±%': result.latency.rme.toFixed(2),
      samples: result.latency.samplesCount,
    };
  });
  console.log(`${title}: node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'} x${cpus().length}`);
  if (note !== undefined) console.log(note);
  console.table(rows);
  recordResults(bench);
}

/**
 * For `npm run bench:check`: with BURROW_BENCH_RESULTS set to a file, each task's ns/op is appended to it
 * as a JSON line, to be compared with the budgets in bench/budgets.json.
 */
function recordResults(bench: Bench): void {
  const file = process.env.BURROW_BENCH_RESULTS;
  if (file === undefined || file === '') return;
  const lines = bench.tasks.map((task) => {
    const result = task.result;
    const nsPerOp = result.state === 'completed' ? result.period * 1e6 : null;
    return `${JSON.stringify({ task: task.name, nsPerOp })}\n`;
  });
  appendFileSync(file, lines.join(''));
}
