/**
 * Issue 16, point 5 (the CLI's part): no command showed one request; `--json` was refused by http, login
 * and edge, and errors stayed plain text under it; `burrow http` with the edge down said "(closed with
 * 1006)" and reconnects "connection lost (connection lost (1006))"; a local server that was not running
 * gave no warning; the live display showed ERR without a reason. Also `burrow reserve` and
 * `burrow reservations` (point 2), which needed curl before.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { renderStatus } from '../../src/cli/commands/http.js';
import { call, createAccount, freePort, runCli, spawnCli, startEdge, startLocal, tempDirs, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

describe('issue 16: CLI gaps', () => {
  let edge: TestEdge;
  let local: LocalServer;
  let account: TestAccount;
  const tempDir = tempDirs('burrow-issue16-cli-');
  const BINARY = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 10, 13]);

  before(async () => {
    edge = await startEdge({ rateLimit: 1_000_000 });
    local = await startLocal((req, res) => {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/octet-stream');
        res.setHeader('x-local', 'yes');
        res.end(req.url?.startsWith('/binary') === true ? BINARY : 'answer');
      });
    });
    account = await createAccount(edge, 'PRO');
  });
  after(async () => {
    await local.close();
    await edge.close();
  });

  const env = (): Record<string, string> => ({ XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token });

  test('requests show: headers, bodies, timing; --raw and --raw-response write the bytes', async () => {
    const http = await spawnCli(['http', String(local.port), '--no-inspect', '--subdomain', 'show-me-16'], env(), /Forwarding/);
    try {
      const body = Buffer.from([0x7b, 0, 0xff, 0x7d]);
      const sent = await call(edge, 'POST', '/binary?x=1', { host: `show-me-16.localhost:${edge.port}`, rawBody: body, headers: { 'x-signature': 'sha256=abc' } });
      assert.equal(sent.status, 200);
    } finally {
      http.child.kill('SIGINT');
      await http.exited;
    }
    const list = await call(edge, 'GET', '/api/v1/requests?subdomain=show-me-16&limit=1', { token: account.token });
    const id = list.json.requests[0].id as string;
    const shown = await runCli(['requests', 'show', id], env());
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, new RegExp(`^${id}  POST /binary\\?x=1\\nstatus +200\\n`));
    assert.match(shown.stdout, /duration +[0-9.]+ ms/);
    assert.match(shown.stdout, /Request headers\n(.*\n)*  x-signature: sha256=abc\n/);
    assert.match(shown.stdout, /Request body  4 bytes, binary \(--raw writes the bytes\)/);
    assert.match(shown.stdout, /Response headers \(200\)\n(.*\n)*  x-local: yes\n/);
    const rawBytes = await rawStdout(['requests', 'show', id, '--raw'], env());
    assert.deepEqual(rawBytes, Buffer.from([0x7b, 0, 0xff, 0x7d]));
    assert.deepEqual(await rawStdout(['requests', 'show', id, '--raw-response'], env()), BINARY);
    const json = await runCli(['requests', 'show', id, '--json'], env());
    assert.equal(JSON.parse(json.stdout).id, id);
  });

  test('under --json an error is the spec shape on stderr, one line, exit non-zero', async () => {
    const missing = await runCli(['requests', 'show', 'req_00000000000000000000', '--json'], env());
    assert.equal(missing.code, 1);
    assert.deepEqual(Object.keys(JSON.parse(missing.stderr)), ['error']);
    assert.equal(JSON.parse(missing.stderr).error.code, 'NOT_FOUND');
    assert.equal(missing.stderr.trimEnd().split('\n').length, 1);
    const usage = await runCli(['tokens', 'frobnicate', '--json'], env());
    assert.equal(usage.code, 2);
    assert.deepEqual(Object.keys(JSON.parse(usage.stderr).error), ['code', 'message']);
  });

  test('login --json and edge --json', async () => {
    const environment = env();
    const login = await runCli(['login', account.token, '--edge', edge.url, '--json'], environment);
    assert.equal(login.code, 0, login.stderr);
    assert.equal(JSON.parse(login.stdout).account.id, account.id);
    const data = tempDir();
    const started = await spawnCli(['edge', '--port', '0', '--data', data, '--json'], environment, /\{"event":"listening".*\n/);
    try {
      const line = JSON.parse(started.match[0]) as { url: string; message: string; port: number };
      assert.equal(line.url, `http://localhost:${line.port}`);
      assert.match(line.message, /listening on http:\/\/localhost:\d+/);
    } finally {
      started.child.kill('SIGTERM');
      await started.exited;
    }
  });

  test('burrow http --json: one JSON object per event (warning, ready, request, reconnect, closed)', async () => {
    const nothing = await freePort();
    const http = await spawnCli(['http', String(nothing), '--no-inspect', '--json'], env(), /\{"event":"ready".*\n/);
    try {
      const ready = JSON.parse(http.match[0]) as { subdomain: string; url: string };
      assert.match(ready.url, new RegExp(`^http://${ready.subdomain}\\.localhost:${edge.port}$`));
      await waitFor(() => /"event":"warning"/.test(http.output()), 5_000, 'the warning');
      const answer = await call(edge, 'GET', '/nobody-home', { host: `${ready.subdomain}.localhost:${edge.port}` });
      assert.equal(answer.status, 502);
      await waitFor(() => /"event":"request"/.test(http.output()), 5_000, 'the request event');
      const events = http
        .output()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      const warning = events.find((e) => e.event === 'warning')!;
      assert.equal(warning.code, 'LOCAL_UNREACHABLE');
      assert.match(String(warning.message), new RegExp(`nothing answers on localhost:${nothing} \\(ECONNREFUSED\\)`));
      const request = events.find((e) => e.event === 'request')!;
      assert.equal(request.method, 'GET');
      assert.equal(request.path, '/nobody-home');
      assert.equal(request.status, 0, 'no local response: the edge answered 502');
      assert.equal(typeof request.duration_ms, 'number');
      assert.match(String(request.error), /ECONNREFUSED/);
    } finally {
      http.child.kill('SIGINT');
      await http.exited;
    }
    assert.deepEqual(JSON.parse(http.output().trim().split('\n').at(-1)!), { event: 'closed', by_user: true, code: 'CLIENT_CLOSING', reason: 'the client was stopped (Ctrl-C)' });
  });

  test('with the edge down burrow http names the edge and the cause', async () => {
    const down = `http://localhost:${await freePort()}`;
    const result = await runCli(['http', String(local.port), '--no-inspect', '--edge', down], { ...env(), BURROW_EDGE: '' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, new RegExp(`^burrow: cannot connect to the edge at ${down}: ECONNREFUSED\\n$`));
    const json = await runCli(['http', String(local.port), '--no-inspect', '--edge', down, '--json'], { ...env(), BURROW_EDGE: '' });
    assert.equal(JSON.parse(json.stderr).error.code, 'EDGE_UNREACHABLE');
  });

  test('a reconnect line says what happened once', async () => {
    const own = await startEdge({ dataDir: tempDir() });
    const owner = await createAccount(own);
    const http = await spawnCli(['http', String(local.port), '--no-inspect'], { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: own.url, BURROW_TOKEN: owner.token }, /Forwarding/);
    try {
      await own.close();
      await waitFor(() => /unreachable \(ECONNREFUSED\); reconnecting/.test(http.output()), 10_000, 'a reconnect line');
      assert.match(http.output(), new RegExp(`burrow: the edge at ${own.url} is unreachable \\(ECONNREFUSED\\); reconnecting in \\d+ ms \\(attempt \\d+\\)`));
      assert.doesNotMatch(http.output(), /connection lost \(connection lost/);
    } finally {
      http.child.kill('SIGINT');
      await http.exited;
    }
  });

  test('the live display shows the reason beside ERR', () => {
    const lines = renderStatus(
      {
        session: 'online',
        detail: '',
        forwarding: ['http://a.localhost -> http://localhost:3000'],
        inspector: null,
        openStreams: 0,
        requests: 1,
        errors: 1,
        bytesIn: 0,
        bytesOut: 0,
        recent: [{ method: 'GET', path: '/x', status: 0, error: 'local server at localhost:3000: connect ECONNREFUSED', latencyMs: 1 }],
      },
      { color: false, width: 200 },
    );
    assert.match(lines.at(-1)!, /^GET +\/x +ERR +1 ms  local server at localhost:3000: connect ECONNREFUSED$/);
  });

  test('burrow reserve and burrow reservations list|release', async () => {
    const environment = env();
    const reserved = await runCli(['reserve', 'My-Hooks-16'], environment);
    assert.equal(reserved.code, 0, reserved.stderr);
    assert.match(reserved.stdout, /^reserved my-hooks-16; use it with: burrow http PORT --subdomain my-hooks-16\n$/);
    const list = await runCli(['reservations'], environment);
    assert.match(list.stdout, /^SUBDOMAIN +RESERVED +OFFLINE +POLICY\nmy-hooks-16 +\d{4}-.* off +-\n/);
    const json = await runCli(['reservations', 'list', '--json'], environment);
    assert.deepEqual(JSON.parse(json.stdout).reserved_subdomains.map((r: { subdomain: string }) => r.subdomain), ['my-hooks-16']);
    const released = await runCli(['reservations', 'release', 'my-hooks-16'], environment);
    assert.equal(released.stdout, 'released my-hooks-16\n');
    const again = await runCli(['reservations', 'release', 'my-hooks-16'], environment);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^burrow: NOT_FOUND: /);
  });
});

/** The CLI's stdout as bytes (runCli decodes it as text). */
async function rawStdout(args: string[], env: Record<string, string>): Promise<Buffer> {
  const { spawn } = await import('node:child_process');
  const { BIN } = await import('../helpers.js');
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  await new Promise((resolve) => child.once('close', resolve));
  return Buffer.concat(chunks);
}
