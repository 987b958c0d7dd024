/**
 * The stateful fuzzer of the tunnel protocol (issue 11): rogue tenants play random, valid-looking frame
 * sequences (test/fuzz/sequences.ts) against a live edge process while a healthy tenant (the real
 * TunnelClient in front of a real local server) keeps being asked to answer. The edge must never exit
 * and the healthy tunnel must answer throughout; a rogue tunnel ended by the edge with GOAWAY is correct
 * behaviour, and the rogue connects again.
 *
 * When the edge dies, the fuzzer records how (the error and where it was thrown), finds which of the
 * sequences in flight kills it alone, shrinks that one to a minimal sequence that still kills it the same
 * way, restarts the edge and goes on. Each distinct crash is reported once, with its seed and frames.
 *
 * `npm test` runs a bounded count (test/edge/protocol-fuzz.test.ts); `npm run fuzz` runs 100,000 or more
 * (scripts/fuzz.mjs calls `main`).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { FrameType } from '../../src/protocol/constants.js';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { echo, freePort, runCli, startLocal, tempDir, type LocalServer } from '../helpers.js';
import { crashSignature, EdgeProcess, type EdgeExit } from './edge-process.js';
import { ANSWER_WAIT_MS, RogueLane, type SequenceOutcome } from './rogue-lane.js';
import {
  describeRequest,
  describeSteps,
  featuresOf,
  FEATURES,
  generateSequence,
  isBody,
  bodyOf,
  bodySize,
  sequenceSeed,
  type Feature,
  type PublicKind,
  type Sequence,
} from './sequences.js';

export interface FuzzOptions {
  /** Sequences to play (each one public request the edge opened a stream for). */
  count: number;
  /** Stop after this long even if fewer were played. */
  timeLimitMs: number;
  /** Rogue tenants playing at once, each on its own tunnel and account. */
  lanes: number;
  seed: number;
  /** Leave out sequences with these features (local runs past a known crash class; never in npm test). */
  skip: readonly Feature[];
  /** The healthy tunnel is asked at least this often. */
  healthEveryMs: number;
  /** Stop after this many edge exits. */
  maxExits: number;
  /** Shrink each new crash class to a minimal sequence (replays with restarts of the edge). */
  minimize: boolean;
  /** Replays spent shrinking one crash class, and time. */
  minimizeAttempts: number;
  minimizeMs: number;
  /** A progress line this often (0: none). */
  progressEveryMs: number;
  log(line: string): void;
}

export const DEFAULT_OPTIONS: FuzzOptions = {
  count: 100_000,
  timeLimitMs: 30 * 60_000,
  lanes: 4,
  seed: 1,
  skip: [],
  healthEveryMs: 500,
  maxExits: 50,
  minimize: true,
  minimizeAttempts: 80,
  minimizeMs: 90_000,
  progressEveryMs: 5_000,
  log: (line) => process.stdout.write(`${line}\n`),
};

export interface CrashClass {
  key: string;
  excerpt: string;
  /** Edge exits of this class during the run. */
  exits: number;
  /** The seeds of the sequences in flight when it first happened. */
  candidates: number[];
  /** The in-flight sequence that killed the edge when replayed alone (null: none did). */
  seed: number | null;
  /** The smallest sequence found that still kills the edge this way. */
  minimal: Sequence | null;
  features: Feature[];
  /** How often the minimal sequence killed the edge again when replayed. */
  verified: string;
}

export interface FuzzResult {
  seed: number;
  sequences: number;
  /** Public requests the edge answered itself, without opening a stream (tunnel reconnecting, edge down). */
  undelivered: number;
  frames: number;
  skipped: number;
  /** Exits of the edge during the run (the replays that shrink a crash kill it on purpose: not counted). */
  edgeExits: number;
  healthChecks: number;
  healthyFailures: string[];
  /** Rogue tunnels the edge ended (GOAWAY or close) and that connected again. */
  reconnects: number;
  /**
   * Public answers the client could not take as HTTP (a header name that is not a token, a 1xx or 101 as
   * the final answer): the edge let a tenant break the framing. (After a 101 the bytes are the tenant's
   * own, passed through: a bogus WebSocket handshake there is its business, not a misframing.)
   */
  malformed: { count: number; seeds: number[] };
  /** Sequences whose public request had no answer after the rogue's last frame. */
  hangs: { count: number; seeds: number[]; features: Map<string, number> };
  anomalies: Map<string, { count: number; seed: number }>;
  goAways: Map<string, number>;
  answers: Map<string, number>;
  crashes: CrashClass[];
  /** Replays spent finding and shrinking crashes. */
  replays: number;
  elapsedMs: number;
  stoppedBy: 'count' | 'time' | 'exits' | 'fatal';
  /** Why the run could not go on (the edge would not start again), or null. */
  fatal: string | null;
}

const HEALTHY_SUBDOMAIN = 'healthy-tenant';
/** llhttp's parse errors (a head over the client's own size limit aside), and a 1xx (or a 101 to a plain request) taken as the final answer. */
const MALFORMED = /HPE_(?!HEADER_OVERFLOW)|^(?:gone away, )?1\d\d(?: |$)/;
const HISTORY = 3;

export async function runProtocolFuzz(options: Partial<FuzzOptions> = {}): Promise<FuzzResult> {
  const fuzzer = new Fuzzer({ ...DEFAULT_OPTIONS, ...options });
  try {
    await fuzzer.setUp();
    return await fuzzer.run();
  } finally {
    await fuzzer.tearDown();
  }
}

/** Plays one sequence alone against a fresh edge `times` times; reports each exit's signature (or null). */
export async function replaySequence(sequence: Sequence, times: number, log: (line: string) => void): Promise<(string | null)[]> {
  const fuzzer = new Fuzzer({ ...DEFAULT_OPTIONS, lanes: 1, log });
  try {
    await fuzzer.setUp();
    return await fuzzer.replay(sequence, times);
  } finally {
    await fuzzer.tearDown();
  }
}

class Fuzzer {
  private readonly dataDir = tempDir('burrow-fuzz-');
  private readonly env = { XDG_CONFIG_HOME: join(this.dataDir, 'config') };
  private port = 0;
  private agentPort = 0;
  private edge: EdgeProcess | null = null;
  private local: LocalServer | null = null;
  private healthy: TunnelClient | null = null;
  private lanes: RogueLane[] = [];
  private histories: Sequence[][] = [];
  private readonly result: FuzzResult;
  private readonly crashes = new Map<string, CrashClass>();
  private nextIndex = 0;
  private busy = 0;
  private paused: Promise<void> | null = null;
  private resumeLanes: () => void = () => {};
  private crashHandling: Promise<void> | null = null;
  private minimizing = false;
  private readonly lateAnswers = new Set<Promise<void>>();
  /** Edge exits not handled yet (an edge restarted after a crash may die again at once). */
  private readonly exits: EdgeExit[] = [];
  private stopRequested = false;
  private healthCounter = 0;
  private startedAt = Date.now();

  constructor(private readonly options: FuzzOptions) {
    this.result = {
      seed: options.seed,
      sequences: 0,
      undelivered: 0,
      frames: 0,
      skipped: 0,
      edgeExits: 0,
      healthChecks: 0,
      healthyFailures: [],
      reconnects: 0,
      hangs: { count: 0, seeds: [], features: new Map() },
      malformed: { count: 0, seeds: [] },
      anomalies: new Map(),
      goAways: new Map(),
      answers: new Map(),
      crashes: [],
      replays: 0,
      elapsedMs: 0,
      stoppedBy: 'count',
      fatal: null,
    };
  }

  // ---- set-up -------------------------------------------------------------------------------------------

  async setUp(): Promise<void> {
    this.port = await freePort();
    this.agentPort = await freePort();
    await this.ensureEdge();
    const accounts = await Promise.all(
      Array.from({ length: this.options.lanes + 1 }, (_, i) =>
        runCli(['admin', 'create-account', '--email', `fuzz-${i}@example.test`, '--plan', 'FREE', '--data', this.dataDir, '--json'], this.env),
      ),
    );
    const tokens = accounts.map((created) => {
      if (created.code !== 0) throw new Error(`create-account failed: ${created.stderr}`);
      return JSON.parse(created.stdout).token.token as string;
    });
    this.local = await startLocal(echo);
    this.healthy = new TunnelClient({
      edge: `http://localhost:${this.port}`,
      token: tokens[0]!,
      routes: new RouteTable(this.local.port),
      subdomain: HEALTHY_SUBDOMAIN,
      minBackoffMs: 20,
      maxBackoffMs: 200,
    });
    await this.healthy.start();
    this.lanes = tokens.slice(1).map((token, i) => new RogueLane(`rogue-${i}`, () => ({ port: this.port, agentPort: this.agentPort, token })));
    this.histories = this.lanes.map(() => []);
    await Promise.all(this.lanes.map((lane) => lane.connect()));
  }

  async tearDown(): Promise<void> {
    for (const lane of this.lanes) lane.close();
    await this.healthy?.close().catch(() => undefined);
    await this.edge?.stop();
    await this.local?.close();
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** A live edge: the current one, or a new one on the same port and data. */
  private async ensureEdge(): Promise<EdgeProcess> {
    if (this.edge !== null && this.edge.alive) return this.edge;
    const edge = await EdgeProcess.start(this.port, this.dataDir, this.env, ['--timeout', '10000', '--agent-port', String(this.agentPort)]);
    this.edge = edge;
    void edge.exited.then((exit) => {
      if (edge.stopped || this.minimizing) return;
      this.result.edgeExits++;
      this.exits.push(exit);
      this.handleExits();
    });
    return edge;
  }

  // ---- the run ------------------------------------------------------------------------------------------

  async run(): Promise<FuzzResult> {
    this.startedAt = Date.now();
    const deadline = this.startedAt + this.options.timeLimitMs;
    const lanes = this.lanes.map((lane, i) => this.laneLoop(lane, this.histories[i]!, deadline));
    const health = this.healthLoop();
    const progress = this.progressLoop();
    await Promise.all(lanes);
    this.stopRequested = true;
    await this.crashHandling;
    await Promise.all([health, progress, ...this.lateAnswers]);
    // The last word: the edge is up and the healthy tunnel answers.
    if (this.edge !== null && this.edge.alive) await this.healthCheck();
    if (this.result.stoppedBy === 'count' && Date.now() > deadline && this.result.sequences < this.options.count) this.result.stoppedBy = 'time';
    this.result.elapsedMs = Date.now() - this.startedAt;
    this.result.crashes = [...this.crashes.values()];
    return this.result;
  }

  private async laneLoop(lane: RogueLane, history: Sequence[], deadline: number): Promise<void> {
    const skip = new Set(this.options.skip);
    while (!this.stopRequested) {
      if (this.paused !== null) {
        await this.paused;
        continue;
      }
      if (this.result.sequences + this.busy >= this.options.count || Date.now() > deadline) break;
      const sequence = generateSequence(sequenceSeed(this.options.seed, this.nextIndex++));
      if (skip.size > 0 && [...featuresOf(sequence)].some((feature) => skip.has(feature))) {
        this.result.skipped++;
        continue;
      }
      this.busy++;
      const connectsBefore = lane.connects;
      const outcome = await lane.run(sequence);
      // Only sequences that reached the rogue can have killed the edge; the ones that found it dead did not.
      if (outcome.delivered) {
        history.push(sequence);
        if (history.length > HISTORY) history.shift();
      }
      this.busy--;
      if (lane.connects > connectsBefore && connectsBefore > 0) this.result.reconnects += lane.connects - connectsBefore;
      this.record(sequence, outcome);
    }
  }

  private record(sequence: Sequence, outcome: SequenceOutcome): void {
    const result = this.result;
    result.frames += outcome.frames;
    if (!outcome.delivered) {
      result.undelivered++;
      return;
    }
    result.sequences++;
    if (outcome.late === null) this.countAnswer(sequence, outcome.answer);
    else this.watchLate(sequence, outcome.late);
    if (outcome.goAway !== null) count(result.goAways, outcome.goAway.replace(/\d+/g, 'N').slice(0, 120));
    for (const anomaly of outcome.anomalies) {
      const key = anomaly.replace(/\d+/g, 'N');
      const seen = result.anomalies.get(key);
      if (seen === undefined) {
        result.anomalies.set(key, { count: 1, seed: sequence.seed });
        this.options.log(`anomaly (seed ${sequence.seed}): ${anomaly}`);
      } else {
        seen.count++;
      }
    }
  }

  private countAnswer(sequence: Sequence, answer: string): void {
    count(this.result.answers, answer.replace(/\d{4,}/g, 'N'));
    if (MALFORMED.test(answer)) {
      const malformed = this.result.malformed;
      malformed.count++;
      if (malformed.seeds.length < 10) malformed.seeds.push(sequence.seed);
    }
  }

  /** An answer that had not come when the lane moved on: counted when it comes, a hang if it never does. */
  private watchLate(sequence: Sequence, late: Promise<string | null>): void {
    const watched = late.then((answer) => {
      this.lateAnswers.delete(watched);
      if (answer !== null) {
        this.countAnswer(sequence, answer);
        return;
      }
      const hangs = this.result.hangs;
      hangs.count++;
      if (hangs.seeds.length < 10) hangs.seeds.push(sequence.seed);
      count(hangs.features, [...featuresOf(sequence)].sort().join(', ') || 'none');
      count(this.result.answers, 'no answer');
      if (hangs.count === 1) this.options.log(`a public request had no answer (seed ${sequence.seed})`);
    });
    this.lateAnswers.add(watched);
  }

  private pause(): void {
    if (this.paused !== null) return;
    this.paused = new Promise((resolve) => (this.resumeLanes = resolve));
  }

  private resume(): void {
    const resume = this.resumeLanes;
    this.paused = null;
    resume();
  }

  private async lanesIdle(): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (this.busy > 0 && Date.now() < deadline) await sleep(10);
  }

  // ---- the healthy tenant -------------------------------------------------------------------------------

  private async healthLoop(): Promise<void> {
    while (!this.stopRequested) {
      await sleep(this.options.healthEveryMs);
      if (this.stopRequested || this.paused !== null || this.crashHandling !== null) continue;
      await this.healthCheck();
    }
  }

  /** One request through the healthy tunnel: 200 and the body echoed, or a failure on record. */
  private async healthCheck(): Promise<void> {
    const exitsBefore = this.result.edgeExits;
    const failure = await this.askHealthy();
    this.result.healthChecks++;
    if (failure === null) return;
    // A request that failed because the edge was dying is that exit, not a second finding.
    await sleep(200);
    if (this.result.edgeExits !== exitsBefore || this.edge === null || !this.edge.alive) return;
    this.result.healthyFailures.push(`${new Date().toISOString()}: ${failure}; the edge's threads: ${this.edge.threads()}`);
    this.options.log(`healthy tunnel failed: ${failure}; the edge's threads: ${this.edge.threads()}`);
  }

  private async askHealthy(): Promise<string | null> {
    const body = `health check ${++this.healthCounter}`;
    try {
      const response = await request(`http://127.0.0.1:${this.port}/health/${this.healthCounter}`, {
        method: 'POST',
        body,
        headers: { host: `${HEALTHY_SUBDOMAIN}.localhost:${this.port}` },
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await response.body.text();
      if (response.statusCode !== 200) return `status ${response.statusCode}: ${text.slice(0, 200)}`;
      const echoed = JSON.parse(text) as { body?: string };
      return echoed.body === body ? null : `the body came back as ${JSON.stringify(echoed.body)}`;
    } catch (error) {
      return `request failed: ${(error as Error).message}`;
    }
  }

  /** After a restart: the healthy client reconnects by itself; wait until it answers. */
  private async waitHealthy(): Promise<void> {
    const deadline = Date.now() + 15_000;
    let failure: string | null = 'not asked';
    while (Date.now() < deadline) {
      failure = await this.askHealthy();
      if (failure === null) return;
      await sleep(50);
    }
    // The new edge died too: that is the next exit, not a failure of the healthy tunnel.
    if (this.edge === null || !this.edge.alive) return;
    this.result.healthyFailures.push(`the healthy tunnel did not answer within 15 s of the edge's restart: ${failure}`);
  }

  // ---- progress -----------------------------------------------------------------------------------------

  private async progressLoop(): Promise<void> {
    if (this.options.progressEveryMs <= 0) return;
    let last = 0;
    let lastAt = Date.now();
    while (!this.stopRequested) {
      await sleep(Math.min(this.options.progressEveryMs, 250));
      if (Date.now() - lastAt < this.options.progressEveryMs) continue;
      const r = this.result;
      const now = Date.now();
      const rate = ((r.sequences - last) * 1000) / (now - lastAt);
      last = r.sequences;
      lastAt = now;
      this.options.log(
        `[fuzz ${Math.round((now - this.startedAt) / 1000)} s] ${r.sequences} sequences (${rate.toFixed(0)}/s), ${r.frames} frames, ` +
          `${r.edgeExits} edge exits (${this.crashes.size} classes), ${r.healthChecks} health checks, ${r.healthyFailures.length} healthy failures, ` +
          `${r.reconnects} rogue reconnects, ${r.hangs.count} unanswered`,
      );
    }
  }

  // ---- crashes ------------------------------------------------------------------------------------------

  private handleExits(): void {
    this.crashHandling ??= this.restartAfterExits()
      .catch((error: Error) => {
        // The edge would not start again: nothing more to fuzz.
        this.result.fatal = error.message;
        this.result.stoppedBy = 'fatal';
        this.stopRequested = true;
        this.exits.length = 0;
        this.resume();
      })
      .finally(() => {
        this.crashHandling = null;
        if (this.exits.length > 0) this.handleExits();
      });
  }

  /** Lanes pause; each exit is classified (a new class is shrunk), the edge restarts; lanes go on. */
  private async restartAfterExits(): Promise<void> {
    this.pause();
    for (const lane of this.lanes) lane.interrupt();
    await this.lanesIdle();
    while (this.exits.length > 0) {
      await this.classify(this.exits.shift()!);
      await this.ensureEdge();
      await this.waitHealthy();
    }
    for (const history of this.histories) history.length = 0;
    this.resume();
  }

  private async classify(exit: EdgeExit): Promise<void> {
    const signature = crashSignature(exit);
    // The sequences that reached the rogues last, newest first: one of them (or their mix) killed the edge.
    const candidates: Sequence[] = [];
    for (let back = 1; back <= HISTORY; back++) {
      for (const history of this.histories) {
        const sequence = history[history.length - back];
        if (sequence !== undefined && !candidates.includes(sequence)) candidates.push(sequence);
      }
    }
    let crash = this.crashes.get(signature.key);
    const isNew = crash === undefined;
    if (crash === undefined) {
      crash = {
        key: signature.key,
        excerpt: signature.excerpt,
        exits: 0,
        candidates: candidates.map((sequence) => sequence.seed),
        seed: null,
        minimal: null,
        features: [],
        verified: 'not minimised',
      };
      this.crashes.set(signature.key, crash);
      this.options.log(`edge exit, new crash class: ${signature.key}`);
    }
    crash.exits++;
    if (this.result.edgeExits >= this.options.maxExits) {
      this.result.stoppedBy = 'exits';
      this.stopRequested = true;
    }
    if (isNew && this.options.minimize) await this.minimize(crash, candidates);
  }

  /** Finds the in-flight sequence that kills the edge alone, then shrinks it. */
  private async minimize(crash: CrashClass, candidates: Sequence[]): Promise<void> {
    this.minimizing = true;
    const lane = this.lanes[0]!;
    const budget = { attempts: this.options.minimizeAttempts, deadline: Date.now() + this.options.minimizeMs };
    try {
      let found: Sequence | null = null;
      for (const candidate of candidates) {
        if (budget.attempts-- <= 0) break;
        if ((await this.replayOnce(lane, candidate)) === crash.key) {
          found = candidate;
          break;
        }
      }
      if (found === null) {
        crash.verified = 'none of the sequences in flight killed the edge when replayed alone';
        return;
      }
      crash.seed = found.seed;
      const minimal = await this.shrink(lane, found, crash.key, budget);
      crash.minimal = minimal;
      crash.features = [...featuresOf(minimal)];
      let again = 0;
      for (let i = 0; i < 3; i++) if ((await this.replayOnce(lane, minimal)) === crash.key) again++;
      crash.verified = `${again} of 3 replays of the minimal sequence killed the edge`;
      this.options.log(`crash class minimised (seed ${found.seed}, ${crash.verified}):\n${describeSequence(minimal)}`);
    } catch (error) {
      crash.verified = `minimising failed: ${(error as Error).message}`;
    } finally {
      this.minimizing = false;
    }
  }

  /** Plays `sequence` alone on a live edge; returns the crash key if that killed the edge. */
  private async replayOnce(lane: RogueLane, sequence: Sequence, show = false): Promise<string | null> {
    this.result.replays++;
    const edge = await this.ensureEdge();
    if (!lane.connected) await lane.connect();
    const outcome = await lane.run(sequence);
    if (show) {
      const answer = outcome.late === null ? outcome.answer : ((await outcome.late) ?? `no answer within ${ANSWER_WAIT_MS} ms`);
      this.options.log(`  the public client got: ${answer}${outcome.goAway === null ? '' : `; the edge ended the tunnel: ${outcome.goAway}`}`);
      for (const anomaly of outcome.anomalies) this.options.log(`  anomaly: ${anomaly}`);
    }
    const exit = await Promise.race([edge.exited, sleep(150, null)]);
    return exit === null ? null : crashSignature(exit).key;
  }

  async replay(sequence: Sequence, times: number): Promise<(string | null)[]> {
    this.minimizing = true;
    const keys: (string | null)[] = [];
    for (let i = 0; i < times; i++) {
      const key = await this.replayOnce(this.lanes[0]!, sequence, true);
      keys.push(key);
      const edge = this.edge;
      if (key !== null && edge !== null) this.options.log(`replay ${i + 1}: the edge exited: ${key}\n${crashSignature(await edge.exited).excerpt}`);
      else this.options.log(`replay ${i + 1}: the edge survived`);
    }
    return keys;
  }

  /**
   * Greedy shrinking while the edge still dies the same way: a simpler public request, fewer steps
   * (halves, then one at a time), fewer header pairs, smaller bodies.
   */
  private async shrink(lane: RogueLane, start: Sequence, key: string, budget: { attempts: number; deadline: number }): Promise<Sequence> {
    let current = structuredClone(start);
    const stillCrashes = async (candidate: Sequence): Promise<boolean> => {
      if (budget.attempts <= 0 || Date.now() > budget.deadline) return false;
      budget.attempts--;
      return (await this.replayOnce(lane, candidate)) === key;
    };
    for (const kind of simplerKinds(current.request.kind)) {
      const candidate = { ...current, request: { kind, bodySize: kind === 'POST' ? Math.min(current.request.bodySize, 16) || 1 : 0 } };
      if (await stillCrashes(candidate)) {
        current = candidate;
        break;
      }
    }
    for (let size = Math.ceil(current.steps.length / 2); size >= 1; size = size === 1 ? 0 : Math.ceil(size / 2)) {
      let at = 0;
      while (at < current.steps.length) {
        const steps = [...current.steps.slice(0, at), ...current.steps.slice(at + size)];
        const candidate = { ...current, steps };
        if (await stillCrashes(candidate)) current = candidate;
        else at += size;
      }
    }
    for (let i = 0; i < current.steps.length; i++) {
      const step = current.steps[i]!;
      if (!('frame' in step)) continue;
      for (let field = 2; field < step.frame.length; field++) {
        const value = step.frame[field];
        if (Array.isArray(value)) {
          // Header pairs, one at a time.
          let pair = 0;
          for (;;) {
            const list = (current.steps[i] as { frame: unknown[] }).frame[field] as unknown[];
            if (pair * 2 >= list.length) break;
            const shorter = list.slice();
            shorter.splice(pair * 2, 2);
            const candidate = withField(current, i, field, shorter);
            if (await stillCrashes(candidate)) current = candidate;
            else pair++;
          }
        } else if (isBody(value) && bodySize(value) > 2) {
          const candidate = withField(current, i, field, bodyOf(Math.max(1, bodySize(value) >> 2)));
          if (await stillCrashes(candidate)) current = candidate;
        } else if (isBody(value) && bodySize(value) === 0) {
          const candidate = withField(current, i, field, null);
          if (await stillCrashes(candidate)) current = candidate;
        } else if (field === 2 && step.frame[0] === FrameType.RESPONSE && value !== 200) {
          // The plainest status, unless the status is the point.
          const candidate = withField(current, i, field, 200);
          if (await stillCrashes(candidate)) current = candidate;
        } else if (typeof value === 'string' && value.length > 8) {
          const candidate = withField(current, i, field, '');
          if (await stillCrashes(candidate)) current = candidate;
        }
      }
    }
    return current;
  }
}

function simplerKinds(kind: PublicKind): PublicKind[] {
  if (kind === 'GET' || kind === 'WS') return [];
  if (kind === 'HEAD') return ['GET'];
  return ['GET', 'POST'];
}

function withField(sequence: Sequence, stepIndex: number, field: number, value: unknown): Sequence {
  const steps = sequence.steps.slice();
  const frame = (steps[stepIndex] as { frame: unknown[] }).frame.slice();
  frame[field] = value;
  steps[stepIndex] = { frame };
  return { ...sequence, steps };
}

function count(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

// ---- reports ----------------------------------------------------------------------------------------------

export function describeSequence(sequence: Sequence): string {
  return [`  public ${describeRequest(sequence.request)}, then the rogue sends:`, ...describeSteps(sequence.steps)].join('\n');
}

function top(map: Map<string, number>, n: number): string[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([key, times]) => `    ${String(times).padStart(7)}  ${key}`);
}

/** The end-of-run summary, for people (the crash reproductions in full). */
export function formatResult(result: FuzzResult): string {
  const seconds = result.elapsedMs / 1000;
  const lines = [
    `protocol fuzz, seed ${result.seed}: ${result.sequences} sequences in ${seconds.toFixed(1)} s (${(result.sequences / Math.max(seconds, 0.001)).toFixed(0)}/s), ` +
      `${result.frames} frames sent, stopped by ${result.stoppedBy}`,
    ...(result.fatal === null ? [] : [`  the run stopped early: ${result.fatal}`]),
    `  edge exits: ${result.edgeExits} (${result.crashes.length} distinct)`,
    `  healthy tunnel: ${result.healthChecks} checks, ${result.healthyFailures.length} failures`,
    ...result.healthyFailures.slice(0, 10).map((failure) => `    ${failure}`),
    `  rogue tunnels ended by the edge and reconnected: ${result.reconnects}`,
    `  public requests the edge answered without a stream: ${result.undelivered}; sequences left out (--skip): ${result.skipped}`,
    `  public requests with no answer ${ANSWER_NOTE}: ${result.hangs.count}${result.hangs.count > 0 ? ` (seeds ${result.hangs.seeds.join(', ')})` : ''}`,
    ...(result.hangs.count > 0 ? ['    their features (top 8):', ...top(result.hangs.features, 8).map((line) => `  ${line}`)] : []),
    `  public answers the client could not parse as HTTP or WebSocket: ${result.malformed.count}${result.malformed.count > 0 ? ` (seeds ${result.malformed.seeds.join(', ')})` : ''}`,
    `  replays to find and shrink crashes: ${result.replays}`,
  ];
  if (result.anomalies.size > 0) {
    lines.push('  anomalies:');
    for (const [key, { count: times, seed }] of result.anomalies) lines.push(`    ${times} × ${key} (first: seed ${seed})`);
  }
  lines.push('  how the edge ended rogue tunnels (top 12):', ...top(result.goAways, 12));
  lines.push('  what the public clients got (top 12):', ...top(result.answers, 12));
  result.crashes.forEach((crash, i) => {
    lines.push(`  crash ${i + 1}: ${crash.key}`, `    ${crash.exits} edge exits; ${crash.verified}`);
    lines.push(...crash.excerpt.split('\n').map((line) => `      | ${line}`));
    if (crash.minimal !== null) {
      lines.push(`    first killed by seed ${crash.seed} (npm run fuzz -- --replay-seed ${crash.seed}); minimal sequence, features: ${crash.features.join(', ') || 'none'}`);
      lines.push(describeSequence(crash.minimal));
      lines.push(`    replay: npm run fuzz -- --replay '${JSON.stringify(crash.minimal)}'`);
    } else {
      lines.push(`    sequences in flight: seeds ${crash.candidates.join(', ')}`);
    }
  });
  return lines.join('\n');
}

const ANSWER_NOTE = `within ${ANSWER_WAIT_MS / 1000} s of the rogue's last frame`;

// ---- the command line (scripts/fuzz.mjs) ------------------------------------------------------------------

const USAGE = `
Usage: npm run fuzz -- [--count N] [--time SECONDS] [--lanes N] [--seed N] [--skip FEATURE,...] [--max-exits N]
                       [--no-minimize] [--replay-seed N | --replay JSON] [--times N]

Plays random tunnel-protocol frame sequences from rogue tenants against a live edge process while a
healthy tunnel keeps answering; reports edge exits (each distinct crash with a minimal replayable
sequence) and healthy-tunnel failures. Exit code 0 when the edge never exited and the healthy tunnel
always answered.

  --count N          sequences to play (default 100000)
  --time SECONDS     stop after this long (default 1800)
  --lanes N          rogue tenants at once (default 4)
  --seed N           the run's seed (default: random; printed)
  --skip LIST        leave out sequences with these features (also FUZZ_SKIP), for local runs past a
                     known crash:
${wrap(FEATURES.join(', '), 80, '                       ')}
  --max-exits N      stop after N edge exits (default 50)
  --no-minimize      do not shrink crashes
  --replay-seed N    play the sequence of seed N alone against a fresh edge (--times N, default 3)
  --replay JSON      play this sequence (as printed in a crash report) alone
`;

function wrap(text: string, width: number, indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + word.length + 1 > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(indent + line);
  return lines.join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const args = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(USAGE);
      return 0;
    }
    if (arg === '--no-minimize') {
      args.set('no-minimize', 'true');
      continue;
    }
    const value = argv[i + 1];
    if (!arg.startsWith('--') || value === undefined) {
      process.stderr.write(`fuzz: unexpected argument ${arg}\n${USAGE}`);
      return 2;
    }
    args.set(arg.slice(2), value);
    i++;
  }
  const number = (name: string, fallback: number): number => {
    const text = args.get(name);
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isInteger(value)) throw new Error(`--${name} must be an integer, not ${text}`);
    return value;
  };
  const log = (line: string): void => void process.stdout.write(`${line}\n`);
  const replayJson = args.get('replay');
  const replaySeed = args.get('replay-seed');
  if (replayJson !== undefined || replaySeed !== undefined) {
    const sequence = replayJson !== undefined ? (JSON.parse(replayJson) as Sequence) : generateSequence(number('replay-seed', 0));
    log(`replaying seed ${sequence.seed}, features: ${[...featuresOf(sequence)].join(', ') || 'none'}\n${describeSequence(sequence)}`);
    const keys = await replaySequence(sequence, number('times', 3), log);
    return keys.some((key) => key !== null) ? 1 : 0;
  }
  const skipText = args.get('skip') ?? process.env.FUZZ_SKIP ?? '';
  const skip = skipText.split(',').filter((name) => name !== '') as Feature[];
  for (const name of skip) if (!(FEATURES as readonly string[]).includes(name)) throw new Error(`--skip: unknown feature ${name}; known: ${FEATURES.join(', ')}`);
  const seed = number('seed', Math.floor(Math.random() * 2 ** 31));
  const options: Partial<FuzzOptions> = {
    count: number('count', DEFAULT_OPTIONS.count),
    timeLimitMs: number('time', DEFAULT_OPTIONS.timeLimitMs / 1000) * 1000,
    lanes: number('lanes', DEFAULT_OPTIONS.lanes),
    seed,
    skip,
    maxExits: number('max-exits', DEFAULT_OPTIONS.maxExits),
    minimize: !args.has('no-minimize'),
    log,
  };
  log(`protocol fuzz: seed ${seed}, up to ${options.count} sequences or ${options.timeLimitMs! / 1000} s, ${options.lanes} rogue lanes${skip.length > 0 ? `, skipping ${skip.join(', ')}` : ''}`);
  const result = await runProtocolFuzz(options);
  log(formatResult(result));
  return result.edgeExits === 0 && result.healthyFailures.length === 0 && result.fatal === null ? 0 : 1;
}
