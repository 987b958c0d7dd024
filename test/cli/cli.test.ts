/**
 * The real `burrow` CLI as a subprocess against a real edge (DESIGN.md section 5): help, usage errors,
 * login and its config file, and where token and edge come from. The API wrappers are tested in
 * api-commands.test.ts, `burrow edge` and `burrow admin` in cli-edge.test.ts. Every run gets its own
 * XDG_CONFIG_HOME, so the user's config is never touched.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createAccount, runCli, startEdge, tempDir, type CliResult, type TestAccount, type TestEdge } from '../helpers.js';

let target: TestEdge;
let alice: TestAccount;
let bob: TestAccount;
const dirs: string[] = [];

before(async () => {
  target = await startEdge({ rateLimit: 1_000_000, authFailureLimit: 1_000_000 });
  alice = await createAccount(target);
  bob = await createAccount(target);
});
after(async () => {
  await target.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A private config home; BURROW_TOKEN/BURROW_EDGE of the runner's own environment are blanked out. */
function home(): { env: Record<string, string>; configFile: string } {
  const dir = tempDir('burrow-cli-');
  dirs.push(dir);
  return { env: { XDG_CONFIG_HOME: dir, BURROW_TOKEN: '', BURROW_EDGE: '' }, configFile: join(dir, 'burrow', 'config.json') };
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

describe('help', () => {
  const helps: string[][] = [
    ['--help'],
    ['edge', '--help'],
    ['admin', '--help'],
    ['admin', 'create-account', '--help'],
    ['login', '--help'],
    ['tokens', '--help'],
    ['tunnels', '--help'],
    ['requests', '--help'],
    ['http', '--help'],
    ['replay', '--help'],
  ];
  test('burrow --help and every command’s --help exit 0 with a usage text', async () => {
    const { env } = home();
    const results = await Promise.all(helps.map((args) => runCli(args, env)));
    results.forEach((result, index) => {
      assert.equal(result.code, 0, `${helps[index]!.join(' ')}: ${result.stderr}`);
      assert.match(result.stdout, /Usage: burrow/);
      assert.equal(result.stderr, '');
    });
  });

  test('--version prints the version', async () => {
    assert.match(ok(await runCli(['--version'], home().env)), /^burrow \d+\.\d+\.\d+\n$/);
  });
});

describe('usage errors: exit 2 and one line on stderr', () => {
  const cases: [args: string[], reason: RegExp][] = [
    [['frobnicate'], /unknown command "frobnicate"/],
    [['tokens'], /missing list, create or revoke; usage: burrow tokens/],
    [['tokens', 'list', '--bogus'], /Unknown option '--bogus'; usage: burrow tokens/],
    [['tokens', 'create', 'extra'], /unexpected argument "extra"/],
    [['login', 'not-a-token'], /not a Burrow token/],
    [['admin'], /missing the admin command; usage: burrow admin create-account/],
    [['admin', 'create-account', '--email', 'x@example.test', '--plan', 'GOLD'], /--plan must be FREE or PRO/],
    [['tokens', 'list', '--edge', 'ftp://example.test', '--token', 'x'], /must be http or https/],
  ];
  test('each refused before anything is done', async () => {
    const { env } = home();
    const results = await Promise.all(cases.map(([args]) => runCli(args, env)));
    results.forEach((result, index) => failed(result, 2, cases[index]![1]));
  });
});

describe('burrow login', { concurrency: true }, () => {
  test('checks the token, saves token and edge to $XDG_CONFIG_HOME/burrow/config.json with mode 0600', async () => {
    const { env, configFile } = home();
    const stdout = ok(await runCli(['login', alice.token, '--edge', target.url], env));
    assert.match(stdout, new RegExp(`logged in to ${target.url} as ${alice.email} \\(FREE\\)`));
    assert.deepEqual(JSON.parse(readFileSync(configFile, 'utf8')), { edge: target.url, token: alice.token });
    assert.equal(statSync(configFile).mode & 0o777, 0o600);
    // Later commands need neither flag.
    const me = JSON.parse(ok(await runCli(['tokens', 'list', '--json'], env)));
    assert.deepEqual(me.tokens.map((t: { id: string }) => t.id), [alice.tokenId]);
  });

  test('a login over an existing config replaces the token and keeps the file private', async () => {
    const { env, configFile } = home();
    mkdirSync(join(configFile, '..'), { recursive: true });
    writeFileSync(configFile, JSON.stringify({ edge: 'http://127.0.0.1:1', token: alice.token }), { mode: 0o644 });
    ok(await runCli(['login', bob.token, '--edge', target.url], env));
    assert.deepEqual(JSON.parse(readFileSync(configFile, 'utf8')), { edge: target.url, token: bob.token });
    assert.equal(statSync(configFile).mode & 0o777, 0o600);
  });

  test('a token the edge refuses: UNAUTHORIZED on stderr, exit 1, nothing saved', async () => {
    const { env, configFile } = home();
    failed(await runCli(['login', `svc_pat_00000000_${'0'.repeat(36)}`, '--edge', target.url], env), 1, /^burrow: UNAUTHORIZED: /);
    assert.throws(() => statSync(configFile), /ENOENT/);
  });
});

// Independent runs, each with its own config home: run side by side.
describe('where token and edge come from: flags, then BURROW_TOKEN/BURROW_EDGE, then the config file', { concurrency: true }, () => {
  const whoAmI = (result: CliResult): string[] => JSON.parse(ok(result)).tokens.map((t: { id: string }) => t.id);
  const unreachable = 'http://127.0.0.1:1';

  test('the config file alone', async () => {
    const { env, configFile } = home();
    mkdirSync(join(configFile, '..'), { recursive: true });
    writeFileSync(configFile, JSON.stringify({ edge: target.url, token: alice.token }));
    assert.deepEqual(whoAmI(await runCli(['tokens', 'list', '--json'], env)), [alice.tokenId]);
  });

  test('the environment over the config file', async () => {
    const { env, configFile } = home();
    mkdirSync(join(configFile, '..'), { recursive: true });
    writeFileSync(configFile, JSON.stringify({ edge: unreachable, token: alice.token }));
    assert.deepEqual(whoAmI(await runCli(['tokens', 'list', '--json'], { ...env, BURROW_TOKEN: bob.token, BURROW_EDGE: target.url })), [bob.tokenId]);
  });

  test('flags over the environment', async () => {
    const { env } = home();
    const result = await runCli(['tokens', 'list', '--json', '--token', alice.token, '--edge', target.url], { ...env, BURROW_TOKEN: bob.token, BURROW_EDGE: unreachable });
    assert.deepEqual(whoAmI(result), [alice.tokenId]);
  });

  test('an edge URL without a scheme is taken as http', async () => {
    const { env } = home();
    assert.deepEqual(whoAmI(await runCli(['tokens', 'list', '--json', '--token', alice.token, '--edge', `localhost:${target.port}`], env)), [alice.tokenId]);
  });

  test('no token anywhere: exit 1 and how to get one', async () => {
    failed(await runCli(['tokens', 'list', '--edge', target.url], home().env), 1, /no token: pass --token, set BURROW_TOKEN, or run "burrow login TOKEN"/);
  });

  test('an edge that does not answer: exit 1, one line', async () => {
    failed(await runCli(['tokens', 'list', '--edge', unreachable, '--token', alice.token], home().env), 1, /cannot reach the edge at http:\/\/127\.0\.0\.1:1/);
  });

  test('a broken config file: exit 1 naming the file', async () => {
    const { env, configFile } = home();
    mkdirSync(join(configFile, '..'), { recursive: true });
    writeFileSync(configFile, '{not json');
    failed(await runCli(['tokens', 'list'], env), 1, /config\.json is not valid/);
  });
});
