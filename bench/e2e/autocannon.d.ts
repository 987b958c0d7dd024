/**
 * The part of autocannon's programmatic API the end-to-end benchmark uses. autocannon ships no types and we
 * add no dependency for them; the shapes follow autocannon 9's README and lib/run.js.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Options {
    url: string;
    connections?: number;
    /** Seconds; fractions are fine (the stop timer is duration * 1000 ms). */
    duration?: number;
    amount?: number;
    /** Seconds before a request counts as a timeout. */
    timeout?: number;
    pipelining?: number;
    method?: string;
    body?: string | Buffer;
    headers?: Record<string, string>;
    /** A response whose body differs counts in `mismatches`. */
    expectBody?: string;
    title?: string;
    /** TLS server name (SNI) for an https:// url. */
    servername?: string;
    /** Requests each connection sends in turn (their fields override the ones above). */
    requests?: Array<{ method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer; onResponse?: (status: number, body: string) => void }>;
  }

  /** Percentiles of a histogram: p50, p99, p99_9, ... as numbers. Latencies are whole milliseconds. */
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p97_5: number;
    p99: number;
    p99_9: number;
    [percentile: string]: number;
  }

  export interface Result {
    title?: string;
    url: string;
    connections: number;
    /** Seconds from start to stop. */
    duration: number;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    '1xx': number;
    '2xx': number;
    '3xx': number;
    '4xx': number;
    '5xx': number;
    statusCodeStats: Record<string, { count: number }>;
    latency: Histogram;
    /** `total` is the completed requests, `sent` the requests written. */
    requests: Histogram & { sent: number };
    throughput: Histogram;
    start: Date;
    finish: Date;
  }

  export interface Instance extends EventEmitter {
    stop(): void;
  }

  function autocannon(options: Options, callback: (error: Error | null, result: Result) => void): Instance;
  export default autocannon;
}
