/**
 * `burrow tokens`, `burrow tunnels` and `burrow requests` (src/cli/commands/api-commands.ts) as real
 * subprocesses against a real edge: aligned tables, the API's JSON with --json, and API errors as their
 * code and message on stderr. Every run gets its own XDG_CONFIG_HOME.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { call, createAccount, runCli, startClient, startEdge, startLocal, tempDir, type CliResult, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

let target: TestEdge;
let local: LocalServer;
let alice: TestAccount;
let bob: TestAccount;
const dirs: string[] = [];

before(async () => {
  target = await startEdge({ rateLimit: 1_000_000, authFailureLimit: 1_000_000 });
  local = await startLocal((_req, res) => res.end('ok'));
  alice = await createAccount(target);
  bob = await createAccount(target);
});
after(async () => {
  await local.close();
  await target.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A private config home; BURROW_TOKEN/BURROW_EDGE of the runner's own environment are blanked out. */
function home(): { env: Record<string, string>; configFile: string } {
  const dir = tempDir('burrow-cli-');
  dirs.push(dir);
  return { env: { XDG_CONFIG_HOME: dir, BURROW_TOKEN: '', BURROW_EDGE: '' }, configFile: join(dir, 'burrow', 'config.json') };
}

/** Runs with --edge and --token of `account` unless the args say otherwise. */
function burrow(args: string[], account: TestAccount = alice, env: Record<string, string> = home().env): Promise<CliResult> {
  return runCli([...args, '--edge', target.url, '--token', account.token], env);
}

function ok(result: CliResult): string {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result.stdout;
}

/** Non-zero, exactly one line on stderr, matching `reason`. */
function failed(result: CliResult, code: number, reason: RegExp): void {
  assert.equal(result.code, code, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(result.stderr, reason);
  assert.equal(result.stderr.trimEnd().split('\n').length, 1, `one line on stderr: ${JSON.stringify(result.stderr)}`);
}

// Independent runs go side by side (Promise.all): each CLI run is a whole Node process.
describe('burrow tokens', () => {
  test('list as a table and as JSON; create prints the token once; revoke; API errors as code and message', async () => {
    const carol = await createAccount(target);
    for (let i = 0; i < 4; i++) await call(target, 'POST', '/api/v1/tokens', { token: carol.token, body: { label: `t${i}` } });
    const [tableResult, jsonResult, createdText, createdJson, notFound, invalid, limited, unauthorized] = await Promise.all([
      burrow(['tokens', 'list'], bob),
      burrow(['tokens', 'list', '--json'], bob),
      burrow(['tokens', 'create', '--label', 'laptop']),
      burrow(['tokens', 'create', '--label', 'ci', '--json']),
      burrow(['tokens', 'revoke', 'tok_00000000']),
      burrow(['tokens', 'create', '--label', '   ']),
      burrow(['tokens', 'create', '--label', 'sixth'], carol),
      runCli(['tokens', 'list', '--edge', target.url, '--token', 'svc_pat_nope'], home().env),
    ]);

    const [header, row, ...rest] = ok(tableResult).trimEnd().split('\n');
    assert.match(header!, /^ID\s+LABEL\s+PREFIX\s+CREATED\s+LAST USED$/);
    assert.equal(rest.length, 0);
    assert.match(row!, new RegExp(`^${bob.tokenId}\\s+test\\s+svc_pat_${bob.tokenId.slice(4)}\\s+\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}Z\\s+`));
    assert.equal(header!.indexOf('LABEL'), row!.indexOf('test'), 'columns line up');
    const api = (await call(target, 'GET', '/api/v1/tokens', { token: bob.token })).json;
    const withoutLastUse = (list: { last_used_at?: unknown }[]) => list.map((t) => ({ ...t, last_used_at: null }));
    assert.deepEqual(withoutLastUse(JSON.parse(ok(jsonResult)).tokens), withoutLastUse(api.tokens));

    const match = /^created (tok_[0-9a-f]{8}) "laptop"\ntoken \(shown once\): (svc_pat_[0-9a-f]{8}_[0-9a-f]{36})\n$/.exec(ok(createdText));
    assert.ok(match, createdText.stdout);
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: match[2]! })).json.id, alice.id);
    const created = JSON.parse(ok(createdJson));
    assert.deepEqual(Object.keys(created), ['id', 'label', 'prefix', 'token', 'created_at']);
    assert.equal(created.label, 'ci');

    failed(notFound, 1, /^burrow: NOT_FOUND: No active token tok_00000000/);
    failed(invalid, 1, /^burrow: INVALID_REQUEST: "label" must not be empty/);
    failed(limited, 1, /^burrow: TOKEN_LIMIT_REACHED: /);
    failed(unauthorized, 1, /^burrow: UNAUTHORIZED: /);

    const [revoked, revokedJson] = await Promise.all([burrow(['tokens', 'revoke', match[1]!]), burrow(['tokens', 'revoke', created.id, '--json'])]);
    assert.equal(ok(revoked), `revoked ${match[1]}\n`);
    assert.deepEqual(JSON.parse(ok(revokedJson)), { revoked: created.id });
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: match[2]! })).status, 401);
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: created.token })).status, 401);
  });
});

describe('burrow tunnels and burrow requests', () => {
  test('list, show, close a live tunnel; requests lists its captures; empty lists say so', async () => {
    const tunnel = await startClient(target, alice.token, local.port, { subdomain: 'alice-cli' });
    try {
      assert.equal((await call(target, 'GET', '/first', { host: tunnel.host })).status, 200);
      assert.equal((await call(target, 'POST', '/second?x=1', { host: tunnel.host, rawBody: 'hi' })).status, 200);

      const [listText, showText, showJsonText, requestsText, latestText, bobShow, bobList] = await Promise.all([
        burrow(['tunnels', 'list']),
        burrow(['tunnels', 'show', 'alice-cli']),
        burrow(['tunnels', 'show', 'alice-cli', '--json']),
        burrow(['requests', 'alice-cli']),
        burrow(['requests', 'alice-cli', '--json', '--limit', '1']),
        burrow(['tunnels', 'show', 'alice-cli'], bob),
        burrow(['tunnels', 'list'], bob),
      ]);
      const list = ok(listText).trimEnd().split('\n');
      assert.match(list[0]!, /^SUBDOMAIN\s+PORT\s+STARTED\s+TOKEN$/);
      assert.match(list[1]!, new RegExp(`^alice-cli\\s+${local.port}\\s+\\d{4}-\\d{2}-\\d{2} [\\d:]+Z\\s+${alice.tokenId}$`));

      const show = ok(showText).trimEnd().split('\n');
      assert.match(show[0]!, /^SUBDOMAIN\s+PORT\s+STARTED\s+TOKEN\s+RESERVED$/);
      assert.match(show[1]!, /^alice-cli\s+\d+\s+.+\s+false$/);
      assert.deepEqual(JSON.parse(ok(showJsonText)), (await call(target, 'GET', '/api/v1/tunnels/alice-cli', { token: alice.token })).json);

      const requests = ok(requestsText).trimEnd().split('\n');
      assert.match(requests[0]!, /^ID\s+METHOD\s+STATUS\s+MS\s+RECEIVED\s+PATH$/);
      assert.match(requests[1]!, /^req_\S+\s+POST\s+200\s+\d+\s+.+Z\s+\/second\?x=1$/);
      assert.match(requests[2]!, /^req_\S+\s+GET\s+200\s+\d+\s+.+Z\s+\/first$/);
      const latest = JSON.parse(ok(latestText));
      assert.equal(latest.requests.length, 1);
      assert.equal(latest.requests[0].path, '/second?x=1');
      failed(bobShow, 1, /^burrow: NOT_FOUND: /);
      assert.equal(ok(bobList), 'no active tunnels\n');

      const closed = new Promise((resolve) => tunnel.client.once('closed', resolve));
      const [olderText, closeText] = await Promise.all([
        burrow(['requests', 'alice-cli', '--json', '--before', latest.requests[0].id]),
        burrow(['tunnels', 'close', 'alice-cli']),
      ]);
      assert.deepEqual(JSON.parse(ok(olderText)).requests.map((r: { path: string }) => r.path), ['/first']);
      assert.equal(ok(closeText), 'closed alice-cli\n');
      await closed;

      const [after, capturesAfter] = await Promise.all([burrow(['tunnels', 'list']), burrow(['requests', 'alice-cli', '--json'])]);
      assert.equal(ok(after), 'no active tunnels\n');
      // The captures outlive the tunnel.
      assert.equal(JSON.parse(ok(capturesAfter)).requests.length, 2);
    } finally {
      await tunnel.client.close();
    }
  });
});
