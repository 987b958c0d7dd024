/**
 * The edge's end-of-turn work, done once per event-loop turn in the check phase, outside every uWS
 * callback:
 *  1. the captures of exchanges that completed this turn are written to the capture journal in one
 *     write(), and only then do their last bytes go out ("nothing lost": a response the public client
 *     received is captured, across kill -9; src/store/capture-journal.ts);
 *  2. public responses with bytes to write are written, each corked (one syscall per response);
 *  3. each tunnel's frames of this turn go out, corked together;
 *  4. the journaled captures wait for one synchronous LMDB transaction a few milliseconds later, off
 *     the answers' path, with those of the turns in between (see `scheduleCommit`); every read of the
 *     capture store commits them first, so an API read finds every capture whose answer went out.
 * A turn holding a large capture (JOURNAL_MAX_CAPTURE_BYTES: a big body) skips the journal in step 1 and
 * commits the queue with it before step 2 instead: writing big bodies twice cost more than the commit.
 * With --capture-fsync there is no journal: step 1 is the LMDB commit (with its fsync) itself.
 *
 * Measured on this machine: awaiting lmdb's asynchronous put costs ~1.1 ms of latency per request (a
 * round trip through its writer thread); a synchronous transaction commits in ~30 µs and, batched,
 * ~2 µs per capture. With LMDB's default overlapping sync the commit is in the OS's hands when it
 * returns, which is what a kill -9 needs; only power loss can undo it.
 */
import type { CaptureStore, CaptureToStore, RingHandle } from '../store/captures.js';

/** An exchange waiting for its capture to commit. */
export interface Captured {
  readonly ring: RingHandle;
  readonly seq: number;
  storedCapture(): CaptureToStore;
  /** The capture is committed (or could not be): finish the public side. */
  afterCapture(): void;
}

export interface Writable {
  flushWrites(): void;
}

export interface FrameSender {
  flushFrames(): void;
}

/** How long the first journaled capture waits for its LMDB commit, at most. */
export const COMMIT_DELAY_MS = 5;
/** Queued captures, or bytes of them, that are committed at once. */
export const COMMIT_QUEUE_CAPTURES = 512;
export const COMMIT_QUEUE_BYTES = 8 * 1024 * 1024;

export class Turn {
  private captured: Captured[] = [];
  private commitTimer: NodeJS.Timeout | null = null;
  private readonly commitQueuedNow = (): void => {
    this.commitTimer = null;
    this.commitQueued();
  };
  private writes: Writable[] = [];
  private senders: FrameSender[] = [];
  private scheduled = false;
  private readonly runNow = (): void => this.run();

  constructor(
    private readonly captures: CaptureStore,
    private readonly log: (line: string) => void,
    /** Told each commit's size and duration (the metrics); null when nobody reads them. */
    private readonly observeCommit: ((captures: number, durationMs: number) => void) | null = null,
  ) {}

  capture(exchange: Captured): void {
    this.captured.push(exchange);
    this.schedule();
  }

  write(stream: Writable): void {
    this.writes.push(stream);
    this.schedule();
  }

  frames(sender: FrameSender): void {
    this.senders.push(sender);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.runNow);
  }

  private run(): void {
    // Work queued while this runs (a WINDOW grant while writing, say) schedules the next turn's run,
    // and frames queued before the last step still go out in this one.
    this.scheduled = false;
    if (this.captured.length > 0) {
      const batch = this.captured;
      this.captured = [];
      if (!this.captures.journaling) this.timed(() => this.commit(batch));
      else if (this.journal(batch)) this.commitQueued();
      for (const exchange of batch) exchange.afterCapture();
    }
    this.flush();
    if (this.captures.journaling) this.scheduleCommit();
  }

  /**
   * Journaled captures are committed to LMDB together, COMMIT_DELAY_MS after the first of them, or at
   * once past COMMIT_QUEUE_CAPTURES or COMMIT_QUEUE_BYTES: one commit for many turns, never on an
   * answer's path. Reads of the store commit what is queued first.
   */
  private scheduleCommit(): void {
    const queued = this.captures.queuedCaptures;
    if (queued === 0) return;
    if (queued >= COMMIT_QUEUE_CAPTURES || this.captures.queuedBytes >= COMMIT_QUEUE_BYTES) {
      this.commitQueued();
      return;
    }
    if (this.commitTimer !== null) return;
    this.commitTimer = setTimeout(this.commitQueuedNow, COMMIT_DELAY_MS);
    this.commitTimer.unref();
  }

  private commitQueued(): void {
    if (this.commitTimer !== null) {
      clearTimeout(this.commitTimer);
      this.commitTimer = null;
    }
    this.timed(() => {
      try {
        return this.captures.commitQueued();
      } catch (error) {
        // Not the disk (the store answers for that).
        this.log(`capture write failed: ${(error as Error).message}`);
        return 0;
      }
    });
  }

  /** Runs a commit, telling the metrics its size and duration. */
  private timed(commit: () => number): void {
    const started = this.observeCommit === null ? 0 : performance.now();
    const written = commit();
    if (this.observeCommit !== null && written > 0) this.observeCommit(written, performance.now() - started);
  }

  private flush(): void {
    if (this.writes.length > 0) {
      const writes = this.writes;
      this.writes = [];
      for (const stream of writes) stream.flushWrites();
    }
    if (this.senders.length > 0) {
      const senders = this.senders;
      this.senders = [];
      for (const sender of senders) sender.flushFrames();
    }
  }

  /** The captures written: the store skips (and counts) what it cannot write, and reports failed commits itself. */
  private commit(batch: Captured[]): number {
    try {
      return this.captures.writeAll(batch);
    } catch (error) {
      // Not the disk (the store answers for that): the responses still go out all the same.
      this.log(`capture write failed for ${batch.length} requests: ${(error as Error).message}`);
      return 0;
    }
  }

  /** True when the batch was too large for the journal and must be committed before its answers. */
  private journal(batch: Captured[]): boolean {
    try {
      return this.captures.journalAll(batch);
    } catch (error) {
      this.log(`capture write failed for ${batch.length} requests: ${(error as Error).message}`);
      return false;
    }
  }
}
