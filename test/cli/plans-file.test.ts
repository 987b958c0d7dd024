/**
 * `burrow edge --plans FILE` (docs/deploy.md, "Plans and quotas"): the file's limits reach the edge's
 * store (a real `burrow edge` subprocess, a real client), a bad file stops the edge at start naming every
 * problem by line and column, and the parser's rules one by one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { RouteTable } from '../../src/client/routes.js';
import { parsePlansText, PLAN_LIMIT_KEYS } from '../../src/cli/plans-file.js';
import { DEFAULT_PLANS } from '../../src/store/plans.js';
import { runCli, spawnCli, startLocal, tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-plans-file-');
const LISTENING = /listening on http:\/\/localhost:(\d+)/;

test('a file of limits: each key sets its field, sizes take units, and what it leaves out is not there (the defaults stay)', () => {
  const text = ['PRO:', '  capture_bytes: 16GiB', '  active_tunnels: 100', '  retention_ms: 3600000', 'FREE:', '  captured_requests: 500', '  queued_bytes: 512MiB', '  account_queued_bytes: 1073741824', ''].join('\n');
  const { plans, problems } = parsePlansText(text, 'plans.yml');
  assert.deepEqual(problems, []);
  assert.deepEqual(plans, {
    PRO: { captureBytes: 16 * 1024 ** 3, activeTunnels: 100, retentionMs: 3_600_000 },
    FREE: { capturedRequests: 500, queuedBytes: 512 * 1024 ** 2, accountQueuedBytes: 1024 ** 3 },
  });
  // JSON is YAML 1.2.
  assert.deepEqual(parsePlansText('{"FREE": {"active_tokens": 9}}', 'plans.json').plans, { FREE: { activeTokens: 9 } });
  // Every limit a plan has can be set from the file, and nothing else.
  const all = PLAN_LIMIT_KEYS.map((key) => `  ${key}: 7`).join('\n');
  const every = parsePlansText(`PRO:\n${all}\n`, 'plans.yml');
  assert.deepEqual(every.problems, []);
  assert.deepEqual(Object.keys(every.plans.PRO!).sort(), Object.keys(DEFAULT_PLANS.PRO).sort());
});

test('every problem of the file at once, each with its line, column and key', () => {
  const text = [
    'GOLD:', // 1: not a plan
    '  active_tunnels: 5',
    'PRO:',
    '  active_tunels: 5', // 4: not a limit
    '  capture_bytes: lots', // 5: not a size
    '  active_tokens: 0', // 6: below 1
    '  captured_requests: 200000', // 7: above the ring's ceiling
    '  retention_ms: 1.5', // 8: not whole
    'FREE: 3', // 9: not a map
    '',
  ].join('\n');
  const { problems } = parsePlansText(text, 'plans.yml');
  assert.deepEqual(
    problems.map((problem) => [problem.line, problem.column, problem.key]),
    [
      [1, 1, 'GOLD'],
      [4, 3, 'PRO.active_tunels'],
      [5, 18, 'PRO.capture_bytes'],
      [6, 18, 'PRO.active_tokens'],
      [7, 22, 'PRO.captured_requests'],
      [8, 17, 'PRO.retention_ms'],
      [9, 7, 'FREE'],
    ],
  );
  assert.match(problems[0]!.message, /not a plan: the plans are FREE and PRO/);
  assert.match(problems[1]!.message, /not a plan limit: the limits are active_tokens, active_tunnels, /);
  assert.match(problems[2]!.message, /must be bytes: a whole number or a size such as 512MiB or 8GiB, not "lots"/);
  assert.match(problems[3]!.message, /must be 1 to 1,000,000, not 0/);
  assert.match(problems[4]!.message, /must be 1 to 100,000, not 200000/);
  assert.match(problems[5]!.message, /must be milliseconds: a whole number, not 1.5/);
  assert.match(problems[6]!.message, /a map of limits/);
  // Not YAML, a plan named twice, a file that is not a map.
  assert.match(parsePlansText('PRO: [\n', 'p.yml').problems[0]!.message, /^not valid YAML: /);
  assert.match(parsePlansText('PRO: {}\nPRO: {}\n', 'p.yml').problems[0]!.message, /^not valid YAML: .*unique/i);
  assert.match(parsePlansText('- PRO\n', 'p.yml').problems[0]!.message, /a map of plans \(FREE, PRO\)/);
});

test('burrow edge --plans: the edge admits by the file (FREE capped at 1 tunnel); a bad file stops it at start with file:line:column', async () => {
  const dir = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const bad = join(dir, 'bad.yml');
  writeFileSync(bad, 'FREE:\n  active_tunnels: none\n');
  const refused = await runCli(['edge', '--port', '0', '--data', join(dir, 'refused'), '--plans', bad], env);
  assert.equal(refused.code, 1);
  assert.equal(refused.stderr, `burrow: ${bad}:2:19: FREE.active_tunnels: must be a whole number, not "none"\n`);
  writeFileSync(bad, 'FREE:\n  active_tunnels: none\n  retention: 5\n');
  const both = await runCli(['edge', '--port', '0', '--data', join(dir, 'refused'), '--plans', bad], env);
  assert.equal(both.code, 1);
  assert.match(both.stderr, new RegExp(`^burrow: ${bad}:2:19: FREE\\.active_tunnels: must be a whole number, not "none"\n${bad}:3:3: FREE\\.retention: not a plan limit: `));
  const missing = await runCli(['edge', '--port', '0', '--data', join(dir, 'refused'), '--plans', join(dir, 'nowhere.yml')], env);
  assert.equal(missing.code, 1);
  assert.equal(missing.stderr, `burrow: --plans: cannot read ${join(dir, 'nowhere.yml')}: ENOENT\n`);

  const plans = join(dir, 'plans.yml');
  writeFileSync(plans, 'FREE:\n  active_tunnels: 1\n');
  const data = join(dir, 'data');
  const created = await runCli(['admin', 'create-account', '--email', 'capped@plans.test', '--data', data, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const token = (JSON.parse(created.stdout) as { token: { token: string } }).token.token;
  const edge = await spawnCli(['edge', '--port', '0', '--data', data, '--plans', plans], env, LISTENING);
  const port = Number(LISTENING.exec(edge.output())![1]);
  const local = await startLocal((_request, response) => response.end('ok'));
  const connect = (): TunnelClient => new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port, []), minBackoffMs: 50, maxBackoffMs: 200 });
  const first = connect();
  const second = connect();
  try {
    await first.start();
    // The default FREE plan takes 3; the file says 1.
    await assert.rejects(second.start(), (error: Error & { code?: string; status?: number }) => {
      assert.equal(error.code, 'TUNNEL_LIMIT_REACHED');
      assert.equal(error.status, 403);
      return true;
    });
  } finally {
    await second.close();
    await first.close();
    await local.close();
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
  }
});
