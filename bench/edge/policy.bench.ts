/**
 * Micro-benchmark of a tunnel policy's per-request decision (tinybench; src/edge/policy/decide.ts): no
 * policy (the listener's null check), basic auth with the value cached, CIDR allow/deny, header rules,
 * and a GitHub webhook HMAC on a 1 KiB body. No I/O: the cost the listener adds per request.
 *
 * Run: npx tsc -p . && node dist/bench/edge/policy.bench.js [--time MS]
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { CompiledPolicy, type PolicyDecision, type PolicyRequest } from '../../src/edge/policy/decide.js';
import { parsePolicySpec } from '../../src/protocol/policy.js';
import { SecretBox } from '../../src/store/secret-box.js';
import { storePolicy } from '../../src/store/stored-policy.js';
import { printBenchTable } from '../micro-table.js';

const { values } = parseArgs({ options: { time: { type: 'string', default: '1000' } } });
const time = Number(values.time);
const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-policy-'));
try {
  const box = SecretBox.open(join(dir, 'secret.key'));
  const compile = async (spec: unknown): Promise<CompiledPolicy> =>
    CompiledPolicy.compile((await storePolicy(parsePolicySpec(spec), undefined, box))!, box, { realm: 'bench' }) as CompiledPolicy;
  const fields = ['Host', 'bench.burrow.test', 'User-Agent', 'curl/8.5.0', 'Accept', '*/*', 'Content-Type', 'application/json', 'X-Request-Id', 'abc123'];
  const request = (extra: string[] = []): PolicyRequest => ({ method: 'POST', target: '/hook', fields: [...fields, ...extra], clientAddress: '203.0.113.9', scheme: 'https', host: 'bench.burrow.test' });

  const basic = await compile({ basic_auth: [{ user: 'ann', password: 's3cret' }] });
  const authorized = request(['Authorization', `Basic ${Buffer.from('ann:s3cret').toString('base64')}`]);
  await basic.decide(authorized); // the one scrypt; every later call is the cache
  const cidr = await compile({ allow_cidr: ['10.0.0.0/8', '203.0.113.0/24', '2001:db8::/32'], deny_cidr: ['203.0.113.66/32'] });
  const headers = await compile({ request_header_add: [{ name: 'X-Tenant', value: 'blue' }], request_header_remove: ['X-Debug'], response_header_add: [{ name: 'X-Frame-Options', value: 'DENY' }], response_header_remove: ['Server'] });
  const webhook = await compile({ verify_webhook: [{ provider: 'github', secret: 'gh-bench-secret' }] });
  const body = Buffer.alloc(1024, 'a');
  const signed = request(['X-Hub-Signature-256', `sha256=${createHmac('sha256', 'gh-bench-secret').update(body).digest('hex')}`]);
  const plain = request();
  const none: CompiledPolicy | null = null as CompiledPolicy | null;
  const responseHead = ['Content-Type', 'text/plain', 'Server', 'local', 'Content-Length', '2'];
  let sink: unknown;

  const bench = new Bench({ time });
  bench
    .add('no policy', () => {
      sink = none === null ? plain.fields : none.decide(plain);
    })
    .add('basic auth (cached)', () => {
      sink = basic.decide(authorized);
    })
    .add('CIDR allow/deny', () => {
      sink = cidr.decide(plain);
    })
    .add('header rules (request + response)', () => {
      sink = headers.decide(plain);
      sink = headers.responseFields(responseHead);
    })
    .add('webhook HMAC, 1 KiB body', () => {
      const decision = webhook.decide(signed) as PolicyDecision & { kind: 'need-body' };
      sink = decision.verify(body);
    });
  await bench.run();
  if (sink === undefined) throw new Error('unreachable');
  printBenchTable('tunnel policy decision per request', bench, 'no I/O; basic auth after its one scrypt');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
