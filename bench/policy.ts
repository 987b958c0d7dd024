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
  const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '10' } } });
  const durationS = Number(values.duration);
  const connections = Number(values.connections);
  const children = new Children();
  const temp = mkdtempSync(join(tmpdir(), 'burrow-bench-policy-'));
  const tick = 1e6 / clockTicks();
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: join(temp, 'config') };
    delete env.BURROW_TOKEN;
    delete env.BURROW_EDGE;
    const data = join(temp, 'edge');
    const created = children.spawn({ name: 'create-account', command: process.execPath, args: [BIN, 'admin', 'create-account', '--email', 'bench-policy@example.test', '--plan', 'PRO', '--data', data, '--json'], env });
    created.stopRequested = true;
    if ((await created.exited).code !== 0) throw new Error(`create-account: ${created.stderr}`);
    const token = (JSON.parse(created.stdout) as { token: { token: string } }).token.token;

    const { port: targetPort } = await children.spawnServer('target', TARGET_SCRIPT);
    const port = await freePort();
    const edge = children.spawn({ name: 'edge', command: process.execPath, args: [BIN, 'edge', '--host', '127.0.0.1', '--port', String(port), '--agent-port', '0', '--data', data, '--rate-limit', '1000000', '--min-free-disk', '0'], env });
    await edge.waitFor(/listening on/, 20_000);

    const table: string[][] = [];
    for (const row of ROWS) {
      const subdomain = `bench-policy-${row.name}`;
      const client = children.spawn({
        name: `client ${row.name}`,
        command: process.execPath,
        args: [BIN, 'http', String(targetPort), '--edge', `http://localhost:${port}`, '--token', token, '--subdomain', subdomain, '--no-inspect', ...row.flags],
        env,
        stdoutFile: join(temp, `client-${row.name}.log`),
      });
      await client.waitFor(/Forwarding (http:\/\/\S+)/, 20_000);
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
