/**
 * Where edge, token and CA come from once burrow.yml exists (issue 27, item 1): flags, then BURROW_*,
 * then burrow.yml, then what "burrow login" saved. The saved token goes only to the edges it was saved
 * with, so a burrow.yml naming another edge cannot lead it there. `burrow http` takes the file's shared
 * settings below its own flags, and never its tunnels.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { resolveCredentials, writeConfig, configPath } from '../../src/cli/config.js';
import { loadConfig } from '../../src/cli/config-file.js';
import { CliError } from '../../src/cli/args.js';
import { call, createAccount, spawnCli, startEdge, startLocal, tempDirs, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { makeCa } from '../tls-fixtures.js';

const freshDir = tempDirs('burrow-config-precedence-');
const TOKEN = (letter: string): string => `svc_pat_${'1'.repeat(8)}_${letter.repeat(36)}`;

/** A directory with burrow.yml holding `text`, a config home with `saved` as the login, and its env. */
function setUp(text: string | null, saved: { edge?: string; token?: string; ca?: string } = {}): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = freshDir();
  const env: NodeJS.ProcessEnv = { XDG_CONFIG_HOME: join(dir, 'xdg'), HOME: dir };
  if (text !== null) writeFileSync(join(dir, 'burrow.yml'), text, { mode: 0o600 });
  if (Object.keys(saved).length > 0) writeConfig(saved, configPath(env));
  return { dir, env };
}

function resolved(dir: string, env: NodeJS.ProcessEnv, flags: { edge?: string; token?: string; ca?: string } = {}): ReturnType<typeof resolveCredentials> {
  return resolveCredentials(flags, env, loadConfig(undefined, env, dir).config);
}

test('edge, token and CA: flags, then the environment, then burrow.yml, then the saved login', () => {
  const dir = freshDir();
  const fileCa = makeCa(dir, 'file').cert;
  const savedCa = makeCa(dir, 'saved').cert;
  const { dir: project, env } = setUp(`edge: http://file.test:1\ntoken_env: FILE_TOKEN\nca: ${fileCa}\n`, { edge: 'http://saved.test:1', token: TOKEN('a'), ca: savedCa });
  env.FILE_TOKEN = TOKEN('f');
  // The file over the saved login.
  let credentials = resolved(project, env);
  assert.deepEqual([credentials.edge, credentials.token, credentials.ca], ['http://file.test:1', TOKEN('f'), { path: fileCa, from: join(project, 'burrow.yml') }]);
  // The environment over the file.
  credentials = resolved(project, { ...env, BURROW_EDGE: 'http://env.test:1', BURROW_TOKEN: TOKEN('e'), BURROW_CA: '/env/ca.pem' });
  assert.deepEqual([credentials.edge, credentials.token, credentials.ca?.from], ['http://env.test:1', TOKEN('e'), 'BURROW_CA']);
  // Flags over everything.
  credentials = resolved(project, { ...env, BURROW_EDGE: 'http://env.test:1', BURROW_TOKEN: TOKEN('e') }, { edge: 'http://flag.test:1', token: TOKEN('c'), ca: '/flag/ca.pem' });
  assert.deepEqual([credentials.edge, credentials.token, credentials.ca?.from], ['http://flag.test:1', TOKEN('c'), '--ca']);
  // Without burrow.yml, the saved login as before.
  const { dir: plain, env: plainEnv } = setUp(null, { edge: 'http://saved.test:1', token: TOKEN('a'), ca: savedCa });
  credentials = resolved(plain, plainEnv);
  assert.deepEqual([credentials.edge, credentials.token, credentials.ca?.path], ['http://saved.test:1', TOKEN('a'), savedCa]);
});

test("the saved login's token goes only to its own edges: a burrow.yml naming another edge needs its own token", () => {
  const saved = { edge: 'http://saved.test:1', token: TOKEN('a') };
  const elsewhere = setUp('edge: https://someone-elses.example\n', saved);
  assert.throws(
    () => resolved(elsewhere.dir, elsewhere.env),
    (error: unknown) =>
      error instanceof CliError &&
      error.code === 'UNAUTHORIZED' &&
      error.message.includes('names the edge https://someone-elses.example but no token') &&
      error.message.includes('sent only to http://saved.test:1'),
  );
  // The same edge as the login's: its token is used.
  const same = setUp('edge: http://saved.test:1/\n', saved);
  assert.equal(resolved(same.dir, same.env).token, TOKEN('a'));
  // Another edge with the file's own token reference, or a token from the environment: fine.
  const own = setUp('edge: https://other.example\ntoken_env: OTHER_TOKEN\n', saved);
  assert.equal(resolved(own.dir, { ...own.env, OTHER_TOKEN: TOKEN('o') }).token, TOKEN('o'));
  assert.equal(resolved(own.dir, { ...own.env, BURROW_TOKEN: TOKEN('e') }).token, TOKEN('e'));
  // A token_env whose variable is not set is said, rather than falling back to another token.
  assert.throws(() => resolved(own.dir, own.env), /takes the token from OTHER_TOKEN \(token_env\), which is not set/);
});

let edge: TestEdge;
let account: TestAccount;
let local: LocalServer;
before(async () => {
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  local = await startLocal((req, res) => res.end(`local saw ${req.url}`));
});
after(async () => {
  await local.close();
  await edge.close();
});

test('burrow http: its flags win over burrow.yml, the file wins over the saved login, and its tunnels are not started', async () => {
  const { dir, env } = setUp(
    ['edge: http://127.0.0.1:1', 'token_env: PRECEDENCE_TOKEN', 'inspect: off', 'log: json', 'tunnels:', '  other:', `    http: ${local.port}`, '    subdomain: not-from-http-27', ''].join('\n'),
  );
  const base = { ...env, PRECEDENCE_TOKEN: account.token, BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CA: '', BURROW_CONFIG: '' } as Record<string, string>;
  // The file's edge is unreachable and its inspector off: --edge and --inspect override both.
  const run = await spawnCli(['http', String(local.port), '--edge', edge.url, '--inspect', '0', '--subdomain', 'flags-win-27'], base, /Inspector (http:\/\/\S+)\n/, 30_000, dir);
  try {
    assert.match(run.output(), /^Forwarding http:\/\/flags-win-27\.localhost:\d+ -> http:\/\/localhost:\d+$/m);
    assert.equal(run.output().match(/^Forwarding /gm)!.length, 1, 'one tunnel: burrow http does not start the file\'s');
    assert.equal((await call(edge, 'GET', '/x', { host: `flags-win-27.localhost:${edge.port}` })).text, 'local saw /x');
    assert.equal((await call(edge, 'GET', '/', { host: `not-from-http-27.localhost:${edge.port}` })).status, 404);
    // The file's log format applies (no --log given): one JSON line per request.
    await waitFor(() => /^\{"id":"req_[0-9a-f]+","method":"GET","path":"\/x"/m.test(run.output()), 5_000, 'a JSON request line');
    const status = (await (await request(`${run.match[1]}/api/status`)).body.json()) as { connected: boolean };
    assert.equal(status.connected, true);
  } finally {
    run.child.kill('SIGINT');
    await run.exited;
  }
  // BURROW_EDGE over the file's edge; the file's inspect: off holds (no Inspector line).
  const byEnv = await spawnCli(['http', String(local.port), '--subdomain', 'env-wins-27', '--log', 'text'], { ...base, BURROW_EDGE: edge.url }, /Forwarding (http:\/\/\S+) -> /, 30_000, dir);
  try {
    assert.doesNotMatch(byEnv.output(), /Inspector/);
  } finally {
    byEnv.child.kill('SIGINT');
    await byEnv.exited;
  }
  // The file's edge over the saved login's (which is unreachable).
  const project = join(dir, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'burrow.yml'), `edge: ${edge.url}\ntoken_env: PRECEDENCE_TOKEN\ninspect: off\n`);
  writeConfig({ edge: 'http://127.0.0.1:1', token: TOKEN('z') }, configPath(base));
  const byFile = await spawnCli(['http', String(local.port), '--subdomain', 'file-wins-27'], base, /Forwarding (http:\/\/\S+) -> /, 30_000, project);
  try {
    assert.equal((await call(edge, 'GET', '/y', { host: `file-wins-27.localhost:${edge.port}` })).text, 'local saw /y');
  } finally {
    byFile.child.kill('SIGINT');
    await byFile.exited;
  }
});
