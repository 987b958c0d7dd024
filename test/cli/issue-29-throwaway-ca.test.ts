/**
 * Issue 29, point 4: docs/deploy.md's throwaway-CA recipe ("Trying HTTPS before DNS") run as written:
 * every command of its block, in a fresh directory and config home, and what each comment says it
 * prints is checked. The names (tunnels.example.test) resolve nowhere: only `--resolve` gets the client
 * and curl to the edge, and the certificate is still checked for the name. The block is parametrised by
 * substitution only: the edge gets `--port 0` appended and its port replaces every `8443`, a free port
 * replaces `3000`, `<name>` is what `burrow http` printed. A command this test does not know fails it.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { accepts, docBlock, printedPattern, stoppedAfterwards } from '../doc-blocks.js';
import { freePort, runCli, spawnCli, tempDirs, waitFor } from '../helpers.js';

const tempDir = tempDirs('burrow-throwaway-ca-');
const running = stoppedAfterwards();

test("deploy.md's throwaway-CA recipe works as written: HTTPS with the real names, no DNS", { skip: spawnSync('openssl', ['version']).error !== undefined && 'openssl is missing' }, async () => {
  const cwd = tempDir();
  const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CA: '', BURROW_RESOLVE: '', NODE_EXTRA_CA_CERTS: '' };
  const localPort = await freePort();
  let edgePort = 0;
  let name = '';
  const substitute = (text: string): string =>
    text
      .replaceAll('8443', String(edgePort))
      .replaceAll('3000', String(localPort))
      .replaceAll('<name>', name || '<name>');
  const words = (command: string): string[] => substitute(command).split(/\s+/);
  const seen: string[] = [];

  for (const { command, comment } of docBlock('docs/deploy.md', '#### Trying HTTPS before DNS')) {
    seen.push(command.split(' ').slice(0, 2).join(' ').replace(/^printf .*/, 'printf'));
    if (command.startsWith('openssl ') || command.startsWith('printf ')) {
      const result = spawnSync('sh', ['-c', command], { cwd, encoding: 'utf8', timeout: 20_000 });
      assert.equal(result.status, 0, `${command}\n${result.stderr}`);
    } else if (command.startsWith('burrow edge ')) {
      const edge = await spawnCli([...words(command).slice(1), '--port', '0'], env, /listening on https:\/\/tunnels\.example\.test:(\d+)/, 30_000, cwd);
      running.push(edge.child);
      edgePort = Number(edge.match[1]);
      assert.match(edge.output(), printedPattern(comment, substitute));
      assert.doesNotMatch(edge.output(), /warning/, 'the certificate covers the domain and its wildcard');
    } else if (command.startsWith('python3 -m http.server')) {
      const argv = words(command);
      const server = spawn(argv[0]!, argv.slice(1), { cwd, stdio: 'ignore' });
      running.push(server);
      await waitFor(() => accepts(localPort), 10_000, 'python3 -m http.server');
    } else if (command.startsWith('burrow http ')) {
      const http = await spawnCli(words(command).slice(1), env, /Forwarding https:\/\/([a-z0-9-]+)\.tunnels\.example\.test:\d+/, 30_000, cwd);
      running.push(http.child);
      name = http.match[1]!;
      assert.match(http.output(), printedPattern(comment, substitute));
      // Without --resolve the client stops at the name; without --ca, at the certificate.
      const withoutResolve = await runCli(['tunnels', 'list', '--ca', 'ca.pem'], env, 20_000, cwd);
      assert.match(withoutResolve.stderr, /the name tunnels\.example\.test (does not resolve|could not be looked up)/);
      const withoutCa = await runCli(['tunnels', 'list', '--resolve', `tunnels.example.test:${edgePort}:127.0.0.1`], env, 20_000, cwd);
      assert.match(withoutCa.stderr, /TLS certificate problem: .*trust the edge's CA with --ca FILE/);
    } else if (command.startsWith('curl ')) {
      const result = spawnSync('sh', ['-c', `curl -sS ${substitute(command).slice('curl '.length)}`], { cwd, encoding: 'utf8', timeout: 20_000 });
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, printedPattern(comment, substitute));
    } else if (command.startsWith('burrow ')) {
      const result = await runCli(words(command).slice(1), env, 20_000, cwd);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, printedPattern(comment, substitute));
    } else {
      assert.fail(`the recipe has a command this test does not know: ${command}`);
    }
  }
  assert.deepEqual(seen, ['openssl req', 'openssl req', 'printf', 'openssl x509', 'burrow edge', 'python3 -m', 'burrow http', 'curl --cacert', 'burrow tunnels']);
});

