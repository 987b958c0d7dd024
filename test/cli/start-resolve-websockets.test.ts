/**
 * `burrow start` met two things `burrow http` gained beside it (issue 29): `--resolve HOST:PORT:ADDRESS`
 * (its tunnels dial the rule's address for an edge name that resolves nowhere) and the lines and
 * `websocket` events for each WebSocket opened and closed (here with the tunnel's name). Real CLI, edge,
 * local WebSocket server; the edge is named tunnels.example.test, which only the rule reaches.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createAccount, echoOnce, spawnCli, startEchoLocal, startEdge, tempDirs, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const freshDir = tempDirs('burrow-start-resolve-');
let edge: TestEdge;
let local: LocalServer;
let account: TestAccount;

before(async () => {
  edge = await startEdge({ domain: 'tunnels.example.test' });
  local = await startEchoLocal();
  account = await createAccount(edge, 'PRO');
});
after(async () => {
  await local.close();
  await edge.close();
});

/** A project whose burrow.yml names the edge by a name no resolver knows, and one tunnel, chat. */
function project(subdomain: string): { dir: string; env: Record<string, string> } {
  const dir = freshDir();
  const text = [`edge: http://tunnels.example.test:${edge.port}`, 'token_env: START_TEST_TOKEN', 'inspect: off', 'tunnels:', '  chat:', `    http: ${local.port}`, `    subdomain: ${subdomain}`, ''];
  writeFileSync(join(dir, 'burrow.yml'), text.join('\n'));
  return { dir, env: { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '', BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_RESOLVE: '', START_TEST_TOKEN: account.token } };
}

test('burrow start --resolve reaches the edge by its address; line mode prints each WebSocket with the tunnel name', async () => {
  const { dir, env } = project('start-ws-text');
  const resolve = `tunnels.example.test:${edge.port}:127.0.0.1`;
  // --insecure: the edge's name is not a loopback one, so plain http:// needs it.
  const run = await spawnCli(['start', 'chat', '--log', 'text', '--insecure', '--resolve', resolve], env, /Forwarding \S+ -> \S+\n/, 30_000, dir);
  try {
    await echoOnce(edge.port, 'start-ws-text.tunnels.example.test');
    await waitFor(() => /WS \/chat\?room=1 closed/.test(run.output()), 5_000, 'the close line');
    assert.match(run.output(), /^chat {2}WS \/chat\?room=1 101 open$/m);
    assert.match(run.output(), /^chat {2}WS \/chat\?room=1 closed 1000 bye after [0-9.]+ s \(1 in, 1 out\)$/m);
  } finally {
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 0, run.output());
  }
});

test('burrow start --json (BURROW_RESOLVE): websocket events carry the tunnel name', async () => {
  const { dir, env } = project('start-ws-json');
  const run = await spawnCli(['start', 'chat', '--json', '--insecure'], { ...env, BURROW_RESOLVE: `tunnels.example.test:${edge.port}:127.0.0.1` }, /"event":"ready"/, 30_000, dir);
  try {
    await echoOnce(edge.port, 'start-ws-json.tunnels.example.test');
    await waitFor(() => /"websocket":"closed"/.test(run.output()), 5_000, 'the close event');
    const events = run.output().split('\n').filter((line) => line.includes('"websocket"')).map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(events.map((event) => [event.event, event.tunnel, event.websocket, event.path]), [
      ['websocket', 'chat', 'open', '/chat?room=1'],
      ['websocket', 'chat', 'closed', '/chat?room=1'],
    ]);
    assert.match(String(events[0]!.id), /^ws_[0-9a-f]{20}$/);
  } finally {
    run.child.kill('SIGINT');
    await run.exited;
  }
});

test('without a rule the name resolves nowhere and the tunnel is reported not started', async () => {
  const { dir, env } = project('start-ws-none');
  const run = await spawnCli(['start', 'chat', '--insecure'], env, /not started/, 30_000, dir);
  assert.match(run.output(), /burrow: tunnel chat not started: EDGE_UNREACHABLE: .*tunnels\.example\.test/);
  assert.equal(await run.exited, 1);
});
