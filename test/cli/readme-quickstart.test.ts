/**
 * README.md's quick start, run as written (issue 16 acceptance): every command of its block, in a fresh
 * working directory (so `./.burrow` is new) with a fresh config home, and what each comment says it
 * prints is checked. `burrow` is bin/burrow.js (what `npm install -g .` puts on PATH). The block is
 * parametrised by substitution only: the edge gets `--port 0` appended and its port replaces every
 * `8080`, a free port replaces `3000`, and `<name>` / `<dev token>` are what the earlier commands
 * printed. A command this test does not know fails it, so the README cannot grow an unchecked step.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { accepts, docBlock, printedPattern, stoppedAfterwards } from '../doc-blocks.js';
import { freePort, runCli, spawnCli, tempDirs, waitFor } from '../helpers.js';

const tempDir = tempDirs('burrow-readme-');
const running = stoppedAfterwards();

test("README's quick start works as written, from a fresh directory and config", async () => {
  const steps = docBlock('README.md', '## Quick start');
  const cwd = tempDir();
  const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_INSPECTOR: '' };
  const localPort = await freePort();
  let edgePort = 0;
  let name = '';
  let token = '';
  const substitute = (text: string): string =>
    text
      .replaceAll('8080', String(edgePort))
      .replaceAll('3000', String(localPort))
      .replaceAll('<name>', name || '<name>')
      .replaceAll('<dev token>', token || '<dev token>');
  const words = (command: string): string[] => [...substitute(command).matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
  let inspector = '';
  const seen: string[] = [];

  for (const { command, comment } of steps) {
    seen.push(command.split(' ').slice(0, 2).join(' '));
    const argv = words(command);
    if (command === 'burrow edge --dev') {
      const edge = await spawnCli([...argv.slice(1), '--port', '0'], env, /dev token \(shown once\): (svc_pat_\S+)\n/, 30_000, cwd);
      running.push(edge.child);
      token = edge.match[1]!;
      edgePort = Number(/listening on http:\/\/localhost:(\d+)/.exec(edge.output())![1]);
      assert.match(comment, /the edge on http:\/\/localhost:8080, data in \.\/\.burrow/);
      assert.match(edge.output(), printedPattern(comment, substitute));
      assert.ok(edge.output().includes(`data in ${join(cwd, '.burrow')}`), edge.output());
    } else if (command.startsWith('python3 -m http.server')) {
      const server = spawn(argv[0]!, argv.slice(1), { cwd, stdio: 'ignore' });
      running.push(server);
      await waitFor(() => accepts(localPort), 10_000, 'python3 -m http.server');
    } else if (command.startsWith('burrow http')) {
      const http = await spawnCli(argv.slice(1), env, /Inspector (http:\/\/\S+)\n/, 30_000, cwd);
      running.push(http.child);
      const forwarding = /Forwarding http:\/\/([a-z0-9-]+)\.localhost/.exec(http.output())!;
      name = forwarding[1]!;
      inspector = http.match[1]!;
      assert.match(http.output(), printedPattern(comment, substitute));
    } else if (command.startsWith('curl')) {
      const result = spawnSync('curl', ['-sS', ...argv.slice(1)], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(result.status, 0, result.stderr);
      if (comment.startsWith('{')) {
        const shown = JSON.parse(comment) as Record<string, string>;
        const answer = JSON.parse(result.stdout) as Record<string, string>;
        assert.deepEqual(Object.keys(answer), Object.keys(shown));
        assert.deepEqual({ email: answer.email, plan: answer.plan }, { email: shown.email, plan: shown.plan });
        assert.equal(answer.id!.split('_')[0], shown.id!.split('_')[0], 'the id has the shape the README shows');
      } else {
        assert.match(result.stdout, printedPattern(comment, substitute), result.stdout);
      }
    } else if (command.startsWith('burrow ')) {
      // Other inspectors may hold 4040 on a shared machine: the variable points replay at this one.
      const result = await runCli(argv.slice(1), { ...env, BURROW_INSPECTOR: inspector }, 20_000, cwd);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, printedPattern(comment, substitute), result.stdout);
    } else {
      assert.fail(`the quick start has a command this test does not know: ${command}`);
    }
  }
  assert.deepEqual(seen, ['burrow edge', 'python3 -m', 'burrow http', `curl http://<name>.localhost:8080/`, 'burrow requests', 'burrow replay', 'curl -H']);
});

