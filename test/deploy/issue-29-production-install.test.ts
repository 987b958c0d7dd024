/**
 * Issue 29, points 1 and 8, on a fresh `git clone` of this repository's HEAD (committed work only):
 *
 * - README's set-up `npm install` builds, prints no npm install-scripts notice (package.json's
 *   allowScripts approves the native dependencies' scripts), and `npm start -- --port N` runs the dev
 *   edge on that port.
 * - docs/deploy.md's production install ("Running under systemd") and its upgrade ("Upgrading", step 3)
 *   run as written: `sudo` dropped, the repository URL, /opt/burrow and /etc/systemd/system/ pointed
 *   at temp dirs. What they leave has no build tools, and the unit they installed starts the edge: its
 *   ExecStart, with loopback ports, temp directories and a throwaway certificate in place of the
 *   server's, serves HTTPS and /healthz, and after the upgrade reports the new build.
 * - `npm ci --omit=dev`, which used to end in "tsc: not found", stops at once saying what to run.
 *
 * Steps of the systemd block that need root and systemd (useradd, systemctl, journalctl) are listed
 * here by name, so the block cannot grow a step this test does not account for.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { docBlock } from '../doc-blocks.js';
import { freePort, ROOT, tempDirs, testEdgeArgs, waitFor } from '../helpers.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';

const tempDir = tempDirs('burrow-production-install-');
/** npm's own chatter off; nothing about what gets installed changes. */
const NPM_ENV: NodeJS.ProcessEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
delete NPM_ENV.NODE_ENV;
const DOMAIN = 'tunnels.example.com';
const running = new Set<ChildProcess>();
after(() => {
  for (const child of running) child.kill('SIGKILL');
});

function sh(script: string, cwd: string, timeoutMs = 120_000): { status: number | null; output: string } {
  const result = spawnSync('sh', ['-e', '-c', script], { cwd, env: NPM_ENV, encoding: 'utf8', timeout: timeoutMs });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

function git(args: string[], cwd: string): string {
  const result = spawnSync('git', args, { cwd, encoding: 'utf8' });
  assert.equal(result.status, 0, `git ${args.join(' ')}: ${result.stderr}`);
  return result.stdout.trim();
}

/** Reads the key's value (one line) of a systemd unit. */
function unitValue(unit: string, key: string): string {
  const match = new RegExp(`^${key}=(.*)$`, 'm').exec(unit);
  assert.ok(match, `the unit has ${key}=`);
  return match[1]!;
}

describe('installing from a fresh clone, as the README and docs/deploy.md say', () => {
  let work: string;
  let origin: string;
  let head: string;

  before(() => {
    work = tempDir();
    origin = join(work, 'origin.git');
    head = git(['rev-parse', 'HEAD'], ROOT);
    // "The repository": this worktree's HEAD, as a bare repository to clone from and to push an upgrade to.
    git(['clone', '--quiet', '--bare', ROOT, origin], work);
    assert.equal(git(['rev-parse', 'HEAD'], origin), head);
  });

  test('README set-up: npm install builds without an install-scripts notice; npm start -- --port N', { timeout: 180_000 }, async () => {
    const checkout = join(work, 'dev');
    git(['clone', '--quiet', origin, checkout], work);
    const install = sh('npm install', checkout);
    assert.equal(install.status, 0, install.output);
    assert.doesNotMatch(install.output, /install-scripts|allowScripts/, 'npm prints no install-scripts advisory');
    assert.ok(existsSync(join(checkout, 'dist', 'src', 'cli', 'main.js')), 'npm install built dist/');
    const scripts = sh('npm install-scripts ls', checkout);
    assert.match(scripts.output, /No packages with unreviewed install scripts/);

    const port = await freePort();
    // The floor off (testEdgeArgs): what the edge stores must not depend on the free space of /tmp.
    const start = spawn('npm', ['start', '--', ...testEdgeArgs(['edge', '--port', String(port)]).slice(1)], {
      cwd: checkout,
      env: { ...NPM_ENV, XDG_CONFIG_HOME: join(work, 'dev-config') },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    running.add(start);
    let output = '';
    start.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    start.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      // The dev account's lines follow the listening line (and the plain-HTTP warning), maybe in a later chunk.
      await waitFor(() => output.includes(`listening on http://localhost:${port}`) && output.includes('created dev account'), 60_000, `npm start -- --port ${port}: ${output}`);
      assert.match(output, /created dev account dev@localhost \(usr_[0-9a-f]+, plan PRO\)/);
    } finally {
      // npm and the edge it started: the whole process group.
      process.kill(-start.pid!, 'SIGINT');
      await once(start, 'exit');
      running.delete(start);
    }
  });

  test('npm ci --omit=dev says what to run instead of "tsc: not found"', { timeout: 180_000 }, () => {
    const checkout = join(work, 'omit-dev');
    git(['clone', '--quiet', origin, checkout], work);
    const result = sh('npm ci --omit=dev', checkout);
    assert.notEqual(result.status, 0);
    assert.doesNotMatch(result.output, /tsc: not found/);
    assert.match(result.output, /npm ci --include=dev && npm prune --omit=dev/);
  });

  test('the production install, the unit it installs, and the upgrade, as docs/deploy.md says', { timeout: 300_000 }, async () => {
    const opt = join(work, 'opt', 'burrow');
    const systemd = join(work, 'etc', 'systemd', 'system');
    mkdirSync(join(work, 'opt'));
    mkdirSync(systemd, { recursive: true });
    const substitute = (line: string): string =>
      line
        .replace(/\bsudo /g, '')
        .replaceAll('https://github.com/<you>/burrow', origin)
        .replaceAll('/opt/burrow', opt)
        .replaceAll('/etc/systemd/system/', `${systemd}/`);

    // "Running under systemd": every line that needs no root or systemd runs, in order, in one shell.
    const NEEDS_SYSTEM = [/^sudo useradd /, /^sudo systemctl edit --full burrow-edge$/, /^sudo systemctl daemon-reload && sudo systemctl enable --now burrow-edge$/, /^journalctl -u burrow-edge -f$/];
    const lines = docBlock('docs/deploy.md', '## Running under systemd').map((step) => step.command);
    const runnable = lines.filter((line) => !NEEDS_SYSTEM.some((pattern) => pattern.test(line)));
    assert.equal(lines.length - runnable.length, NEEDS_SYSTEM.length, `the block's system steps: ${lines.join('\n')}`);
    const installed = sh(runnable.map(substitute).join('\n'), work, 240_000);
    assert.equal(installed.status, 0, installed.output);
    assert.doesNotMatch(installed.output, /install-scripts/);
    assertProductionTree(opt);
    assert.equal(git(['rev-parse', 'HEAD'], opt), head);

    // The unit as installed, started the way systemd would: ExecStart in WorkingDirectory with its Environment.
    const unit = readFileSync(join(systemd, 'burrow-edge.service'), 'utf8');
    const certificates = join(work, 'tls');
    mkdirSync(certificates);
    const ca = makeCa(certificates, 'ca');
    const server = makeServerCert(certificates, 'fullchain', [DOMAIN, `*.${DOMAIN}`], ca);
    const started = await startUnit(unit, opt, server, readFileSync(ca.cert));
    assert.equal(started.build, JSON.parse(readFileSync(join(opt, 'package.json'), 'utf8')).version);
    await started.stop();

    // An upgrade: a new commit upstream (a build that says so), then "Upgrading", step 3, as written.
    const upstream = join(work, 'upstream');
    git(['clone', '--quiet', origin, upstream], work);
    const versionFile = join(upstream, 'src', 'version.ts');
    writeFileSync(versionFile, readFileSync(versionFile, 'utf8').replace(/export const VERSION = '[^']*';/, "export const VERSION = '0.0.0-upgrade-test';"));
    git(['-c', 'user.name=Test', '-c', 'user.email=test@example.test', 'commit', '--quiet', '-am', 'the upgrade'], upstream);
    git(['push', '--quiet', 'origin', 'HEAD'], upstream);
    const deploy = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
    const step = /under systemd": `(cd \/opt\/burrow && [^`]+)`/.exec(deploy.slice(deploy.indexOf('## Upgrading')));
    assert.ok(step, 'Upgrading, step 3, names its command');
    const upgraded = sh(substitute(step[1]!), work, 240_000);
    assert.equal(upgraded.status, 0, upgraded.output);
    assertProductionTree(opt);
    assert.equal(git(['rev-parse', 'HEAD'], opt), git(['rev-parse', 'HEAD'], upstream));
    const restarted = await startUnit(unit, opt, server, readFileSync(ca.cert));
    assert.equal(restarted.build, '0.0.0-upgrade-test', 'the edge runs the rebuilt dist/');
    await restarted.stop();
  });

  /** Built, and without the build and test tools. */
  function assertProductionTree(opt: string): void {
    assert.ok(existsSync(join(opt, 'dist', 'src', 'cli', 'main.js')), 'dist/ is built');
    for (const tool of ['typescript', 'playwright-core', 'autocannon', 'tinybench', 'fast-check']) {
      assert.ok(!existsSync(join(opt, 'node_modules', tool)), `${tool} was pruned`);
    }
    for (const runtime of ['lmdb', 'uWebSockets.js', 'ws', 'undici', 'ioredis']) {
      assert.ok(existsSync(join(opt, 'node_modules', runtime)), `${runtime} is installed`);
    }
  }

  /** The unit's ExecStart, on loopback ports and temp dirs; resolves once /healthz answers. */
  async function startUnit(unit: string, opt: string, server: { cert: string; key: string }, ca: Buffer): Promise<{ build: string; stop(): Promise<void> }> {
    const [httpsPort, httpPort, adminPort, agentPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const data = tempDir();
    const logs = tempDir();
    const replacements: [string, string][] = [
      ['/usr/bin/node ', `${process.execPath} `],
      ['/opt/burrow', opt],
      ['--host 0.0.0.0', '--host 127.0.0.1'],
      ['--port 443', `--port ${httpsPort}`],
      // Issue 24: tunnel clients connect to the agent port, which the edge names in GET /api/v1/instance.
      ['--agent-port 8443', `--agent-port ${agentPort}`],
      ['--http-port 80', `--http-port ${httpPort}`],
      ['--admin 127.0.0.1:9090', `--admin 127.0.0.1:${adminPort}`],
      ['/var/lib/burrow', data],
      ['/var/log/burrow', logs],
      ['/etc/burrow/tls/fullchain.pem', server.cert],
      ['/etc/burrow/tls/privkey.pem', server.key],
    ];
    let command = unitValue(unit, 'ExecStart');
    for (const [from, to] of replacements) {
      assert.ok(command.includes(from), `ExecStart has ${from}: ${command}`);
      command = command.replaceAll(from, to);
    }
    assert.equal(unitValue(unit, 'WorkingDirectory'), '/var/lib/burrow');
    const [name, value] = unitValue(unit, 'Environment').split('=') as [string, string];
    const [executable, ...args] = command.split(' ');
    const [script, ...edgeArgs] = args;
    const child = spawn(executable!, [script!, ...testEdgeArgs(edgeArgs)], { cwd: data, env: { ...process.env, [name]: value }, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = once(child, 'exit') as Promise<[number | null]>;
    await waitFor(() => output.includes(`listening on https://${DOMAIN}:${httpsPort}`) || child.exitCode !== null, 30_000, `the edge: ${output}`);
    assert.equal(child.exitCode, null, output);
    const health = await request(`http://127.0.0.1:${adminPort}/healthz`);
    assert.deepEqual([health.statusCode, await health.body.json()], [200, { status: 'serving' }]);
    const tls = new Agent({ connect: { ca, servername: DOMAIN } });
    const instance = await request(`https://127.0.0.1:${httpsPort}/api/v1/instance`, { headers: { host: DOMAIN }, dispatcher: tls });
    const { build, agent_url: agentUrl } = (await instance.body.json()) as { build: string; agent_url: string };
    assert.equal(agentUrl, `wss://${DOMAIN}:${agentPort}/api/v1/connect`, 'the unit\'s agent port, with TLS');
    await tls.close();
    return {
      build,
      async stop() {
        child.kill('SIGTERM');
        const [code] = await exited;
        running.delete(child);
        assert.equal(code, 0, `a clean stop: ${output}`);
      },
    };
  }
});
