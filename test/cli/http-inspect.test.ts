/**
 * `burrow http` as a subprocess, with its inspector: the lines it prints, --inspect and --no-inspect,
 * the next free port, a taken port, refusals, --log json, Ctrl-C; and the terminal's status block, both
 * under a real pseudo-terminal (util-linux `script`) and as a pure function.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { renderStatus, type StatusView } from '../../src/cli/commands/http.js';
import { BIN, call, createAccount, echo, freePort, runCli, spawnCli, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const FORWARDING = /Forwarding (http:\/\/([a-z0-9-]+)\.localhost:\d+) -> http:\/\/localhost:(\d+)\n/;
const INSPECTOR = /Inspector (http:\/\/127\.0\.0\.1:(\d+))\n/;

async function json(url: string): Promise<any> {
  const response = await request(url);
  return JSON.parse(await response.body.text());
}

describe('burrow http with the inspector', () => {
  let edge: TestEdge;
  let local: LocalServer;
  let account: TestAccount;
  let env: Record<string, string>;

  before(async () => {
    edge = await startEdge();
    local = await startLocal(echo);
    account = await createAccount(edge, 'PRO');
    env = { XDG_CONFIG_HOME: tempDir('burrow-cli-'), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, NO_COLOR: '' };
  });

  after(async () => {
    await local.close();
    await edge.close();
  });

  test('prints Forwarding and the inspector URL; records requests; one text line each; Ctrl-C exits 0', async () => {
    const run = await spawnCli(['http', String(local.port), '--inspect', '0'], env, INSPECTOR);
    try {
      const forwarding = FORWARDING.exec(run.output())!;
      assert.ok(forwarding, run.output());
      assert.equal(forwarding[3], String(local.port));
      const inspector = run.match[1]!;
      const host = `${forwarding[2]}.localhost:${edge.port}`;
      const response = await call(edge, 'POST', '/cli/hook', { host, rawBody: '{"a":1}', headers: { 'content-type': 'application/json' } });
      assert.equal(response.status, 200);
      await waitFor(() => /POST \/cli\/hook 200 [0-9.]+ms/.test(run.output()), 5_000, 'the request line');
      const list = await json(`${inspector}/api/requests`);
      assert.equal(list.requests.length, 1);
      assert.equal(list.requests[0].path, '/cli/hook');
      assert.equal(list.requests[0].request.body, '{"a":1}');
      assert.doesNotMatch(run.output(), /\x1b\[/, 'no terminal codes when stdout is not a TTY');

      const started = Date.now();
      run.child.kill('SIGINT');
      assert.equal(await run.exited, 0);
      assert.ok(Date.now() - started < 3_000, 'Ctrl-C closes at once');
      assert.match(run.output(), /tunnel closed/);
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  test('--no-inspect runs no inspector and records nothing, but still prints each request', async () => {
    const run = await spawnCli(['http', String(local.port), '--no-inspect'], env, FORWARDING);
    try {
      const host = `${run.match[2]}.localhost:${edge.port}`;
      await call(edge, 'GET', '/plain', { host });
      await waitFor(() => /GET \/plain 200/.test(run.output()), 5_000, 'the request line');
      assert.doesNotMatch(run.output(), /Inspector/);
    } finally {
      run.child.kill('SIGINT');
      assert.equal(await run.exited, 0);
    }
  });

  test('without --inspect two clients get two inspectors on free ports from 4040 on', async () => {
    const first = await spawnCli(['http', String(local.port)], env, INSPECTOR);
    const second = await spawnCli(['http', String(local.port)], env, INSPECTOR);
    try {
      const ports = [Number(first.match[2]), Number(second.match[2])];
      assert.notEqual(ports[0], ports[1]);
      for (const port of ports) assert.ok(port >= 4040 && port < 4060, `port ${port}`);
      // Each answers for its own tunnel.
      const [a, b] = await Promise.all([json(`${first.match[1]}/api/status`), json(`${second.match[1]}/api/status`)]);
      assert.notEqual(a.public_url, b.public_url);
      assert.match(first.output(), new RegExp(a.public_url.replace(/[.]/g, '\\.')));
    } finally {
      first.child.kill('SIGINT');
      second.child.kill('SIGINT');
      await Promise.all([first.exited, second.exited]);
    }
  });

  test('an --inspect port that is taken fails before any tunnel opens', async () => {
    const blocker = createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const { port } = blocker.address() as { port: number };
    try {
      const result = await runCli(['http', String(local.port), '--inspect', `127.0.0.1:${port}`], env);
      assert.equal(result.code, 1);
      assert.match(result.stderr, new RegExp(`^burrow: the inspector cannot listen on 127\\.0\\.0\\.1 port ${port}.*--no-inspect\\n$`));
      assert.doesNotMatch(result.stdout, /Forwarding/);
    } finally {
      blocker.close();
    }
  });

  test('--inspect must be loopback; --inspect with --no-inspect is a usage error', async () => {
    const outside = await runCli(['http', String(local.port), '--inspect', '0.0.0.0:4040'], env);
    assert.equal(outside.code, 2);
    assert.match(outside.stderr, /loopback/);
    const both = await runCli(['http', String(local.port), '--inspect', '4050', '--no-inspect'], env);
    assert.equal(both.code, 2);
  });

  test('a refusal at the first connect exits non-zero with the code and closes the inspector', async () => {
    const port = await freePort();
    const result = await runCli(['http', String(local.port), '--inspect', String(port)], { ...env, BURROW_TOKEN: 'svc_pat_00000000_000000000000000000000000000000000000' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^burrow: UNAUTHORIZED: .+\n$/);
    // The process ended, and its inspector with it.
    const again = createServer().listen(port, '127.0.0.1');
    await once(again, 'listening');
    again.close();
  });

  test('--log json prints one JSON object per request with the edge id', async () => {
    const run = await spawnCli(['http', String(local.port), '--inspect', '0', '--log', 'json'], env, INSPECTOR);
    try {
      const host = `${FORWARDING.exec(run.output())![2]}.localhost:${edge.port}`;
      await call(edge, 'GET', '/json/1?q=2', { host });
      await waitFor(() => run.output().includes('"/json/1?q=2"'), 5_000, 'the JSON line');
      const line = run
        .output()
        .split('\n')
        .find((text) => text.startsWith('{'))!;
      const parsed = JSON.parse(line);
      assert.match(parsed.id, /^req_/);
      assert.equal(parsed.method, 'GET');
      assert.equal(parsed.path, '/json/1?q=2');
      assert.equal(parsed.status, 200);
      assert.equal(typeof parsed.latency_ms, 'number');
      const list = await json(`${run.match[1]}/api/requests?limit=1`);
      assert.equal(list.requests[0].id, parsed.id);
    } finally {
      run.child.kill('SIGINT');
      await run.exited;
    }
  });

  const hasScript = spawnSync('script', ['--version']).status === 0;

  test('in a terminal: a live status block, coloured, and NO_COLOR turns colour off', { skip: hasScript ? false : 'util-linux script is not installed' }, async () => {
    for (const noColor of ['', '1']) {
      const command = [process.execPath, BIN, 'http', String(local.port), '--inspect', '0', '--route', '/api=' + local.port].map((part) => `'${part}'`).join(' ');
      const child = spawn('script', ['-qfec', command, '/dev/null'], {
        env: { ...process.env, ...env, NO_COLOR: noColor, COLUMNS: '100', LINES: '40', TERM: 'xterm' },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      try {
        await waitFor(() => /Requests/.test(output), 10_000, 'the status block');
        const forwarding = /Forwarding (http:\/\/([a-z0-9-]+)\.localhost:\d+) -> /.exec(output)!;
        const host = `${forwarding[2]}.localhost:${edge.port}`;
        await call(edge, 'GET', '/tty/ok', { host });
        await call(edge, 'GET', '/tty/missing', { host });
        await waitFor(() => output.includes('/tty/ok') && output.includes('/tty/missing'), 5_000, 'the requests in the block');
        const plain = output.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
        assert.match(plain, /Forwarding http:\/\/[a-z0-9-]+\.localhost:\d+ -> http:\/\/localhost:\d+\r?\n/, 'the Forwarding line comes first, as always');
        assert.match(plain, /Session\s+online/);
        assert.match(plain, /Inspector\s+http:\/\/127\.0\.0\.1:\d+/);
        assert.match(plain, new RegExp(`${forwarding[1].replace(/[.]/g, '\\.')}/api -> http://localhost:${local.port}`));
        assert.match(plain, /Connections\s+\d+ open · \d+ requests/);
        assert.match(plain, /GET\s+\/tty\/ok\s+200\s+[0-9.]+ ms/);
        if (noColor === '') assert.match(output, /\x1b\[32m200/, 'a 2xx status in green');
        else assert.doesNotMatch(output, /\x1b\[3[0-9]m/, 'no colour with NO_COLOR');
      } finally {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    }
  });
});

describe('the status block as a function', () => {
  const view: StatusView = {
    session: 'online',
    detail: '',
    forwarding: ['https://a-b-1.example.com -> http://localhost:3000', 'https://a-b-1.example.com/api -> http://localhost:4000'],
    inspector: 'http://127.0.0.1:4040',
    openStreams: 2,
    requests: 1234,
    errors: 5,
    bytesIn: 2048,
    bytesOut: 3 * 1024 * 1024,
    recent: [
      { method: 'POST', path: '/webhook', status: 200, error: null, latencyMs: 12.34 },
      { method: 'GET', path: '/missing', status: 404, error: null, latencyMs: 1 },
      { method: 'GET', path: '/boom', status: 500, error: null, latencyMs: 3 },
      { method: 'GET', path: '/down', status: 0, error: 'local server at localhost:3000: connect ECONNREFUSED', latencyMs: 0.5 },
    ],
  };

  test('shows the session, forwarding, inspector, counts and the requests newest first', () => {
    const lines = renderStatus(view, { color: false, width: 120 });
    const text = lines.join('\n');
    assert.match(text, /^Session {5}online$/m);
    assert.match(text, /^Forwarding {2}https:\/\/a-b-1\.example\.com -> http:\/\/localhost:3000$/m);
    assert.match(text, /^ {12}https:\/\/a-b-1\.example\.com\/api -> http:\/\/localhost:4000$/m);
    assert.match(text, /^Inspector {3}http:\/\/127\.0\.0\.1:4040$/m);
    assert.match(text, /^Connections 2 open · 1234 requests · 5 errors · 2\.0 KiB in · 3\.0 MiB out$/m);
    const requests = lines.slice(lines.indexOf('Requests') + 1);
    assert.match(requests[0]!, /^GET {5}\/down .* ERR /);
    assert.match(requests[1]!, /^GET {5}\/boom .* 500 /);
    assert.match(requests[3]!, /^POST {4}\/webhook .* 200 +12\.3 ms$/);
    assert.doesNotMatch(text, /\x1b/);
  });

  test('colours statuses by class and the session by state', () => {
    const text = renderStatus({ ...view, session: 'reconnecting', detail: 'attempt 2' }, { color: true, width: 120 }).join('\n');
    assert.match(text, /\x1b\[33mreconnecting \(attempt 2\)/);
    assert.match(text, /\x1b\[32m200 /);
    assert.match(text, /\x1b\[33m404 /);
    assert.match(text, /\x1b\[31m500 /);
    assert.match(text, /\x1b\[31mERR /);
  });

  test('no line is wider than the terminal', () => {
    const long = { ...view, recent: [{ method: 'GET', path: `/${'x'.repeat(300)}`, status: 200, error: null, latencyMs: 1 }] };
    for (const color of [false, true]) {
      for (const line of renderStatus(long, { color, width: 40 })) {
        assert.ok(line.replace(/\x1b\[[0-9;]*m/g, '').length <= 39, line);
      }
    }
  });
});
