/**
 * Issue 11, "one account can crash the whole edge": rogue tenants answer public requests with random,
 * valid-looking frame sequences (bodies past their declared length, 1xx and 101 statuses, header names
 * that are not tokens, DATA after the end, RESETs at random points, odd WINDOWs, WebSocket frames on HTTP
 * streams, unknown stream ids, GOAWAYs) against a live edge process, while another tenant's tunnel (the
 * real client in front of a real local server) is asked to answer all along. The edge may end a rogue's
 * tunnel, and must: it may never exit, and the other tunnel must keep answering.
 *
 * A bounded run; `npm run fuzz` plays 100,000 sequences or more. A failure prints each distinct crash
 * with the seed of the sequence that caused it and a minimal sequence that still does; FUZZ_SEED=N plays
 * the same sequences again (their interleaving across the rogue lanes may differ).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatResult, runProtocolFuzz } from '../fuzz/protocol-fuzzer.js';
import { generateSequence, sequenceSeed } from '../fuzz/sequences.js';

const SEQUENCES = 3_000;

test("a rogue tenant's random frame sequences never stop the edge, and another tenant's tunnel keeps answering", async (t) => {
  const seed = process.env.FUZZ_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED);
  t.diagnostic(`seed ${seed}: FUZZ_SEED=${seed} plays the same sequences again`);
  const result = await runProtocolFuzz({
    count: SEQUENCES,
    timeLimitMs: 25_000,
    lanes: 2,
    seed,
    // A broken edge tends to die again and again the same way: a few exits tell enough.
    maxExits: 3,
    minimizeMs: 30_000,
    progressEveryMs: 0,
    log: (line) => {
      for (const part of line.split('\n')) t.diagnostic(part);
    },
  });
  const report = formatResult(result);
  for (const line of report.split('\n')) t.diagnostic(line);
  assert.equal(result.fatal, null, report);
  assert.ok(result.sequences > 0, `no sequence reached the rogue tunnel:\n${report}`);
  assert.ok(result.healthChecks > 0, 'the healthy tunnel was never asked');
  assert.equal(result.edgeExits, 0, `the edge exited:\n${report}`);
  assert.deepEqual(result.healthyFailures, [], `the healthy tunnel stopped answering:\n${report}`);
});

test('a sequence is a pure function of its seed, and its printed JSON is the same sequence (what makes a crash replayable)', () => {
  for (let index = 0; index < 200; index++) {
    const seed = sequenceSeed(20_261_124, index);
    const sequence = generateSequence(seed);
    assert.deepEqual(generateSequence(seed), sequence);
    assert.deepEqual(JSON.parse(JSON.stringify(sequence)), sequence);
  }
});
