/**
 * Issues 12 and 24's conformance suite: every row of cases.ts runs directly against a local app (a
 * Node http + ws app, and python3's http.server) and through a real tunnel (real edge, real
 * TunnelClient), and the two must match byte for byte once the documented differences are removed.
 * (A Python WebSocket server is not in the table: the `websockets` package is not installed here, and
 * python3's standard library has none.)
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, spawnCli, startClient, startEdge, tempDirs, type TestAccount, type TestEdge } from '../helpers.js';
import { CASES, type AppName, type Case } from './cases.js';
import type { DifferenceId } from './differences.js';
import { compareHttp, compareWebSocket, httpExchange, webSocketExchange, type AppUnderTest } from './harness.js';
import { patternBytes, startNodeApp, type NodeApp } from './node-app.js';
import { startPythonApp, type PythonApp } from './python-app.js';

const newDir = tempDirs('burrow-conformance-');
const FORWARDING = /Forwarding http:\/\/([a-z0-9-]+\.localhost:\d+)/;

describe('conformance: direct and through the tunnel', () => {
  let edge: TestEdge;
  let account: TestAccount;
  const servers: (NodeApp | PythonApp)[] = [];
  const clients: TunnelClient[] = [];
  const apps = {} as Record<AppName, AppUnderTest>;

  before(async () => {
    edge = await startEdge();
    account = await createAccount(edge, 'PRO');
    const files = newDir();
    writeFileSync(join(files, 'small.txt'), 'a small static file\n');
    writeFileSync(join(files, 'big.bin'), patternBytes(5_000_000));
    mkdirSync(join(files, 'sub'));
    writeFileSync(join(files, 'sub', 'inner.txt'), 'inner\n');
    const started: [AppName, NodeApp | PythonApp, string][] = [
      ['node', await startNodeApp('127.0.0.1'), '127.0.0.1'],
      ['node-ipv6', await startNodeApp('::1'), '::1'],
      ['python', await startPythonApp(files), '127.0.0.1'],
    ];
    for (const [name, server, address] of started) {
      servers.push(server);
      const tunnel = await startClient(edge, account.token, server.port);
      clients.push(tunnel.client);
      apps[name] = { direct: { address, port: server.port }, tunnel: { address: '127.0.0.1', port: edge.port }, host: tunnel.host };
    }
  });

  after(async () => {
    for (const client of clients) await client.close();
    for (const server of servers) await server.close();
    await edge?.close();
  });

  for (const row of CASES) {
    test(`${row.app}: ${row.name} [${row.expect}]`, { timeout: 60_000 }, async (t) => {
      const fired = row.client === 'subprocess' ? await runInSubprocess(row, apps[row.app], edge, account) : await runCase(row, apps[row.app]);
      if (fired !== null) t.diagnostic(`differences removed: ${fired.size === 0 ? 'none' : [...fired].join(', ')}`);
    });
  }
});

/** The row through a tunnel of its own, run by the real `burrow http` in a child process. */
async function runInSubprocess(row: Case, app: AppUnderTest, edge: TestEdge, account: TestAccount): Promise<Set<DifferenceId> | null> {
  const env = { XDG_CONFIG_HOME: newDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, NO_COLOR: '' };
  const cli = await spawnCli(['http', String(app.direct.port), '--no-inspect'], env, FORWARDING);
  try {
    let failure: unknown = null;
    let fired: Set<DifferenceId> | null = null;
    try {
      fired = await runCase(row, { ...app, host: cli.match[1]! });
    } catch (error) {
      failure = error;
    }
    assert.ok(cli.child.exitCode === null && cli.child.signalCode === null, `the client died:\n${cli.output()}`);
    if (failure !== null) throw failure;
    return fired;
  } finally {
    cli.child.kill('SIGINT');
    await cli.exited;
  }
}

async function runCase(row: Case, app: AppUnderTest): Promise<Set<DifferenceId> | null> {
  const spec = row.spec;
  if (spec.kind === 'websocket') {
    const direct = await webSocketExchange(app.direct, app, spec);
    const tunnel = await webSocketExchange(app.tunnel, app, spec);
    return compareWebSocket(direct, tunnel, app.host);
  }
  const releaseId = /[?&]id=([a-z0-9-]+)/.exec(spec.request)?.[1] ?? '';
  const fired = new Set<DifferenceId>();
  for (let round = 0; round < (spec.repeat ?? 1); round++) {
    const direct = await httpExchange(app.direct, app, spec, releaseId);
    const tunnel = await httpExchange(app.tunnel, app, spec, releaseId);
    if (row.documented !== undefined) {
      row.documented(direct, tunnel);
      return null;
    }
    for (const id of compareHttp(direct, tunnel, app.host, spec)) fired.add(id);
  }
  return fired;
}
