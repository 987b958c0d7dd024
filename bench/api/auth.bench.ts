/**
 * Micro-benchmark of token authentication (tinybench): Store.authenticate on real LMDB in a temp dir,
 * for a valid token, a wrong secret (right id segment), an unknown id segment and a malformed value, plus
 * the whole Authorization check the API runs per request (Api.authorize).
 *
 * Run: npx tsc -p . && node dist/bench/api/auth.bench.js [--time MS]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { Api } from '../../src/api/api.js';
import { CaptureStore } from '../../src/store/captures.js';
import { Store } from '../../src/store/store.js';
import { UsageMeter } from '../../src/store/usage.js';
import { printBenchTable } from '../micro-table.js';

const { values } = parseArgs({ options: { time: { type: 'string', default: '1000' } } });
const time = Number(values.time);

const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-auth-'));
const store = Store.open(dir);
try {
  // A few accounts with several tokens each, so the lookup is not in an empty database.
  let token = '';
  for (let i = 0; i < 50; i++) {
    const created = await store.createAccount(`bench${i}@example.test`, 'PRO', 'bench');
    for (let j = 0; j < 4; j++) await store.createToken(created.account, `extra ${j}`);
    token = created.token.token;
  }
  const wrongSecret = `${token.slice(0, 17)}${'0'.repeat(36)}`;
  const unknownId = `svc_pat_ffffffff_${token.slice(17)}`;
  const malformed = 'svc_pat_not-a-token';

  const unused = {} as never;
  const api = new Api({
    store,
    heldEvents: store.queue,
    captures: new CaptureStore(store.root),
    usage: new UsageMeter(store.root),
    tunnels: unused,
    instance: { build: 'bench', region: 'bench' },
    // Far above what the benchmark sends: it measures the check, not the limiter refusing.
    authFailureLimit: Number.MAX_SAFE_INTEGER,
  });

  const bench = new Bench({ time, warmupTime: Math.min(250, time) });
  let sink = 0;
  const cases: [name: string, value: string, valid: boolean][] = [
    ['valid token', token, true],
    ['wrong secret', wrongSecret, false],
    ['unknown id segment', unknownId, false],
    ['malformed', malformed, false],
  ];
  for (const [name, value, valid] of cases) {
    if ((store.authenticate(value) !== null) !== valid) throw new Error(`${name}: authenticate disagrees`);
    bench.add(`Store.authenticate ${name}`, () => {
      sink += store.authenticate(value) === null ? 1 : 2;
    });
  }
  bench.add('Api.authorize "Bearer <valid token>"', () => {
    sink += api.authorize(`Bearer ${token}`, '127.0.0.1') instanceof Error ? 1 : 2;
  });
  await bench.run();

  printBenchTable('token authentication', bench, `${time} ms per task; LMDB in ${dir}; 50 accounts x 5 tokens`);
  if (sink === 0) console.log('(nothing was measured)');
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
