/**
 * An open-loop load generator: requests leave at a fixed rate whatever the answers do, and each one's
 * latency is charged from the moment it was SCHEDULED, not from when it was sent (the correction for
 * coordinated omission: a request held back because the generator or a connection was busy still pays
 * its wait).
 *
 * Why not autocannon's `overallRate` (9.0.0): it is a per-second quota, not a pace. Each connection gets
 * `rate / connections` (lib/run.js, `url.rate = distributeNums(opts.overallRate, i)`), sends closed-loop as
 * fast as answers come back until `reqsMadeThisSecond++ < this.rate` fails (lib/httpClient.js,
 * `_doRequest`), then sets `paused` and idles until a 1 s `setInterval` resets the counter. So each second's
 * requests leave in a burst at the start of the second and nothing is sent for the rest of it. Its
 * "correction" (`recordValueWithExpectedInterval(responseTime, Math.ceil(1 / rate))`, lib/run.js) uses an
 * expected interval of 1 ms whatever the rate, and the response time it corrects is measured from when the
 * request was written, so a request that could not be sent on time is never charged its wait.
 *
 * Here: an undici Pool with more connections than the rate ever needs at once, request i scheduled at
 * start + i / rate (`process.hrtime.bigint()`), dispatched from a 1 ms timer and from every completion
 * (whichever comes first after its time: no busy loop on the shared cores), latency = completion −
 * schedule. How late dispatch ran is reported (p50/p99/max); a run whose completed rate stayed under 97 %
 * of the offered one is marked invalid rather than reported as if the rate had been held.
 */
import { Pool } from 'undici';
import { expectedAnswer, payload, scenarioPath, type Scenario } from './payloads.js';
import { percentileSorted } from './stats.js';
import type { Target } from './load.js';

export interface OpenLoopPlan {
  /** Offered requests per second. */
  rate: number;
  durationS: number;
  /** Seconds at the same rate before the measured window; not recorded. */
  warmupS: number;
  /** Connections of the sender's pool: enough that the offered rate never waits for a free one. */
  connections: number;
  scenario: Scenario;
  /** Per request, after its scheduled time. */
  timeoutMs?: number;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

export interface OpenLoopResult {
  offeredRate: number;
  /** Completed (measured) requests ÷ the time from the window's start to the later of its end and the last answer. */
  achievedRate: number;
  /** Requests scheduled in the measured window. */
  scheduled: number;
  completed: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  /** Completion − scheduled time, µs (corrected for coordinated omission). */
  latencyUs: Percentiles;
  /** Completion − actual dispatch, µs (what a closed-loop tool would report). */
  serviceUs: Percentiles;
  /** Actual dispatch − scheduled time, µs. */
  dispatchLagUs: Percentiles;
  /** Largest number of requests in flight at once. */
  peakInFlight: number;
  valid: boolean;
  invalidReason: string | null;
}

/** Offsets of request i from the start, ns, for a constant rate. */
export function scheduleOffsetNs(index: number, rate: number): number {
  return Math.round((index * 1e9) / rate);
}

/**
 * Latency charged from the schedule, µs: for each request, completion − scheduled time (both ns on the
 * same clock). A request that completed NaN (never) is left out. Pure, for the unit test.
 */
export function chargedLatenciesUs(scheduledNs: ArrayLike<number>, completedNs: ArrayLike<number>): Float64Array {
  const out: number[] = [];
  for (let i = 0; i < scheduledNs.length; i++) {
    const done = completedNs[i]!;
    if (Number.isFinite(done)) out.push((done - scheduledNs[i]!) / 1000);
  }
  return Float64Array.from(out);
}

/** p50/p90/p99/p99.9/max/mean of a set of values (nearest rank; NaN when empty). */
export function percentiles(values: Float64Array): Percentiles {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i]!;
  const pick = (q: number): number => Math.round(percentileSorted(sorted, q) * 10) / 10;
  return {
    p50: pick(0.5),
    p90: pick(0.9),
    p99: pick(0.99),
    p999: pick(0.999),
    max: sorted.length === 0 ? Number.NaN : Math.round(sorted[sorted.length - 1]! * 10) / 10,
    mean: sorted.length === 0 ? Number.NaN : Math.round((sum / sorted.length) * 10) / 10,
  };
}

/** Achieved below this share of the offered rate: the run did not hold the rate and is invalid. */
export const MIN_ACHIEVED_SHARE = 0.97;

/**
 * Whether a run held its rate: the completed rate and how it compares. `windowEndNs`: the measured
 * window's planned end; `lastDoneNs`: the last answer of a measured request.
 */
export function achieved(completed: number, windowStartNs: number, windowEndNs: number, lastDoneNs: number, offeredRate: number): { rate: number; valid: boolean; reason: string | null } {
  const seconds = (Math.max(windowEndNs, lastDoneNs) - windowStartNs) / 1e9;
  const rate = seconds > 0 ? completed / seconds : 0;
  const valid = rate >= MIN_ACHIEVED_SHARE * offeredRate;
  return { rate, valid, reason: valid ? null : `achieved ${Math.round(rate)} req/s, under ${MIN_ACHIEVED_SHARE * 100}% of the offered ${Math.round(offeredRate)}` };
}

let stopRequested = false;
/** Ends the open-loop run in progress early (SIGINT of the runner). */
export function stopOpenLoop(): void {
  stopRequested = true;
}

/** One open-loop run against a target: warm-up then the measured window, at one constant rate. */
export async function runOpenLoop(target: Target, plan: OpenLoopPlan): Promise<OpenLoopResult> {
  stopRequested = false;
  const s = plan.scenario;
  const headers: Record<string, string> = {};
  if (target.host !== null) headers.host = target.host;
  if (s.method === 'POST') headers['content-type'] = 'application/json';
  const body = s.method === 'POST' ? payload(s.size) : undefined;
  const expected = expectedAnswer(s);
  const path = scenarioPath(s);
  const timeoutMs = plan.timeoutMs ?? 10_000;
  const pool = new Pool(target.origin, { connections: plan.connections, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, ...(target.origin.startsWith('https:') ? { connect: { rejectUnauthorized: false } } : {}) });

  const warmup = Math.round(plan.warmupS * plan.rate);
  const measured = Math.round(plan.durationS * plan.rate);
  const total = warmup + measured;
  const scheduled = new Float64Array(measured);
  const dispatched = new Float64Array(measured);
  const completed = new Float64Array(measured).fill(Number.NaN);
  let errors = 0;
  let timeouts = 0;
  let non2xx = 0;
  let mismatches = 0;
  let next = 0;
  let outstanding = 0;
  let inFlight = 0;
  let peakInFlight = 0;
  let lastDone = 0;
  const start = process.hrtime.bigint();
  const now = (): number => Number(process.hrtime.bigint() - start);
  const windowStart = scheduleOffsetNs(warmup, plan.rate);
  const windowEnd = scheduleOffsetNs(total, plan.rate);

  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let timer: NodeJS.Timeout | null = null;

  const send = (index: number, at: number): void => {
    const k = index - warmup;
    if (k >= 0) {
      scheduled[k] = scheduleOffsetNs(index, plan.rate);
      dispatched[k] = at;
    }
    outstanding++;
    inFlight++;
    if (inFlight > peakInFlight) peakInFlight = inFlight;
    pool
      .request({ path, method: s.method, headers, ...(body === undefined ? {} : { body }) })
      .then(async (response) => {
        const text = await response.body.text();
        const done = now();
        if (k >= 0) {
          completed[k] = done;
          if (done > lastDone) lastDone = done;
          if (response.statusCode < 200 || response.statusCode > 299) non2xx++;
          else if (text !== expected) mismatches++;
        }
      })
      .catch((error: Error & { code?: string }) => {
        if (k < 0) return;
        if (error.code === 'UND_ERR_HEADERS_TIMEOUT' || error.code === 'UND_ERR_BODY_TIMEOUT') timeouts++;
        else errors++;
      })
      .finally(() => {
        inFlight--;
        outstanding--;
        pump();
        if (next >= total && outstanding === 0) finish();
      });
  };

  /** Sends every request whose time has come. */
  function pump(): void {
    if (stopRequested) {
      next = total;
      return;
    }
    const t = now();
    while (next < total && scheduleOffsetNs(next, plan.rate) <= t) send(next++, t);
  }

  const tick = (): void => {
    pump();
    if (next < total) timer = setTimeout(tick, 1);
    else if (outstanding === 0) finish();
  };
  tick();
  const deadline = setTimeout(finish, (plan.warmupS + plan.durationS) * 1000 + timeoutMs + 5_000);
  await finished;
  clearTimeout(deadline);
  if (timer !== null) clearTimeout(timer);
  await pool.close().catch(() => pool.destroy());

  const sent = Math.max(0, Math.min(measured, next - warmup));
  const answered = completed.reduce((count, value) => count + (Number.isFinite(value) ? 1 : 0), 0);
  const lag = new Float64Array(sent);
  const service: number[] = [];
  for (let k = 0; k < sent; k++) {
    lag[k] = (dispatched[k]! - scheduled[k]!) / 1000;
    if (Number.isFinite(completed[k]!)) service.push((completed[k]! - dispatched[k]!) / 1000);
  }
  const good = answered - non2xx - mismatches;
  const held = achieved(good, windowStart, windowEnd, lastDone, plan.rate);
  const unanswered = sent - answered - errors - timeouts;
  let reason = held.reason;
  if (stopRequested) reason = 'stopped';
  else if (sent < measured) reason = `only ${sent} of ${measured} requests were sent`;
  return {
    offeredRate: plan.rate,
    achievedRate: Math.round(held.rate),
    scheduled: measured,
    completed: answered,
    errors: errors + Math.max(0, unanswered),
    timeouts,
    non2xx,
    mismatches,
    latencyUs: percentiles(chargedLatenciesUs(scheduled.subarray(0, sent), completed.subarray(0, sent))),
    serviceUs: percentiles(Float64Array.from(service)),
    dispatchLagUs: percentiles(lag),
    peakInFlight,
    valid: reason === null,
    invalidReason: reason,
  };
}
