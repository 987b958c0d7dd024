/**
 * A handler that records everything the local hop reports for one exchange, and `send` to run one:
 * what the tests of test/client/local-hop/ compare against the bytes real servers sent.
 */
import type { Duplex } from 'node:stream';
import type { MessageHead } from '../../../src/http1/parser.js';
import type { LocalHopError } from '../../../src/client/local-hop/errors.js';
import type { LocalExchange, LocalRequest, LocalResponseHandler, ResponseFramingValue } from '../../../src/client/local-hop/exchange.js';
import { LocalHop, type LocalHopOptions, type TargetPool } from '../../../src/client/local-hop/pool.js';
import type { LocalTarget } from '../../../src/client/routes.js';

export interface Outcome {
  interims: MessageHead[];
  head: MessageHead | null;
  framing: ResponseFramingValue | -1;
  contentLength: number;
  body: Buffer;
  trailers: string[] | null;
  ended: boolean;
  error: LocalHopError | null;
  upgrade: { socket: Duplex; leftover: Buffer } | null;
  /** The order the events came in: 'interim', 'head', 'body', 'trailers', 'end', 'error', 'upgrade'. */
  events: string[];
}

export class Recorder implements LocalResponseHandler {
  readonly outcome: Outcome = { interims: [], head: null, framing: -1, contentLength: -1, body: Buffer.alloc(0), trailers: null, ended: false, error: null, upgrade: null, events: [] };
  private readonly chunks: Buffer[] = [];
  drains = 0;
  readonly done: Promise<Outcome>;
  private settle!: (outcome: Outcome) => void;
  /** Called for each body chunk, before it is recorded (to pause, abort...). */
  onChunk: ((chunk: Buffer) => void) | null = null;
  onInterimHead: ((head: MessageHead) => void) | null = null;

  constructor() {
    this.done = new Promise((resolve) => (this.settle = resolve));
  }

  onInterim(head: MessageHead): void {
    this.outcome.events.push('interim');
    this.outcome.interims.push(head);
    this.onInterimHead?.(head);
  }

  onHead(head: MessageHead, framing: ResponseFramingValue, contentLength: number): void {
    this.outcome.events.push('head');
    this.outcome.head = head;
    this.outcome.framing = framing;
    this.outcome.contentLength = contentLength;
  }

  onBody(chunk: Buffer): void {
    if (this.outcome.events.at(-1) !== 'body') this.outcome.events.push('body');
    this.onChunk?.(chunk);
    this.chunks.push(chunk);
  }

  onTrailers(fields: string[]): void {
    this.outcome.events.push('trailers');
    this.outcome.trailers = fields;
  }

  onEnd(): void {
    this.outcome.events.push('end');
    this.outcome.ended = true;
    this.finish();
  }

  onUpgrade(head: MessageHead, socket: Duplex, leftover: Buffer): void {
    this.outcome.events.push('upgrade');
    this.outcome.head = head;
    this.outcome.upgrade = { socket, leftover };
    this.finish();
  }

  onError(error: LocalHopError): void {
    this.outcome.events.push('error');
    this.outcome.error = error;
    this.finish();
  }

  onRequestDrain(): void {
    this.drains++;
  }

  get bodyBytes(): number {
    let total = 0;
    for (const chunk of this.chunks) total += chunk.byteLength;
    return total;
  }

  private finish(): void {
    this.outcome.body = Buffer.concat(this.chunks);
    this.settle(this.outcome);
  }
}

/** One exchange: the request with `body` (all of it unless `more` follows), then its outcome. */
export async function send(
  pool: TargetPool,
  request: LocalRequest,
  body: Buffer | string | null = null,
  more?: (exchange: LocalExchange) => void,
): Promise<Outcome> {
  const recorder = new Recorder();
  const bytes = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  const exchange = pool.request(request, bytes, more === undefined, recorder);
  more?.(exchange);
  return recorder.done;
}

/** The value of the first field named `name` (any case), or undefined. */
export function field(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i]!.toLowerCase() === name) return fields[i + 1];
  return undefined;
}

/** A local hop to one target for the length of `use`, closed afterwards. */
export async function withPool<T>(target: LocalTarget, use: (pool: TargetPool) => Promise<T>, options: Partial<LocalHopOptions> = {}): Promise<T> {
  const hop = new LocalHop([target], options);
  try {
    return await use(hop.pool(target));
  } finally {
    hop.close();
  }
}
