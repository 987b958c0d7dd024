/**
 * Which burrow.yml is used (issue 27, item 1): --config FILE, else BURROW_CONFIG, else ./burrow.yml,
 * else the user config directory's; `burrow config path` says which and where it looked, and
 * `burrow config edit` makes a commented example that checks clean, opening $VISUAL/$EDITOR in a
 * terminal and printing the path without one.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, runCli, tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-config-path-');

function tunnelFile(path: string, port: number): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, `tunnels:\n  t${port}:\n    http: ${port}\n`);
}

test('config path: --config, then BURROW_CONFIG, then ./burrow.yml, then the user config directory', async () => {
  const cwd = freshDir();
  const xdg = join(cwd, 'xdg');
  const user = join(xdg, 'burrow', 'burrow.yml');
  const local = join(cwd, 'burrow.yml');
  const named = join(cwd, 'named.yml');
  const fromEnv = join(cwd, 'env.yml');
  const env = { XDG_CONFIG_HOME: xdg, BURROW_CONFIG: '' };

  const none = await runCli(['config', 'path'], env, 20_000, cwd);
  assert.equal(none.code, 1);
  assert.equal(none.stdout, `  1. ${local} (working directory): not there\n  2. ${user} (user config directory): not there\n`);
  assert.match(none.stderr, /^burrow: no burrow\.yml: looked at /);

  tunnelFile(user, 1001);
  const userOnly = await runCli(['config', 'path'], env, 20_000, cwd);
  assert.equal(userOnly.code, 0);
  assert.equal(userOnly.stdout, `${user}\n  1. ${local} (working directory): not there\n  2. ${user} (user config directory): used\n`);

  tunnelFile(local, 1002);
  const both = await runCli(['config', 'path', '--json'], env, 20_000, cwd);
  assert.deepEqual(JSON.parse(both.stdout), {
    path: local,
    from: 'working directory',
    looked: [
      { path: local, place: 'working directory', exists: true },
      { path: user, place: 'user config directory', exists: true },
    ],
  });
  // The file in use is the one the commands read: the working directory's tunnel.
  const checked = await runCli(['config', 'check', '--json'], env, 20_000, cwd);
  assert.deepEqual(JSON.parse(checked.stdout).tunnels.map((tunnel: { name: string }) => tunnel.name), ['t1002']);

  tunnelFile(fromEnv, 1003);
  const byEnv = await runCli(['config', 'path'], { ...env, BURROW_CONFIG: 'env.yml' }, 20_000, cwd);
  assert.equal(byEnv.stdout, `${fromEnv}\n  1. ${fromEnv} (BURROW_CONFIG): used\n`);

  tunnelFile(named, 1004);
  const byFlag = await runCli(['config', 'path', '--config', named], { ...env, BURROW_CONFIG: fromEnv }, 20_000, cwd);
  assert.equal(byFlag.stdout, `${named}\n  1. ${named} (--config): used\n`);
  const started = await runCli(['start', 't1004', '--config', named], { ...env, BURROW_CONFIG: fromEnv, BURROW_TOKEN: '', BURROW_EDGE: '' }, 20_000, cwd);
  assert.doesNotMatch(started.stderr, /has no tunnel/, 'burrow start read the --config file');
});

test('config edit without a terminal: writes the commented example (0600, checks clean) and prints its path', async () => {
  const cwd = freshDir();
  const xdg = join(cwd, 'xdg');
  const env = { XDG_CONFIG_HOME: xdg, BURROW_CONFIG: '' };
  const user = join(xdg, 'burrow', 'burrow.yml');
  const result = await runCli(['config', 'edit'], env, 20_000, cwd);
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout, `${user}\n`);
  assert.equal(result.stderr, `burrow: wrote an example to ${user}\n`);
  assert.equal(statSync(user).mode & 0o777, 0o600);
  const example = readFileSync(user, 'utf8');
  for (const key of ['edge:', 'token_env:', 'ca:', 'inspect:', 'log:', 'subdomain:', 'host_header:', 'routes:', 'strip_prefix:', 'basic_auth:']) {
    assert.ok(example.includes(key), `the example shows ${key}`);
  }
  const checked = await runCli(['config', 'check'], env, 20_000, cwd);
  assert.equal(checked.code, 0, checked.stdout);
  assert.match(checked.stdout, /is valid: 1 tunnel\n/);
  // Run again, the file is kept as it is.
  writeFileSync(user, 'tunnels: {}\n');
  const again = await runCli(['config', 'edit', '--json'], env, 20_000, cwd);
  assert.deepEqual(JSON.parse(again.stdout), { path: user, created: false });
  assert.equal(readFileSync(user, 'utf8'), 'tunnels: {}\n');
  // --config names where a new file goes.
  const project = join(cwd, 'project', 'burrow.yml');
  const made = await runCli(['config', 'edit', '--config', project, '--json'], env, 20_000, cwd);
  assert.deepEqual(JSON.parse(made.stdout), { path: project, created: true });
});

test('config edit in a terminal runs $EDITOR (with its arguments) on the file, then checks it', async () => {
  const cwd = freshDir();
  const xdg = join(cwd, 'xdg');
  const file = join(cwd, 'burrow.yml');
  writeFileSync(file, 'tunnels: {}\n');
  // The "editor" appends a tunnel with a mistake in it, as a person might.
  const editor = join(cwd, 'editor.sh');
  writeFileSync(editor, '#!/bin/sh\n[ "$1" = "--flag" ] || exit 9\nprintf "tunnels:\\n  web:\\n    http: 3000\\n    colour: red\\n" > "$2"\n');
  chmodSync(editor, 0o755);
  const command = `${process.execPath} ${BIN} config edit`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd,
    env: { ...process.env, XDG_CONFIG_HOME: xdg, BURROW_CONFIG: '', VISUAL: `${editor} --flag`, EDITOR: 'false', TERM: 'dumb' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  assert.equal(code, 1, output);
  assert.match(readFileSync(file, 'utf8'), /colour: red/, 'the editor ran on the file in use');
  assert.ok(output.includes(`${file}:4:5: tunnels.web.colour: unknown key`), output);
  assert.ok(output.includes('"burrow config edit" again to fix it'), output);
});
