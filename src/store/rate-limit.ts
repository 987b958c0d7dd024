/**
 * Fixed-window request counting: N requests per window per key (a token id, or a client address for
 * failed authentications). A fixed window is what the RateLimit-* headers describe exactly: the limit,
 * what is left, and the seconds until the window resets.
 */
import type { RateLimiter } from './account-store.js';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Whole seconds until the window resets (at least 1). */
  resetSeconds: number;
}

interface Window {
  startedAt: number;
  count: number;
}

export class FixedWindowLimiter implements RateLimiter {
  private readonly windows = new Map<string, Window>();

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Counts one request for `key` and says whether it is within the limit. */
  hit(key: string): RateDecision {
    const now = this.clock();
    let window = this.windows.get(key);
    if (window === undefined || now - window.startedAt >= this.windowMs) {
      window = { startedAt: now, count: 0 };
      this.windows.set(key, window);
    }
    window.count++;
    return this.decision(window, now);
  }

  /** The state for `key` without counting a request. */
  peek(key: string): RateDecision {
    const now = this.clock();
    const window = this.windows.get(key);
    if (window === undefined || now - window.startedAt >= this.windowMs) {
      return { allowed: true, limit: this.limit, remaining: this.limit, resetSeconds: Math.ceil(this.windowMs / 1000) };
    }
    return this.decision(window, now);
  }

  /** Drops finished windows so the map holds only keys seen in the current window. */
  sweep(): void {
    const now = this.clock();
    for (const [key, window] of this.windows) {
      if (now - window.startedAt >= this.windowMs) this.windows.delete(key);
    }
  }

  get size(): number {
    return this.windows.size;
  }

  private decision(window: Window, now: number): RateDecision {
    const resetSeconds = Math.max(1, Math.ceil((window.startedAt + this.windowMs - now) / 1000));
    return {
      allowed: window.count <= this.limit,
      limit: this.limit,
      remaining: Math.max(0, this.limit - window.count),
      resetSeconds,
    };
  }
}
