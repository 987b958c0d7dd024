/**
 * What a tunnel policy costs per request (issue 26): a real edge (`burrow edge`), one `burrow http` client
 * per policy and the benchmark's target (bench/e2e/target.ts), each its own process on 127.0.0.1. For
 * each row, a 1 KiB POST with autocannon for `--duration` seconds, and the CPU time (user + system, from
 * /proc/<pid>/stat) the edge and that row's client spent, divided by the requests completed:
 *   none      no policy (the listener's null check)
 *   basic     --basic-auth (the credentials sent on every request: the verified-value cache)
 *   cidr      --allow-cidr 127.0.0.0/8 --deny-cidr 10.0.0.0/8 (two blocks)
 *   webhook   --verify-webhook github:SECRET (the body read whole at the edge and its HMAC checked)
 * Rows run one after another, in that order, once.
 *
 *   node dist/bench/policy.js [--duration SEC] [--connections N]
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon, { type Options, type Result } from 'autocannon';
import { burrowEnv, createBenchAccount, startBurrowEdge, startBurrowHttp } from './e2e/burrow.js';
import { payload, SMALL } from './e2e/payloads.js';
import { Children, freePort } from './e2e/processes.js';
import { clockTicks, readProc } from './e2e/sampler.js';
import { formatNumber, textTable } from './e2e/table.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'burrow.js');
const TARGET_SCRIPT = fileURLToPath(new URL('./e2e/target.js', import.meta.url));
const SECRET = 'bench-github-secret';
const BODY = payload(SMALL);

interface Row {
  name: string;
  label: string;
  flags: string[];
  headers: Record<string, string>;
}

const ROWS: Row[] = [
  { name: 'none', label: 'no policy', flags: [], headers: {} },
  { name: 'basic', label: 'basic auth (cached value)', flags: ['--basic-auth', 'bench:bench-password'], headers: { authorization: `Basic ${Buffer.from('bench:bench-password').toString('base64')}` } },
  { name: 'cidr', label: 'CIDR allow + deny', flags: ['--allow-cidr', '127.0.0.0/8', '--deny-cidr', '10.0.0.0/8'], headers: {} },
  { name: 'webhook', label: 'webhook verification (GitHub HMAC)', flags: ['--verify-webhook', `github:${SECRET}`], headers: { 'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(BODY).digest('hex')}` } },
];

const log = (line: string): void => void process.stderr.write(`bench:policy: ${line}\n`);

function ticksOf(pid: number): number {
  const sample = readProc(pid);
  if (sample === null) throw new Error(`process ${pid} is gone`);
  return sample.ticks;
}

function load(options: Options): Promise<Result> {
  return new Promise((resolve, reject) => {
    autocannon(options, (error, result) => (error !== null && error !== undefined ? reject(error) : resolve(result)));
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '10' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help === true) {
    process.stdout.write('Usage: node dist/bench/policy.js [--duration SEC (default 10)] [--connections N (default 10)]\n');
    return;
  }
  const durationS = Number(values.duration);
  const connections = Number(values.connections);
  const children = new Children();
  const temp = mkdtempSync(join(tmpdir(), 'burrow-bench-policy-'));
  const tick = 1e6 / clockTicks();
  try {
    const env = burrowEnv(join(temp, 'config'));
    const data = join(temp, 'edge');
    const token = createBenchAccount({ bin: BIN, dataDir: data, email: 'bench-policy@example.test', plan: 'PRO', env });

    const { port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
    const port = await freePort();
    const { child: edge } = await startBurrowEdge(children, { bin: BIN, name: 'edge', dataDir: data, env, port, edgeArgs: ['--agent-port', '0', '--min-free-disk', '0'] });

    const table: string[][] = [];
    for (const row of ROWS) {
      const subdomain = `bench-policy-${row.name}`;
      const { child: client } = await startBurrowHttp(children, {
        bin: BIN,
        name: `client ${row.name}`,
        targetPort,
        edgePort: port,
        token,
        subdomain,
        env,
        clientArgs: ['--no-inspect', ...row.flags],
        stdoutFile: join(temp, `client-${row.name}.log`),
      });
      const options: Options = {
        url: `http://127.0.0.1:${port}/bench/length/0`,
        method: 'POST',
        headers: { host: `${subdomain}.localhost:${port}`, 'content-type': 'application/json', ...row.headers },
        body: BODY,
        connections,
      };
      await load({ ...options, duration: 1 }); // warm-up, not counted
      const before = { edge: ticksOf(edge.pid), client: ticksOf(client.pid) };
      const result = await load({ ...options, duration: durationS, timeout: 10 });
      const after = { edge: ticksOf(edge.pid), client: ticksOf(client.pid) };
      const requests = result.requests.total;
      const bad = result.non2xx + result.errors + result.timeouts;
      log(`${row.name}: ${requests} requests, ${bad} not 2xx or failed`);
      table.push([
        row.label,
        formatNumber(Math.round(requests / result.duration)),
        formatNumber(Math.round(((after.edge - before.edge) * tick) / requests)),
        formatNumber(Math.round(((after.client - before.client) * tick) / requests)),
        String(result.latency.p50),
        String(bad),
      ]);
      await client.stop();
    }
    process.stdout.write(`1 KiB POST, ${connections} connections, ${durationS} s per row\n\n`);
    process.stdout.write(`${textTable(['Policy', 'req/s', 'edge CPU µs/req', 'client CPU µs/req', 'p50 ms', 'errors'], table)}\n`);
  } finally {
    await children.stopAll();
    rmSync(temp, { recursive: true, force: true });
  }
}

main().catch((error: Error) => {
  log(error.stack ?? error.message);
  process.exitCode = 1;
});
