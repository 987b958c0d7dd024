/**
 * `burrow start NAME... | --all` (issue 27, item 1) through the real CLI against a real edge and real
 * local servers: one process runs the file's tunnels with one inspector, each public URL reaches its
 * own server, the Forwarding lines are burrow http's, request lines and --json events carry the
 * tunnel's name; a tunnel the edge refuses is reported while the others keep serving.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, runCli, spawnCli, startEdge, startLocal, tempDirs, waitFor, type LocalServer, type SpawnedProcess, type TestAccount, type TestEdge } from '../helpers.js';

const freshDir = tempDirs('burrow-start-');
let edge: TestEdge;
let account: TestAccount;
const locals: Record<string, LocalServer> = {};

before(async () => {
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  for (const name of ['shop', 'blog', 'hooks']) {
    locals[name] = await startLocal((req, res) => {
      res.setHeader('content-type', 'text/plain');
      res.end(`${name} saw ${req.url}`);
    });
  }
});
after(async () => {
  for (const local of Object.values(locals)) await local.close();
  await edge.close();
});

/** A project directory whose burrow.yml has the three tunnels (subdomains made unique per test). */
function project(tag: string, extra = ''): { dir: string; env: Record<string, string> } {
  const dir = freshDir();
  const text = [
    `edge: ${edge.url}`,
    'token_env: START_TEST_TOKEN',
    'inspect: 0',
    'tunnels:',
    '  shop:',
    `    http: ${locals.shop!.port}`,
    `    subdomain: shop-${tag}`,
    '  blog:',
    `    http: 127.0.0.1:${locals.blog!.port}`,
    `    subdomain: blog-${tag}`,
    '  hooks:',
    `    http: http://localhost:${locals.hooks!.port}`,
    `    subdomain: hooks-${tag}`,
    extra,
  ].join('\n');
  writeFileSync(join(dir, 'burrow.yml'), text);
  return { dir, env: { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '', BURROW_TOKEN: '', BURROW_EDGE: '', START_TEST_TOKEN: account.token } };
}

async function get(host: string, path = '/'): Promise<{ status: number; text: string }> {
  const response = await call(edge, 'GET', path, { host });
  return { status: response.status, text: response.text };
}

/** "Forwarding URL -> TARGET" lines: target → public host. */
function forwarded(output: string): Map<string, string> {
  return new Map([...output.matchAll(/^Forwarding (http:\/\/\S+) -> (\S+)$/gm)].map((match) => [match[2]!, new URL(match[1]!).host]));
}

async function stop(run: SpawnedProcess): Promise<number | null> {
  run.child.kill('SIGINT');
  return run.exited;
}

test('burrow start --all: three tunnels in one process, each URL reaching its own server, one inspector for all', async () => {
  const { dir, env } = project('all');
  const run = await spawnCli(['start', '--all', '--log', 'text'], env, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){3}/, 30_000, dir);
  try {
    const targets = forwarded(run.output());
    assert.deepEqual(
      [...targets.keys()].sort(),
      [`http://localhost:${locals.shop!.port}`, `http://127.0.0.1:${locals.blog!.port}`, `http://localhost:${locals.hooks!.port}`].sort(),
    );
    assert.equal(targets.get(`http://localhost:${locals.shop!.port}`), `shop-all.localhost:${edge.port}`);
    for (const [name, host] of [['shop', `shop-all.localhost:${edge.port}`], ['blog', `blog-all.localhost:${edge.port}`], ['hooks', `hooks-all.localhost:${edge.port}`]] as const) {
      const answer = await get(host, `/from-${name}`);
      assert.equal(answer.status, 200);
      assert.equal(answer.text, `${name} saw /from-${name}`);
    }
    // One connection carries the three (BIND, docs/protocol.md section 18): each a tunnel of its own on the edge.
    const sessions = ['shop', 'blog', 'hooks'].map((name) => edge.edge.registry.session(`${name}-all`)!);
    assert.equal(new Set(sessions.map((session) => session.connection)).size, 1, 'one connection');
    assert.deepEqual(sessions.map((session) => session.tunnelId).sort(), [1, 2, 3]);
    assert.equal(sessions[0]!.connection.first, undefined, 'the connect itself names no tunnel');
    // Request lines name their tunnel.
    await waitFor(() => /^hooks +GET \/from-hooks 200 /m.test(run.output()), 5_000, 'the hooks request line');
    assert.match(run.output(), /^shop +GET \/from-shop 200 /m);
    // One inspector: every tunnel in its status, every exchange marked with its tunnel.
    const inspector = /^Inspector (http:\/\/\S+)$/m.exec(run.output())![1]!;
    assert.equal(run.output().match(/^Inspector /gm)!.length, 1);
    const status = (await (await request(`${inspector}/api/status`)).body.json()) as { connected: boolean; requests: number; tunnels: { name: string; public_url: string; connected: boolean }[] };
    assert.equal(status.connected, true);
    assert.deepEqual(status.tunnels.map((tunnel) => [tunnel.name, new URL(tunnel.public_url).host]), [
      ['shop', `shop-all.localhost:${edge.port}`],
      ['blog', `blog-all.localhost:${edge.port}`],
      ['hooks', `hooks-all.localhost:${edge.port}`],
    ]);
    await waitFor(async () => ((await (await request(`${inspector}/api/requests?summary=1`)).body.json()) as { requests: unknown[] }).requests.length === 3, 5_000, 'three exchanges');
    const listed = (await (await request(`${inspector}/api/requests?summary=1`)).body.json()) as { requests: { path: string; tunnel: string }[] };
    assert.deepEqual(listed.requests.map((item) => `${item.tunnel} ${item.path}`).sort(), ['blog /from-blog', 'hooks /from-hooks', 'shop /from-shop']);
    const onlyBlog = (await (await request(`${inspector}/api/requests?summary=1&tunnel=blog`)).body.json()) as { requests: { path: string }[] };
    assert.deepEqual(onlyBlog.requests.map((item) => item.path), ['/from-blog']);
    // Ctrl-C closes every tunnel; all ran until then: exit 0.
    assert.equal(await stop(run), 0);
    assert.match(run.output(), /tunnels closed\n$/);
    assert.equal((await get(`shop-all.localhost:${edge.port}`)).status, 404);
  } finally {
    run.child.kill('SIGKILL');
  }
});

test('burrow start shop hooks: only the named tunnels, with --json events carrying the tunnel name', async () => {
  const { dir, env } = project('two');
  const run = await spawnCli(['start', 'hooks', 'shop', '--json'], env, /(?:"event":"ready"[\s\S]*?){2}/, 30_000, dir);
  try {
    const events = (): Record<string, unknown>[] => run.output().trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const ready = events().filter((event) => event.event === 'ready');
    assert.deepEqual(ready.map((event) => event.tunnel).sort(), ['hooks', 'shop']);
    assert.equal((await get(`shop-two.localhost:${edge.port}`)).text, 'shop saw /');
    assert.equal((await get(`hooks-two.localhost:${edge.port}`)).text, 'hooks saw /');
    // blog was not asked for: no tunnel on its name.
    assert.equal((await get(`blog-two.localhost:${edge.port}`)).status, 404);
    await waitFor(() => events().filter((event) => event.event === 'request').length === 2, 5_000, 'two request events');
    const requests = events().filter((event) => event.event === 'request');
    assert.deepEqual(requests.map((event) => event.tunnel).sort(), ['hooks', 'shop']);
    assert.equal(await stop(run), 0);
    const closed = events().filter((event) => event.event === 'closed');
    assert.deepEqual(closed.map((event) => [event.tunnel, event.by_user]).sort(), [['hooks', true], ['shop', true]]);
  } finally {
    run.child.kill('SIGKILL');
  }
});

test('a tunnel the edge refuses is reported and the others keep serving; exit 1 at the end', async () => {
  const rival = await createAccount(edge, 'FREE');
  const taken = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: rival.token, body: { subdomain: 'rivals-start-27' } });
  assert.equal(taken.status, 201, taken.text);
  const extra = ['  stolen:', `    http: ${locals.blog!.port}`, '    subdomain: rivals-start-27', '  db:', '    tcp: 5432', ''];
  const { dir, env } = project('partial', extra.join('\n'));
  const run = await spawnCli(['start', '--all'], env, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){3}/, 30_000, dir);
  try {
    await waitFor(() => ['stolen', 'db'].every((name) => run.output().includes(`tunnel ${name} not started`)), 10_000, 'the two refusals');
    assert.match(run.output(), /^burrow: tunnel stolen not started: SUBDOMAIN_TAKEN: /m);
    // The test edge has no --tcp-ports: the file's tcp tunnel is refused by it, saying why.
    assert.match(run.output(), /^burrow: tunnel db not started: INVALID_REQUEST: This edge serves no TCP tunnels: it was started without --tcp-ports/m);
    assert.equal((await get(`shop-partial.localhost:${edge.port}`)).text, 'shop saw /');
    assert.equal(await stop(run), 1);
  } finally {
    run.child.kill('SIGKILL');
  }
});

test("a tunnel's policy keys go with its connect as a one-run policy the edge checks; a name with a stored policy refuses them", async () => {
  const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'stored-start-26' } });
  assert.equal(reserved.status, 201, reserved.text);
  const stored = await call(edge, 'PUT', '/api/v1/reserved-subdomains/stored-start-26/policy', { token: account.token, body: { allow_cidr: ['127.0.0.0/8'] } });
  assert.equal(stored.status, 200, stored.text);
  const guarded = ['  guarded:', `    http: ${locals.hooks!.port}`, '    subdomain: guarded-start-26', '    request_header_add: "X-Team: blue"', '    verify_webhook: github:whsec_start_26', '    rate_limit: 100/m'];
  const clashing = ['  clashing:', `    http: ${locals.blog!.port}`, '    subdomain: stored-start-26', '    deny_cidr: 10.0.0.0/8'];
  const { dir, env } = project('policy', [...guarded, ...clashing, ''].join('\n'));
  const checked = await runCli(['config', 'check'], env, 20_000, dir);
  assert.equal(checked.code, 0, checked.stdout + checked.stderr);
  const run = await spawnCli(['start', 'guarded', 'clashing'], env, /Forwarding \S+ -> \S+\n/, 30_000, dir);
  try {
    assert.match(run.output(), new RegExp(`^Forwarding http://guarded-start-26\\.localhost:${edge.port} -> http://localhost:${locals.hooks!.port}$`, 'm'));
    // The edge took the policy from the connect header: the secret sealed.
    const policy = edge.edge.registry.session('guarded-start-26')!.runPolicy!;
    assert.deepEqual(policy.requestHeaderAdd, [['X-Team', 'blue']]);
    assert.doesNotMatch(JSON.stringify(policy), /whsec_start_26/);
    assert.deepEqual([policy.webhooks!.length, policy.webhooks![0]!.provider, policy.rateLimit], [1, 'github', { requests: 100, periodSeconds: 60 }]);
    await waitFor(() => run.output().includes('tunnel clashing not started'), 10_000, 'the refusal');
    assert.match(run.output(), /^burrow: tunnel clashing not started: INVALID_REQUEST: The reserved subdomain "stored-start-26" has a stored policy; change it with "burrow reserve stored-start-26 \.\.\." or connect without policy flags\.$/m);
    assert.equal(edge.edge.registry.session('stored-start-26'), undefined);
    assert.equal(await stop(run), 1);
  } finally {
    run.child.kill('SIGKILL');
  }
});

test('when no tunnel can start the process ends by itself, exit 1; names it does not have are a usage error', async () => {
  const { dir, env } = project('none');
  const refused = await runCli(['start', '--all'], { ...env, START_TEST_TOKEN: `svc_pat_${'0'.repeat(8)}_${'b'.repeat(36)}` }, 30_000, dir);
  assert.equal(refused.code, 1);
  assert.equal(refused.stderr.match(/not started: UNAUTHORIZED: /g)?.length, 3, refused.stderr);
  const unknown = await runCli(['start', 'shop', 'nope'], env, 20_000, dir);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /has no tunnel "nope"; it has: shop, blog, hooks\n$/);
  const both = await runCli(['start', 'shop', '--all'], env, 20_000, dir);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /give tunnel names or --all, not both/);
  const neither = await runCli(['start'], env, 20_000, dir);
  assert.equal(neither.code, 2);
  assert.match(neither.stderr, /name the tunnels to start, or --all; .* has: shop, blog, hooks/);
});
