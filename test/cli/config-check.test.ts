/**
 * `burrow config check` through the real CLI (issue 27, item 1): every problem names the file, line,
 * column and key path, exit 1; a valid file prints a summary of its tunnels (and --json never shows a
 * secret); a file holding a literal token that others may read is warned about.
 */
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli, tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-config-check-');

/** A directory holding `burrow.yml` with `text`, and the environment that finds nothing else. */
function withFile(text: string, mode = 0o600): { dir: string; file: string; env: Record<string, string> } {
  const dir = freshDir();
  const file = join(dir, 'burrow.yml');
  writeFileSync(file, text);
  chmodSync(file, mode);
  return { dir, file, env: { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '', BURROW_TOKEN: '', BURROW_EDGE: '' } };
}

async function check(text: string, extra: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string; file: string }> {
  const { dir, file, env } = withFile(text);
  const result = await runCli(['config', 'check', ...extra], env, 20_000, dir);
  return { ...result, file };
}

// One case per kind of mistake: the line and column of the key or value at fault, and its key path.
const CASES: { what: string; text: string; line: number; column: number; key: string; message: RegExp }[] = [
  {
    what: 'an unknown key, with the likely one',
    text: 'tunnels:\n  web:\n    http: 3000\n    sudomain: web-app\n',
    line: 4,
    column: 5,
    key: 'tunnels.web.sudomain',
    message: /unknown key; did you mean "subdomain"\?/,
  },
  {
    what: 'an unknown top-level key',
    text: 'edge: http://localhost:8080\ntunnel:\n  web:\n    http: 3000\n',
    line: 2,
    column: 1,
    key: 'tunnel',
    message: /unknown key; did you mean "tunnels"\?/,
  },
  {
    what: 'an unknown key without a likely one',
    text: 'colour: blue\n',
    line: 1,
    column: 1,
    key: 'colour',
    message: /unknown key \(burrow\.yml takes version, edge, edges, token, token_env, ca, inspect, log, tunnels\)/,
  },
  {
    what: 'resolve, which only --resolve and BURROW_RESOLVE give',
    text: 'edge: https://tunnels.example.test\nresolve:\n  - tunnels.example.test:443:127.0.0.1\n',
    line: 2,
    column: 1,
    key: 'resolve',
    message: /unknown key: --resolve rules are not read from a file .*; pass --resolve HOST:PORT:ADDRESS or set BURROW_RESOLVE/,
  },
  {
    what: 'a wrong type',
    text: 'tunnels:\n  web:\n    http: 3000\n    local_insecure: "yes"\n',
    line: 4,
    column: 21,
    key: 'tunnels.web.local_insecure',
    message: /must be true or false, not "yes"/,
  },
  {
    what: 'a mapping where a value belongs',
    text: 'tunnels:\n  web:\n    http: 3000\n    subdomain:\n      name: x\n',
    line: 5,
    column: 7,
    key: 'tunnels.web.subdomain',
    message: /must be a subdomain name, not a mapping/,
  },
  {
    what: 'a bad port',
    text: 'tunnels:\n  web:\n    http: 70000\n',
    line: 3,
    column: 11,
    key: 'tunnels.web.http',
    message: /a port is a whole number from 1 to 65535, not 70000/,
  },
  {
    what: 'a bad route target port',
    text: 'tunnels:\n  web:\n    http: 3000\n    routes:\n      /api: 0\n',
    line: 5,
    column: 13,
    key: 'tunnels.web.routes["/api"]',
    message: /a port is a whole number from 1 to 65535, not 0/,
  },
  {
    what: 'a bad subdomain',
    text: 'tunnels:\n  web:\n    http: 3000\n    subdomain: -web-\n',
    line: 4,
    column: 16,
    key: 'tunnels.web.subdomain',
    message: /a subdomain uses a-z, 0-9 and "-" only/,
  },
  {
    what: 'a reserved subdomain',
    text: 'tunnels:\n  web:\n    http: 3000\n    subdomain: admin\n',
    line: 4,
    column: 16,
    key: 'tunnels.web.subdomain',
    message: /"admin" is reserved by the service/,
  },
  {
    what: 'a duplicate tunnel name',
    text: 'tunnels:\n  web:\n    http: 3000\n  api:\n    http: 4000\n  web:\n    http: 5000\n',
    line: 6,
    column: 3,
    key: 'tunnels.web',
    message: /the tunnel name "web" is given twice \(first on line 2\)/,
  },
  {
    what: 'a duplicate tunnel name in JSON',
    text: '{"tunnels": {"web": {"http": 3000},\n "web": {"http": 4000}}}\n',
    line: 2,
    column: 2,
    key: 'tunnels.web',
    message: /the tunnel name "web" is given twice \(first on line 1\)/,
  },
  {
    what: 'two tunnels on one subdomain',
    text: 'tunnels:\n  web:\n    http: 3000\n    subdomain: shop\n  api:\n    http: 4000\n    subdomain: shop\n',
    line: 5,
    column: 3,
    key: 'tunnels.api.subdomain',
    message: /"shop" is also the subdomain of tunnel web \(line 2\)/,
  },
  {
    what: 'a tunnel without its kind',
    text: 'tunnels:\n  web:\n    subdomain: shop\n',
    line: 2,
    column: 3,
    key: 'tunnels.web',
    message: /needs its kind: http: PORT/,
  },
  {
    what: 'a key of another tunnel kind',
    text: 'tunnels:\n  db:\n    tcp: 5432\n    routes: {}\n',
    line: 4,
    column: 5,
    key: 'tunnels.db.routes',
    message: /unknown key: routes is for http tunnels; a tcp tunnel takes tcp, remote_port, proxy_protocol, allow_cidr, deny_cidr/,
  },
  {
    what: "a tcp tunnel's remote_port that is not a port (issue 27)",
    text: 'tunnels:\n  db:\n    tcp: 5432\n    remote_port: 70000\n',
    line: 4,
    column: 18,
    key: 'tunnels.db.remote_port',
    message: /a port is a whole number from 1 to 65535, not 70000/,
  },
  {
    what: 'remote_port on a tls tunnel',
    text: 'tunnels:\n  vault:\n    tls: 8443\n    remote_port: 20042\n',
    line: 4,
    column: 5,
    key: 'tunnels.vault.remote_port',
    message: /remote_port is for tcp tunnels/,
  },
  {
    what: "an http tunnel's policy key on a tcp tunnel",
    text: 'tunnels:\n  db:\n    tcp: 5432\n    basic_auth: { a: b }\n',
    line: 4,
    column: 5,
    key: 'tunnels.db.basic_auth',
    message: /basic_auth is for http tunnels; a tcp tunnel takes tcp, remote_port, proxy_protocol, allow_cidr, deny_cidr/,
  },
  {
    what: "a bad CIDR in a tls tunnel's allow_cidr",
    text: 'tunnels:\n  vault:\n    tls: 8443\n    proxy_protocol: true\n    allow_cidr: [10.0.0.0/8, 300.1.1.1/8]\n',
    line: 5,
    column: 17,
    key: 'tunnels.vault.allow_cidr[1]',
    message: /300\.1\.1\.1/,
  },
  {
    what: 'proxy_protocol that is not a boolean',
    text: 'tunnels:\n  db:\n    tcp: 5432\n    proxy_protocol: v2\n',
    line: 4,
    column: 21,
    key: 'tunnels.db.proxy_protocol',
    message: /true or false/,
  },
  {
    what: 'a literal token that is not one',
    text: 'token: ${BURROW_TOKEN}\ntunnels: {}\n',
    line: 1,
    column: 8,
    key: 'token',
    message: /is not a Burrow token .*write token_env: NAME/,
  },
  {
    what: "a policy value the policy module refuses (burrow http's own check of --allow-cidr)",
    text: 'tunnels:\n  api:\n    http: 8000\n    allow_cidr:\n      - 10.0.0.0/8\n      - 10.0.0.0/33\n',
    line: 5,
    column: 7,
    key: 'tunnels.api.allow_cidr[1]',
    message: /"10\.0\.0\.0\/33": the prefix length must be 0 to 32/,
  },
  {
    what: 'invalid YAML',
    text: 'tunnels:\n  web:\n\thttp: 3000\n',
    line: 3,
    column: 1,
    key: '',
    message: /a tab in the indentation/,
  },
];

for (const { what, text, line, column, key, message } of CASES) {
  test(`config check: ${what} is named by file, line, column and key; exit 1`, async () => {
    const result = await check(text);
    assert.equal(result.code, 1, result.stdout + result.stderr);
    const prefix = `${result.file}:${line}:${column}: ${key === '' ? '' : `${key}: `}`;
    const shown = result.stdout.split('\n').find((row) => row.startsWith(prefix));
    assert.ok(shown !== undefined, `expected a line starting ${prefix} in:\n${result.stdout}`);
    assert.match(shown, message);
    assert.match(result.stderr, new RegExp(`^burrow: ${result.file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} has (a problem|\\d+ problems)\\n$`));
  });
}

test('config check lists every problem of the file at once, in line order', async () => {
  const result = await check('tunnels:\n  a:\n    http: 0\n  b:\n    http: 3000\n    colour: blue\n  c:\n    http: 3000\n    subdomain: X!\n');
  assert.equal(result.code, 1);
  const keys = result.stdout.trim().split('\n').map((row) => /:\d+:\d+: ([^:]+):/.exec(row)?.[1]);
  assert.deepEqual(keys, ['tunnels.a.http', 'tunnels.b.colour', 'tunnels.c.subdomain']);
  assert.match(result.stderr, /has 3 problems/);
});

test('config check --json: the problems with their positions, on stdout; the reason on stderr', async () => {
  const result = await check('tunnels:\n  web:\n    http: nope\n', ['--json']);
  assert.equal(result.code, 1);
  const report = JSON.parse(result.stdout);
  assert.equal(report.valid, false);
  assert.equal(report.file, result.file);
  assert.deepEqual(report.problems.map((problem: { line: number; column: number; key: string }) => [problem.line, problem.column, problem.key]), [[3, 11, 'tunnels.web.http']]);
  assert.equal(JSON.parse(result.stderr).error.code, 'INVALID_REQUEST');
});

test('config check of a missing file names it, exit 1', async () => {
  const dir = freshDir();
  const env = { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '' };
  const missing = join(dir, 'nope.yml');
  const given = await runCli(['config', 'check', '--config', missing], env, 20_000, dir);
  assert.equal(given.code, 1);
  assert.equal(given.stdout, `${missing}: cannot read it: no such file\n`);
  const none = await runCli(['config', 'check'], env, 20_000, dir);
  assert.equal(none.code, 1);
  assert.equal(none.stderr, `burrow: no burrow.yml: looked at ${join(dir, 'burrow.yml')}, ${join(dir, 'xdg', 'burrow', 'burrow.yml')}; "burrow config edit" creates one\n`);
  // A command that reads the file says the same about one --config names.
  const start = await runCli(['start', '--all', '--config', missing], env, 20_000, dir);
  assert.equal(start.code, 1);
  assert.equal(start.stderr, `burrow: ${missing}: cannot read it: no such file (given by --config)\n`);
});

test('a valid file: a summary of its tunnels and settings, exit 0; --json shows no secret', async () => {
  const text = [
    'edge: [http://localhost:8080, "http://127.0.0.1:8081/"]',
    'token_env: MY_BURROW_TOKEN',
    'inspect: 4041',
    'tunnels:',
    '  web:',
    '    http: 3000',
    '    subdomain: Web-App',
    '    host_header: rewrite',
    '    routes:',
    '      /api: 4000',
    '      /static/: { target: "https://localhost:8443", strip_prefix: true }',
    '  hooks:',
    '    http: 127.0.0.1:9000',
    '    basic_auth: { alice: correct-horse }',
    '    request_header_add: { X-Env: dev }',
    '    rate_limit: 100/m',
    '  db:',
    '    tcp: 5432',
    '    remote_port: 20042',
    '    proxy_protocol: true',
    '    allow_cidr: 10.0.0.0/8',
    '',
  ].join('\n');
  const result = await check(text);
  assert.equal(result.code, 0, result.stdout + result.stderr);
  const lines = result.stdout.trim().split('\n');
  assert.equal(lines[0], `${result.file} is valid: 3 tunnels`);
  assert.match(lines[1]!, /^NAME +KIND +TARGET +SUBDOMAIN +ALSO$/);
  assert.match(lines[2]!, /^web +http +http:\/\/localhost:3000 +web-app +\/api -> http:\/\/localhost:4000, \/static -> https:\/\/localhost:8443 \(prefix stripped\), host_header rewrite$/);
  assert.match(lines[3]!, /^hooks +http +http:\/\/127\.0\.0\.1:9000 +- +basic_auth, request_header_add, rate_limit$/);
  assert.match(lines[4]!, /^db +tcp +localhost:5432 +- +remote_port 20042, proxy_protocol, allow_cidr$/);
  assert.equal(lines[5], 'edge http://localhost:8080, http://127.0.0.1:8081; token from $MY_BURROW_TOKEN (not set here); inspector 127.0.0.1:4041');

  const json = await check(text, ['--json']);
  assert.equal(json.code, 0);
  const report = JSON.parse(json.stdout);
  assert.equal(report.valid, true);
  assert.deepEqual(report.settings, { edges: ['http://localhost:8080', 'http://127.0.0.1:8081'], token: null, token_env: 'MY_BURROW_TOKEN', ca: null, inspect: '127.0.0.1:4041', log: null, edges_per_tunnel: null });
  assert.deepEqual(report.tunnels.map((tunnel: { name: string; kind: string }) => `${tunnel.kind} ${tunnel.name}`), ['http web', 'http hooks', 'tcp db']);
  assert.deepEqual(report.tunnels[1].policy, ['basic_auth', 'request_header_add', 'rate_limit']);
  assert.ok(!json.stdout.includes('correct-horse'), 'no secret in the report');
});

test('a literal token in a file others may read is warned about, with the fix; not when it is 0600', async () => {
  const token = `svc_pat_${'0'.repeat(8)}_${'a'.repeat(36)}`;
  const text = `token: ${token}\ntunnels:\n  web:\n    http: 3000\n`;
  const open = withFile(text, 0o644);
  const warned = await runCli(['config', 'check'], open.env, 20_000, open.dir);
  assert.equal(warned.code, 0, warned.stderr);
  assert.ok(
    warned.stdout.includes(`warning: ${open.file}: holds secrets (token) and is readable by everyone on this machine (mode 0644): run "chmod 600 ${open.file}", or take the token from the environment (token_env: NAME)\n`),
    warned.stdout,
  );
  assert.ok(!warned.stdout.includes(token), 'the token itself is never printed');
  // Every command reading the file says it, on stderr (here: burrow start, which then needs a name).
  const start = await runCli(['start', 'nope'], open.env, 20_000, open.dir);
  assert.equal(start.code, 2);
  assert.match(start.stderr, /^burrow: warning: .*holds secrets \(token\) and is readable by everyone/);
  assert.match(start.stderr, /has no tunnel "nope"; it has: web\n$/);
  const group = withFile(text.replace('tunnels:', 'edge: http://localhost:1\ntunnels:'), 0o640);
  const tokens = await runCli(['tokens', 'list'], group.env, 20_000, group.dir);
  assert.match(tokens.stderr, /burrow: warning: .*holds secrets \(token\) and is readable by its group \(mode 0640\)/);

  const closed = withFile(text, 0o600);
  const quiet = await runCli(['config', 'check'], closed.env, 20_000, closed.dir);
  assert.equal(quiet.code, 0);
  assert.ok(!quiet.stdout.includes('warning'), quiet.stdout);
  // A file without secrets may be readable by anyone.
  const shared = withFile('token_env: BURROW_TOKEN\ntunnels:\n  web:\n    http: 3000\n', 0o644);
  const fine = await runCli(['config', 'check'], shared.env, 20_000, shared.dir);
  assert.ok(!fine.stdout.includes('warning'), fine.stdout);
});
