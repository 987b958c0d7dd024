/**
 * Issue 29, point 7: what a new user tripped on in the CLI. `burrow http 99999` said the port was
 * missing; `burrow replay --inspector 29288` took the number for an IPv4 address; an edge name that does
 * not resolve was answered "is it running?"; `burrow queue deliver` without an id asked for a token, then
 * showed the list's usage; `burrow version` did not exist and `--help` did not mention `--version`;
 * `burrow requests --help` had two columns; `burrow http` in line mode printed nothing for WebSockets.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createAccount, echoOnce, freePort, ROOT, runCli, spawnCli, startEchoLocal, startEdge, tempDirs, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const tempDir = tempDirs('burrow-issue29-cli-');
const TOKEN = `svc_pat_0123abcd_${'0'.repeat(36)}`;
const quiet = (): Record<string, string> => ({ XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_INSPECTOR: '', BURROW_RESOLVE: '' });

test('burrow http 99999: the port is out of range, not missing', async () => {
  for (const target of ['99999', '0', 'localhost:70000']) {
    const run = await runCli(['http', target, '--no-inspect'], quiet());
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr, `burrow: "${target}": the port must be 1 to 65535\n`);
  }
});

test('burrow replay --inspector PORT takes a bare port on 127.0.0.1, as --inspect does', async () => {
  const port = await freePort();
  const run = await runCli(['replay', '--last', '--inspector', String(port)], quiet());
  assert.equal(run.code, 1);
  assert.match(run.stderr, new RegExp(`none answers at http://127\\.0\\.0\\.1:${port};`));
  const wrong = await runCli(['replay', '--last', '--inspector', '99999'], quiet());
  assert.equal(wrong.code, 2);
  assert.match(wrong.stderr, /--inspector 99999: the port must be 1 to 65535/);
});

test('an edge name that does not resolve says so, for API commands and for burrow http', async () => {
  const lookup = /the name edge\.burrow-test\.invalid (does not resolve \(ENOTFOUND\)|could not be looked up now: DNS did not answer \(EAI_AGAIN\)); check the edge URL and its DNS records, or dial an address without DNS with --resolve edge\.burrow-test\.invalid:443:ADDRESS/;
  const api = await runCli(['tunnels', 'list', '--edge', 'https://edge.burrow-test.invalid', '--token', TOKEN], quiet());
  assert.equal(api.code, 1);
  assert.match(api.stderr, /^burrow: cannot reach the edge at https:\/\/edge\.burrow-test\.invalid: /);
  assert.match(api.stderr, lookup);
  assert.doesNotMatch(api.stderr, /is it running/);
  const http = await runCli(['http', '3000', '--no-inspect', '--edge', 'https://edge.burrow-test.invalid', '--token', TOKEN], quiet());
  assert.equal(http.code, 1);
  assert.match(http.stderr, /^burrow: cannot connect to the edge at https:\/\/edge\.burrow-test\.invalid: /);
  assert.match(http.stderr, lookup);
});

test('burrow queue deliver without an id: its own usage, before any token is looked for', async () => {
  for (const [args, usage] of [
    [['queue', 'deliver'], 'missing ID; usage: burrow queue deliver ID [NAME] (see --help)'],
    [['queue', 'discard'], 'missing ID; usage: burrow queue discard ID [NAME] (see --help)'],
    [['queue', 'pause'], 'missing NAME; usage: burrow queue pause NAME (see --help)'],
    [['queue'], 'missing NAME; usage: burrow queue [list] NAME (see --help)'],
  ] as const) {
    const run = await runCli([...args], quiet());
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr, `burrow: ${usage}\n`);
  }
});

test('burrow version, burrow --version, and --version in burrow --help', async () => {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  for (const args of [['version'], ['--version'], ['-v']]) {
    const run = await runCli(args, quiet());
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `burrow ${version}\n`);
  }
  const json = await runCli(['version', '--json'], quiet());
  assert.deepEqual(JSON.parse(json.stdout), { version });
  const help = await runCli(['--help'], quiet());
  assert.match(help.stdout, /^ {2}version {19}print Burrow's version/m);
  assert.match(help.stdout, /burrow --version \(or -v\) prints the version/);
});

test("every command's --help puts its option descriptions in one column", async () => {
  const commands = [
    ['http'], ['replay'], ['login'], ['tokens'], ['tunnels'], ['requests'], ['requests', 'show'], ['reserve'], ['reservations'], ['queue'],
    ['edge'], ['admin'], ['admin', 'create-account'], ['admin', 'set-plan'], ['version'], ['start'], ['config'],
  ];
  for (const command of commands) {
    const run = await runCli([...command, '--help'], quiet());
    assert.equal(run.code, 0, run.stderr);
    const options = run.stdout.slice(run.stdout.indexOf('Options:'));
    const columns = new Set<number>();
    for (const line of options.split('\n')) {
      // "  --name ARG   description": the description's column; an option alone on its line has none.
      const described = /^( {2}-{1,2}\S+(?: \S+)?) {2,}\S/.exec(line);
      if (described !== null) columns.add(described[0].length - 1);
    }
    assert.ok(columns.size <= 1, `burrow ${command.join(' ')} --help: descriptions start at columns ${[...columns].join(', ')}\n${options}`);
  }
});

describe('burrow http prints WebSocket connections in line mode', () => {
  let edge: TestEdge;
  let local: LocalServer;
  let account: TestAccount;

  before(async () => {
    edge = await startEdge();
    local = await startEchoLocal();
    account = await createAccount(edge, 'PRO');
  });
  after(async () => {
    await local.close();
    await edge.close();
  });

  for (const mode of [['--log', 'text', '--no-inspect'], ['--log', 'json', '--inspect', '0'], ['--json', '--no-inspect']]) {
    test(mode.join(' '), async () => {
      const subdomain = `ws-lines-${mode[1]!.replace(/\W/g, '') || 'events'}`;
      const env = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token };
      const http = await spawnCli(['http', String(local.port), '--subdomain', subdomain, ...mode], env, /Forwarding|"event":"ready"/);
      try {
        await echoOnce(edge.port, `${subdomain}.localhost`);
        if (mode[0] === '--log' && mode[1] === 'text') {
          await waitFor(() => /WS \/chat\?room=1 closed/.test(http.output()), 5_000, 'the close line');
          assert.match(http.output(), /^WS \/chat\?room=1 101 open$/m);
          assert.match(http.output(), /^WS \/chat\?room=1 closed 1000 bye after [0-9.]+ s \(1 in, 1 out\)$/m);
        } else {
          await waitFor(() => /"websocket":"closed"/.test(http.output()), 5_000, 'the close line');
          const lines = http.output().split('\n').filter((line) => line.includes('"websocket"')).map((line) => JSON.parse(line) as Record<string, unknown>);
          assert.deepEqual(lines.map((line) => line.websocket), ['open', 'closed']);
          if (mode[0] === '--json') assert.deepEqual(lines.map((line) => line.event), ['websocket', 'websocket']);
          assert.equal(lines[0]!.path, '/chat?room=1');
          assert.equal(lines[0]!.status, 101);
          // WebSocket connections have ids of their own, never shown as request ids (docs/inspector.md).
          assert.match(String(lines[0]!.id), /^ws_[0-9a-f]{20}$/);
          assert.deepEqual([lines[1]!.close_code, lines[1]!.close_reason, lines[1]!.messages_in, lines[1]!.messages_out], [1000, 'bye', 1, 1]);
        }
      } finally {
        http.child.kill('SIGINT');
        await http.exited;
      }
    });
  }
});
