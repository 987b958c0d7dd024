/**
 * bench/e2e/floor-profile.ts and bench/e2e/proc-counters.ts, behind `npm run bench`'s profile phase (issue
 * 25): a CPU profile's self time lands in the right category and only inside the run's window, the
 * per-process counters read this process, and scripts/bench-results.mjs renders the "Floor profile"
 * section from a results file that has it and says "not measured" for one that does not.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bucketProfile, FLOOR_SCENARIOS, QUICK_FLOOR_SCENARIOS, summarizeFloorProfile, type FloorProfileRecord } from '../../bench/e2e/floor-profile.js';
import { contextSwitches, countSyscalls, perfProblem, ticksOf } from '../../bench/e2e/proc-counters.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DIST = 'file:///work/burrow/dist/src';

/** A profile of nodes (id → function, script, parent) and samples at 1 ms apart starting at t = 1,000,000 µs. */
function profileOf(nodes: Array<[number, string, string, number | null]>, samples: number[]) {
  return {
    nodes: nodes.map(([id, functionName, url]) => ({
      id,
      callFrame: { functionName, url, lineNumber: 0 },
      children: nodes.filter((n) => n[3] === id).map((n) => n[0]),
    })),
    startTime: 1_000_000,
    endTime: 1_000_000 + samples.length * 1000,
    samples,
    timeDeltas: samples.map(() => 1000),
  };
}

test('self time goes to its category: natives count where their caller does, socket writes apart from log writes', () => {
  const profile = profileOf(
    [
      [1, '(root)', '', null],
      [2, '(idle)', '', 1],
      [3, 'flushFrames', `${DIST}/edge/connection.js`, 1],
      [4, 'writeBuffer', '', 3],
      [5, 'writeSync', 'node:fs', 1],
      [6, 'writeBuffer', '', 5],
      [7, 'finishTxn', 'file:///work/burrow/node_modules/lmdb/write.js', 1],
      [8, 'commit', '', 7],
      [9, '(garbage collector)', '', 1],
      [10, 'wellFormed', `${DIST}/client/local-hop/request-head.js`, 1],
      [11, 'execute', `${DIST}/http1/parser.js`, 1],
    ],
    [2, 3, 4, 4, 6, 8, 9, 10, 11, 2, 2],
  );
  const { samples, byCategory, byFunction } = bucketProfile(profile, 0, Number.MAX_SAFE_INTEGER);
  assert.equal(samples, 11);
  assert.deepEqual(Object.fromEntries(byCategory), {
    'other Burrow JS (src/edge)': 1000,
    'socket writes': 2000,
    'file writes (logs, capture journal and blocks)': 1000,
    'LMDB / capture store': 1000,
    GC: 1000,
    'other Burrow JS (src/client)': 1000,
    // The last sample stands for no time: nothing follows it.
    'HTTP parsing': 1000,
  });
  assert.equal(byFunction.get('writeBuffer\n(native)')?.us, 3000);
  assert.equal(byFunction.get('flushFrames\ndist/src/edge/connection.js:1')?.category, 'other Burrow JS (src/edge)');
});

test('only the samples inside the window count', () => {
  const profile = profileOf(
    [
      [1, '(root)', '', null],
      [2, 'warmUp', `${DIST}/edge/a.js`, 1],
      [3, 'measured', `${DIST}/store/b.js`, 1],
    ],
    [2, 2, 3, 3, 3, 2, 2],
  );
  // Samples at 1,001,000 .. 1,007,000 µs; the run is the 3rd to the 5th.
  const { samples, byCategory } = bucketProfile(profile, 1_003_000, 1_005_000);
  assert.equal(samples, 3);
  assert.deepEqual(Object.fromEntries(byCategory), { 'LMDB / capture store': 3000 });
});

test('the counters read this process: ticks, context switches over its threads, syscalls when perf may count them', async (t) => {
  // The main thread first: the process's ticks, read after, include them (read the other way round, the
  // main thread could tick in between and seem to exceed the whole).
  const main = ticksOf(process.pid, process.pid);
  const all = ticksOf(process.pid);
  assert.ok(all.user >= main.user && all.system >= main.system);
  const switches = contextSwitches(process.pid);
  assert.ok(switches.voluntary > 0);
  const problem = perfProblem();
  if (problem !== null) {
    t.skip(problem);
    return;
  }
  const stop = countSyscalls(process.pid);
  await new Promise((done) => setTimeout(done, 500));
  const dir = mkdtempSync(join(tmpdir(), 'burrow-floor-'));
  try {
    for (let i = 0; i < 50; i++) writeFileSync(join(dir, 'f'), 'x');
    await new Promise((done) => setTimeout(done, 200));
    const counts = await stop();
    assert.ok((counts.get('write') ?? 0) >= 50, `write: ${counts.get('write')}`);
    assert.ok((counts.get('(all)') ?? 0) >= (counts.get('write') ?? 0));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

function results(floorProfile: FloorProfileRecord | null): Record<string, unknown> {
  return {
    kind: 'burrow-e2e-bench',
    version: 2,
    startedAt: '2026-11-27T21:00:00.000Z',
    finishedAt: '2026-11-27T21:01:00.000Z',
    phasesS: { profile: 60 },
    machine: { cpuModel: 'test', cores: 2, ramBytes: 2 ** 31, os: 'linux', node: 'v20' },
    source: { commit: 'abc', dirtyFiles: [] },
    options: { durationS: 1, repeat: 1, probeRounds: 1, probeRequests: 0, tenants: 0, idleTunnels: 0, maxOtherCpuPct: 25, retries: 1, quick: true },
    paths: [
      { id: 'direct', kind: 'direct', label: 'direct', processes: [] },
      { id: 'cap-insp', kind: 'tunnel', label: 'tunnel, capture on, inspector on', processes: ['edge', 'client'], capture: true, inspect: true },
      { id: 'ssh', kind: 'floor', label: 'ssh -R', processes: ['sshd', 'ssh'] },
    ],
    summary: { groups: [], probes: [], floorProfile: summarizeFloorProfile(floorProfile) },
    runs: [],
    warmups: [],
    probes: [],
    processes: {},
    floorProfile,
  };
}

const process_ = (role: string, cpuUs: number, syscalls: number) => ({ role, name: role, pid: 1, userUs: cpuUs - 5, sysUs: 5, cpuUs, mainThreadUs: cpuUs - 1, voluntarySwitches: 0.1, involuntarySwitches: 0.05, syscalls: { '(all)': syscalls, write: 1.5, read: 1 }, reads: 1, writes: 1.5 });

test("the profile covers every body size of issue 25's targets, both directions, at the matrix's connections; --quick the 1 KiB pair", () => {
  const names = (list: typeof FLOOR_SCENARIOS): string[] => list.map(({ scenario, connections }) => `${scenario.method} ${scenario.size} ${scenario.shape} @${connections}`);
  assert.deepEqual(names(FLOOR_SCENARIOS), ['POST 1024 length @100', 'GET 1024 length @100', 'POST 65536 length @100', 'GET 65536 length @100', 'POST 1048576 length @10', 'GET 1048576 length @10']);
  assert.deepEqual(names(QUICK_FLOOR_SCENARIOS), ['POST 1024 length @100', 'GET 1024 length @100']);
});

test('RESULTS.md has the floor profile when the run measured it, and says "not measured" when not', () => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-floor-'));
  try {
    const renderAll = (record: FloorProfileRecord | null): string => {
      const file = join(dir, 'e2e-test.json');
      writeFileSync(file, JSON.stringify(results(record)));
      const out = join(dir, 'RESULTS.md');
      const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'bench-results.mjs'), file, '--out', out], { encoding: 'utf8' });
      assert.equal(run.status, 0, run.stderr);
      return readFileSync(out, 'utf8');
    };
    const render = (record: FloorProfileRecord | null): string => {
      const text = renderAll(record);
      return text.slice(text.indexOf('## Floor profile'), text.indexOf('## Every run'));
    };
    assert.match(render(null), /Not measured/);
    const scenario = 'POST 1 KiB up, length @100';
    const big = 'GET 1 MiB down, length @10';
    const edgeProfile = (name: string, socketWrites: number) => ({
      scenario: name,
      role: 'edge' as const,
      reqPerSec: 7000,
      requests: 28000,
      samples: 3000,
      sampledUs: 60,
      profiledCpuUs: 55,
      profiledMainThreadUs: 45,
      unprofiledCpuUs: 50,
      unprofiledReqPerSec: 8000,
      inflation: 1.1,
      categories: [{ category: 'socket writes', us: socketWrites }, { category: 'LMDB / capture store', us: 8 }],
      top: [{ functionName: 'writeBuffer', where: '(native)', category: 'socket writes', us: 11 }],
    });
    const record: FloorProfileRecord = {
      scenarios: [scenario, big],
      durationS: 4,
      syscallDurationS: 2,
      perfSkipped: null,
      paths: [
        { scenario, path: 'cap-insp', label: 'tunnel, capture on, inspector on', kind: 'tunnel', reqPerSec: 8000, requests: 32000, syscallRequests: 16000, bad: 0, processes: [process_('edge', 50, 3), process_('client', 40, 2.5)], error: null },
        { scenario, path: 'ssh', label: 'ssh -R', kind: 'floor', reqPerSec: 14000, requests: 56000, syscallRequests: 28000, bad: 0, processes: [process_('sshd', 12, 4.5), process_('ssh', 10, 3.5)], error: null },
      ],
      profiles: [edgeProfile(scenario, 12), edgeProfile(big, 1500)],
      profileError: null,
      profiledBad: 0,
    };
    const section = render(record);
    // The tunnel against the floor: 90 µs and 5.5 syscalls against 22 µs and 8 syscalls.
    assert.match(section, /the tunnel's processes spend \*\*90\.0 µs\*\*.*\*\*5\.5 syscalls\*\*/);
    assert.match(section, /ssh -R: 22\.0 µs \(4\.1×\), 8\.0 syscalls/);
    assert.match(section, /\| POST 1 KiB up, length @100 \| ssh -R \| sshd \| 14,000 \| 7\.0 \| 5\.0 \| \*\*12\.0\*\* \|/);
    // One table of categories per body size, each headed by its size.
    assert.match(section, /\| µs per request, 1 KiB @100 \| edge, POST \|\n[^\n]*\n\| socket writes \| 12\.0 \|/);
    assert.match(section, /\| µs per request, 1 MiB @10 \| edge, GET \|\n[^\n]*\n\| socket writes \| 1,500\.0 \|/);
    assert.match(section, /\| inflation by the profiler \| 1\.10× \|/);
    assert.match(section, /\| `writeBuffer` \| \(native\) \| socket writes \| 11\.00 \|/);

    // The profile's answers count toward "zero errors anywhere": its runs, warm-ups and the profiled pair.
    const zeroErrors = (text: string): string => text.split('\n').find((line) => line.startsWith('| zero errors'))!;
    assert.match(zeroErrors(renderAll(record)), /0 in 0 runs, 0 probes, 2 floor-profile runs \| \*\*PASS\*\*/);
    const withBad = { ...record, paths: record.paths.map((p, i) => (i === 0 ? { ...p, bad: 3 } : p)), profiledBad: 2 };
    assert.match(zeroErrors(renderAll(withBad)), /floor-profile errors\/timeouts\/non-2xx\/wrong bodies 5 \| \*\*FAIL\*\*/);
    const failed = { ...record, paths: record.paths.map((p, i) => (i === 1 ? { ...p, error: 'ssh -R went away' } : p)) };
    assert.match(zeroErrors(renderAll(failed)), /floor-profile runs that failed 1 \| \*\*FAIL\*\*/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('RESULTS.md says whether every capture was written and whether the rings lapped before the rows', () => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-quota-line-'));
  try {
    const quotaLine = (extra: Record<string, unknown>): string => {
      const file = join(dir, 'e2e-test.json');
      writeFileSync(file, JSON.stringify({ ...results(null), ...extra }));
      const out = join(dir, 'RESULTS.md');
      const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'bench-results.mjs'), file, '--out', out], { encoding: 'utf8' });
      assert.equal(run.status, 0, run.stderr);
      return readFileSync(out, 'utf8').split('\n').find((line) => line.startsWith('- Capture quota:'))!;
    };
    const fill = { path: 'cap-insp', method: 'POST', connections: 10, load: { requests: 1100 } };
    const warm = { path: 'cap-insp', method: 'POST', connections: 100, load: { requests: 9000 } };
    // A run from before --plans: the defaults, and what that meant.
    assert.match(quotaLine({}), /the plans' defaults .* mostly skipped captures/);
    const raised = quotaLine({ captureQuota: { raisedTo: '64GiB', atDefault: [] }, warmups: [warm, fill] });
    assert.match(raised, /capture quota of 64GiB for both plans, beyond what its rings hold, so every exchange was captured\./);
    assert.match(raised, /each capturing tunnel's ring lapped once \(cap-insp 1,100 uploads of 1 MiB\)/);
    assert.doesNotMatch(raised, /lapped twice more/);
    // A file with the warm-ups marked: the fill and the settling lap by their mark, whatever their connections.
    const markedFill = { ...fill, purpose: 'ring-fill' };
    const settle = { path: 'cap-insp', method: 'POST', connections: 100, purpose: 'ring-settle', load: { requests: 2200 } };
    const settled = quotaLine({ captureQuota: { raisedTo: '64GiB', atDefault: [] }, warmups: [warm, markedFill, settle] });
    assert.match(settled, /each capturing tunnel's ring lapped once \(cap-insp 1,100 uploads of 1 MiB\), .* Then each lapped twice more with small POSTs \(cap-insp 2,200 of 1 KiB\)/);
    // Marked, a warm-up at 10 connections is no ring fill unless it says so.
    const unmarked = quotaLine({ captureQuota: { raisedTo: '64GiB', atDefault: [] }, warmups: [warm, settle, { ...fill, connections: 10 }] });
    assert.match(unmarked, /rings had not lapped before the rows/);
    const older = quotaLine({ captureQuota: { raisedTo: '64GiB', atDefault: ['edge-baseline'] }, warmups: [warm] });
    assert.match(older, /except `edge-baseline` \(a build without `--plans`\)/);
    assert.match(older, /rings had not lapped before the rows/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
