/**
 * Many tunnels in one process, for the benchmark's many-tenant phases: the real TunnelClient of
 * src/client, one per tunnel, all forwarding to one local target (no inspector: nothing records exchanges).
 *
 *   node dist/bench/e2e/fleet.js PLAN.json
 *
 * PLAN: { edge, targetPort, prefix, concurrency, deadlineMs, accounts: [{ token, tunnels }] }. Tunnel k is
 * `<prefix>-<k>`, numbered across the accounts in order. For a cluster (bench/cluster-scale.ts), `edge` may
 * list several edges and `edgesPerTunnel` makes each tunnel a MultiEdgeTunnel (`--edges K`), tunnel k
 * starting at edge k mod the list's length (spread over the edges); `insecure` as the client's option. Connects at most `concurrency` at once until all
 * are up or `deadlineMs` passes, printing one JSON line per second ({"event":"progress",...}) and one
 * when done ({"event":"done","connected":N,"failed":N,"ms":N,...}); a tunnel that drops or reconnects
 * afterwards prints {"event":"drop",...}. Then it holds the tunnels until SIGTERM/SIGINT or until its stdin
 * closes (the runner died), and exits without saying goodbye to each (the edge sees the sockets close).
 */
import { readFileSync } from 'node:fs';
import { MultiEdgeTunnel } from '../../src/client/multi-edge.js';
import { RouteTable } from '../../src/client/routes.js';
import type { Tunnel } from '../../src/client/tunnel.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';

interface FleetPlan {
  edge: string | string[];
  edgesPerTunnel?: number;
  insecure?: boolean;
  targetPort: number;
  prefix: string;
  concurrency: number;
  deadlineMs: number;
  accounts: Array<{ token: string; tunnels: number }>;
}

function say(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function rssMiB(): number {
  return Math.round((process.memoryUsage.rss() / 1024 / 1024) * 10) / 10;
}

async function main(): Promise<void> {
  const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as FleetPlan;
  const jobs: Array<{ token: string; subdomain: string }> = [];
  for (const account of plan.accounts) {
    for (let i = 0; i < account.tunnels; i++) jobs.push({ token: account.token, subdomain: `${plan.prefix}-${jobs.length}` });
  }
  const clients: Tunnel[] = [];
  const stop = (): void => process.exit(0);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();

  const started = Date.now();
  const deadline = started + plan.deadlineMs;
  let next = 0;
  let connected = 0;
  let failed = 0;
  let finished = false;
  const errors = new Map<string, number>();
  const progress = setInterval(() => say({ event: 'progress', connected, failed, ms: Date.now() - started, rssMiB: rssMiB() }), 1_000);

  const worker = async (): Promise<void> => {
    while (next < jobs.length && Date.now() < deadline) {
      const index = next++;
      const job = jobs[index]!;
      const options = { edge: plan.edge, token: job.token, routes: new RouteTable(plan.targetPort), subdomain: job.subdomain, recordLimit: 0, insecure: plan.insecure ?? false };
      const client: Tunnel =
        plan.edgesPerTunnel === undefined
          ? new TunnelClient(options)
          : new MultiEdgeTunnel({ ...options, edgesPerTunnel: plan.edgesPerTunnel, firstEdge: index % (typeof plan.edge === 'string' ? 1 : plan.edge.length) });
      try {
        await client.start();
        connected++;
        clients.push(client);
        client.on('reconnecting', ({ reason }) => {
          if (finished) say({ event: 'drop', subdomain: job.subdomain, reason });
        });
        client.on('closed', ({ reason }) => {
          if (finished) say({ event: 'drop', subdomain: job.subdomain, reason, closed: true });
        });
      } catch (error) {
        failed++;
        const message = (error as Error).message.slice(0, 200);
        errors.set(message, (errors.get(message) ?? 0) + 1);
        await client.close().catch(() => undefined);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, plan.concurrency) }, worker));
  const ms = Date.now() - started;
  clearInterval(progress);
  finished = true;
  say({
    event: 'done',
    planned: jobs.length,
    connected,
    failed,
    notTried: jobs.length - connected - failed,
    ms,
    perSecond: ms > 0 ? Math.round((connected / ms) * 1000 * 10) / 10 : null,
    rssMiB: rssMiB(),
    errors: [...errors].map(([message, count]) => ({ message, count })),
  });
}

main().catch((error: Error) => {
  process.stderr.write(`fleet: ${error.stack ?? error.message}\n`);
  process.exit(1);
});
