/**
 * `burrow edge --public-url URL` (issue 14, DESIGN.md section 5b): behind a TLS-terminating proxy the
 * printed URLs, READY's public URL and X-Forwarded-Proto follow the public URL, not the edge's own
 * plain listener; and the TLS flags' usage errors and help.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { freePort, runCli, spawnCli, startLocal, tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-public-url-');

test('--public-url https://tunnels.burrow.test: printed URL, READY and X-Forwarded-Proto say https on 443', async () => {
  const dir = freshDir();
  const data = join(dir, 'data');
  const env = { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '' };
  // No proxy in this test: the client is sent straight to the agent port (--agent-url); behind a real
  // proxy the advertised wss://tunnels.burrow.test/api/v1/connect is the proxy's route to it.
  const agentPort = await freePort();
  const edge = await spawnCli(
    ['edge', '--port', '0', '--agent-port', String(agentPort), '--agent-url', `ws://127.0.0.1:${agentPort}/api/v1/connect`, '--data', data, '--public-url', 'https://tunnels.burrow.test'],
    env,
    /listening on (\S+) \(bound to 127\.0\.0\.1:(\d+)/,
  );
  assert.equal(edge.match[1], 'https://tunnels.burrow.test');
  const port = Number(edge.match[2]);
  const instance = await request(`http://127.0.0.1:${port}/api/v1/instance`, { headers: { host: 'tunnels.burrow.test' } });
  assert.equal(((await instance.body.json()) as { agent_url: string }).agent_url, `ws://127.0.0.1:${agentPort}/api/v1/connect`);
  const local = await startLocal((req, res) => res.end(JSON.stringify({ proto: req.headers['x-forwarded-proto'], host: req.headers['x-forwarded-host'] })));
  const created = await runCli(['admin', 'create-account', '--email', 'proxy@example.test', '--data', data, '--json'], env);
  const token = JSON.parse(created.stdout).token.token as string;
  const client = new TunnelClient({ edge: `http://127.0.0.1:${port}`, token, routes: new RouteTable(local.port, []) });
  try {
    const ready = await client.start();
    assert.equal(ready.publicUrl, `https://${ready.subdomain}.tunnels.burrow.test`);
    // What the proxy in front sends: its own Host, and a forwarded proto the edge sets itself.
    const response = await request(`http://127.0.0.1:${port}/`, { headers: { host: `${ready.subdomain}.tunnels.burrow.test`, 'x-forwarded-proto': 'gopher' } });
    assert.deepEqual(await response.body.json(), { proto: 'https', host: `${ready.subdomain}.tunnels.burrow.test` });
  } finally {
    await client.close();
    await local.close();
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
  }
});

test('TLS and public-URL flags: usage errors are one line with exit 2, and --help lists them', async () => {
  const dir = freshDir();
  const env = { XDG_CONFIG_HOME: join(dir, 'config') };
  const data = join(dir, 'data');
  const cases: [string[], RegExp][] = [
    [['--tls-cert', 'a.pem'], /give --tls-cert and --tls-key together/],
    [['--http-port', '8081'], /--http-port redirects to HTTPS: it needs --tls-cert and --tls-key/],
    [['--tls-cert', 'a.pem', '--tls-key', 'a.key', '--acme-webroot', dir], /--acme-webroot serves challenges on the --http-port listener/],
    [['--public-url', 'https://tunnels.example.com/path'], /--public-url is a scheme, a host and maybe a port, without a path/],
    [['--public-url', 'ftp://tunnels.example.com'], /--public-url must be an http:\/\/ or https:\/\/ URL/],
    [['--public-url', 'https://a.example.com', '--domain', 'b.example.com'], /--public-url names a\.example\.com but --domain is b\.example\.com/],
    [['--tls-cert', 'a.pem', '--tls-key', 'a.key', '--tls-sni', 'x.example.com'], /--tls-sni "x\.example\.com" must be NAME,CERT,KEY/],
  ];
  for (const [args, expected] of cases) {
    const result = await runCli(['edge', '--port', '0', '--data', data, ...args], env);
    assert.equal(result.code, 2, args.join(' '));
    assert.match(result.stderr, expected);
    assert.equal(result.stderr.split('\n').length, 2, 'one line');
  }
  const missing = await runCli(['edge', '--port', '0', '--data', data, '--tls-cert', join(dir, 'none.pem'), '--tls-key', join(dir, 'none.key')], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^burrow: cannot start the edge: cannot use the certificate \S+none\.pem: no such file\n$/);

  const edgeHelp = await runCli(['edge', '--help'], env);
  for (const flag of ['--tls-cert FILE', '--tls-key FILE', '--tls-sni NAME,CERT,KEY', '--http-port N', '--acme-webroot DIR', '--public-url URL', 'SIGHUP']) {
    assert.ok(edgeHelp.stdout.includes(flag), `burrow edge --help lists ${flag}`);
  }
  const httpHelp = await runCli(['http', '--help'], env);
  for (const flag of ['--ca FILE', '--insecure', 'NODE_EXTRA_CA_CERTS']) assert.ok(httpHelp.stdout.includes(flag), `burrow http --help lists ${flag}`);
});
