/**
 * The rogue tenant's moves for the stateful protocol fuzzer (test/fuzz/protocol-fuzzer.ts): one public
 * request to the rogue's subdomain and the frames a hostile tunnel client answers its OPEN with (an
 * upgrade's OPEN too: a WebSocket is raw bytes after a 101 in protocol 2). Mostly valid-looking answers
 * with one or two things wrong (a body past its declared length, a 1xx in RESPONSE or a 101 to a request
 * that asked for no upgrade, INFO after the head, a header name that is not a token, DATA after the end,
 * TRAILERS at odd times, a RESET at some point, protocol 1's retired frames), and some sequences of
 * random frames.
 *
 * A sequence is plain JSON and a pure function of its seed, so a failure is replayed from the seed alone
 * or from the printed (minimised) JSON: stream ids are symbolic (`"s"` is the stream the edge opened for
 * this sequence's request) and bodies are `{"$bin": "text"}` or `{"$bin": size}`.
 */
import fc from 'fast-check';
import { DEFAULT_SETTINGS, FrameType, MAX_WINDOW } from '../../src/protocol/constants.js';

/** What the public side sends: the rogue answers whatever the edge makes of it. */
export type PublicKind = 'GET' | 'HEAD' | 'POST' | 'POST_LARGE' | 'POST_CHUNKED' | 'WS';

/**
 * The stream a frame names: `s` is this sequence's stream, `unopened` one the edge never allocated,
 * `previous` the one before `s` (ended, or another sequence's), a number is sent as it is.
 */
export type StreamRef = 's' | 'unopened' | 'previous' | number;

/** A bin field: the text's bytes, or `size` bytes of a repeating pattern. */
export interface Body {
  $bin: string | number;
}

export type Step =
  /** A frame as an array, element 1 a StreamRef; Body objects become bin fields; packed as it is. */
  | { frame: unknown[] }
  /** A text WebSocket message (never part of the protocol). */
  | { text: string }
  /** Bytes in hex, sent as one binary message (broken msgpack). */
  | { raw: string }
  /** Wait for the edge: `pong` (it handled everything before), `tick` (one event-loop turn here), or ms. */
  | { wait: 'pong' | 'tick' | number }
  /** The public client goes away (socket destroyed), closes its WebSocket cleanly, or sends a WebSocket message. */
  | { public: PublicAction };

export type PublicAction = 'abort' | 'close' | 'send';

export interface PublicRequest {
  kind: PublicKind;
  /** Request body bytes (POST kinds). */
  bodySize: number;
  /** WS: the subprotocols the public client offers, comma-separated ('' or absent: none). */
  protocols?: string;
}

export interface Sequence {
  seed: number;
  request: PublicRequest;
  steps: Step[];
}

// ---- values -------------------------------------------------------------------------------------------

const PATTERN = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A body of `size` bytes, written as text when it is short enough to read in a report. */
export function bodyOf(size: number): Body {
  return size <= PATTERN.length ? { $bin: PATTERN.slice(0, size) } : { $bin: size };
}

export function bodySize(body: Body): number {
  return typeof body.$bin === 'number' ? body.$bin : Buffer.byteLength(body.$bin);
}

export function isBody(value: unknown): value is Body {
  return typeof value === 'object' && value !== null && '$bin' in value;
}

const patternBytes = Buffer.from(PATTERN.repeat(Math.ceil((DEFAULT_SETTINGS.maxFrameBody + 64) / PATTERN.length)));

/** The bytes of a Body: text is encoded, sized bodies are views of one shared pattern buffer when they fit. */
export function bodyBytes(body: Body): Buffer {
  if (typeof body.$bin === 'string') return Buffer.from(body.$bin);
  const size = Math.max(0, Math.floor(body.$bin));
  if (size <= patternBytes.length) return patternBytes.subarray(0, size);
  return Buffer.alloc(size, 0x78);
}

const sizes = fc.oneof(
  { weight: 4, arbitrary: fc.constant(0) },
  { weight: 16, arbitrary: fc.integer({ min: 1, max: 16 }) },
  { weight: 8, arbitrary: fc.integer({ min: 17, max: 4096 }) },
  { weight: 3, arbitrary: fc.integer({ min: 4097, max: DEFAULT_SETTINGS.maxFrameBody - 1 }) },
  { weight: 1, arbitrary: fc.constant(DEFAULT_SETTINGS.maxFrameBody) },
  // One past maxFrameBody: a protocol error that ends the tunnel.
  { weight: 1, arbitrary: fc.constant(DEFAULT_SETTINGS.maxFrameBody + 1) },
);
const body: fc.Arbitrary<Body> = sizes.map(bodyOf);
const bodyOrNull: fc.Arbitrary<Body | null> = fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 4, arbitrary: body });

const FINAL_STATUSES = [200, 201, 204, 206, 301, 304, 400, 404, 500, 503];
/** Informational, switching protocols, and past what HTTP allows: the decoder lets them through. */
const ODD_STATUSES = [100, 101, 102, 103, 199, 600, 999];
/** Refused by the decoder: the tunnel ends. */
const REFUSED_STATUSES = [0, 99, 1000, -1, 65_536];
const status = fc.oneof(
  { weight: 18, arbitrary: fc.constantFrom(...FINAL_STATUSES) },
  { weight: 6, arbitrary: fc.constantFrom(...ODD_STATUSES) },
  { weight: 2, arbitrary: fc.integer({ min: 100, max: 999 }) },
);
const upgradeStatus = fc.oneof(
  { weight: 24, arbitrary: fc.constant(101) },
  { weight: 6, arbitrary: fc.constantFrom(200, 204, 302, 400, 403, 404, 426, 500) },
  { weight: 4, arbitrary: fc.constantFrom(...ODD_STATUSES) },
);

const GOOD_NAMES = ['content-type', 'x-a', 'set-cookie', 'cache-control', 'location', 'etag', 'vary', 'x-request-id', 'server', 'content-encoding'];
/** Names whose meaning is framing or the edge's own. */
export const FRAMING_NAMES = [
  'content-length',
  'transfer-encoding',
  'connection',
  'date',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-connection',
  'proxy-authenticate',
  'sec-websocket-accept',
  'sec-websocket-protocol',
  'sec-websocket-extensions',
  'host',
  'burrow-error',
];
/** Not tokens, yet the decoder lets them through (no CR, LF or NUL): the edge must refuse them. */
const BAD_NAMES = [
  '',
  ' ',
  'x a',
  'transfer-encoding ',
  ' content-length',
  'content-length:',
  'x:y',
  'ü',
  'x\tb',
  '(',
  '"q"',
  ',',
  ':status',
  'x'.repeat(300),
  'a@b',
];
/** Names of any case are tokens in protocol 2 (kept as sent): the edge passes them on or treats them as framing. */
const CASED_NAMES = ['X-Upper', 'Content-Length', 'Transfer-Encoding', 'Connection', 'Set-Cookie', 'DATE'];
/** Refused by the decoder (CR, LF, NUL): the tunnel ends. */
const REFUSED_NAMES = ['a\r\nb', 'nul\0', 'x\nb'];
const GOOD_VALUES = ['text/plain', 'application/json', '', 'a=1; Path=/', 'no-store', '/next', '"abc"', 'gzip', '0', '1', 'close', 'chunked', 'keep-alive', 'x-a'];
const BAD_VALUES = [' padded ', 'ü', '\t', '\x7f', '\x01', 'chunked, chunked', 'close, x-a', 'x'.repeat(8000)];
const REFUSED_VALUES = ['a\r\nx-injected: 1', 'nul\0', 'cr\r', 'lf\n'];

const headerName = fc.oneof(
  { weight: 24, arbitrary: fc.constantFrom(...GOOD_NAMES) },
  { weight: 4, arbitrary: fc.constantFrom(...CASED_NAMES) },
  { weight: 9, arbitrary: fc.constantFrom(...FRAMING_NAMES) },
  { weight: 9, arbitrary: fc.constantFrom(...BAD_NAMES) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 10 }).map((name) => name.replace(/[\r\n\0]/g, '')) },
);
const headerValue = fc.oneof(
  { weight: 18, arbitrary: fc.constantFrom(...GOOD_VALUES) },
  { weight: 6, arbitrary: fc.constantFrom(...BAD_VALUES) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }).map((value) => value.replace(/[\r\n\0]/g, '')) },
);
const headerPairs = fc.array(fc.tuple(headerName, headerValue), { maxLength: 5 });
const headers = headerPairs.map((pairs) => pairs.flat());

const streamRef: fc.Arbitrary<StreamRef> = fc.oneof(
  { weight: 20, arbitrary: fc.constant('s' as const) },
  { weight: 1, arbitrary: fc.constant('unopened' as const) },
  { weight: 2, arbitrary: fc.constant('previous' as const) },
  { weight: 1, arbitrary: fc.constant(0xffffffff) },
);
/** Credit that passes the decoder; a total past MAX_WINDOW is a protocol error, so those are rarer. */
const credit = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(1, 4, 65_536, 262_144) }, { weight: 1, arbitrary: fc.constantFrom(MAX_WINDOW, 0xffffffff) });
const resetCode = fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 7, 99, 0xffffffff);
const message = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('', 'bye') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constant('x'.repeat(300)) },
);
/** Reason phrases: ordinary, empty, odd bytes, one character that is not a byte (refused by the edge). */
const reason = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom('OK', '', 'Fine Thanks', 'Switching Protocols', 'Early Hints') },
  { weight: 2, arbitrary: fc.constantFrom('caf\xe9', '\t', 'x'.repeat(300), '\u2713') },
);

const frame = (...elements: unknown[]): Step => ({ frame: elements });

/** Any single client frame, or something that is not a frame: the alphabet of the random sequences. */
const chaosStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(streamRef, bodyOrNull, fc.boolean()).map(([ref, chunk, end]) => frame(FrameType.DATA, ref, chunk, end)) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(streamRef, status, reason, headers, bodyOrNull, fc.boolean())
      .map(([ref, code, text, list, chunk, end]) => frame(FrameType.RESPONSE, ref, code, text, list, chunk, end)),
  },
  { weight: 2, arbitrary: fc.tuple(streamRef, status, reason, headers).map(([ref, code, text, list]) => frame(FrameType.INFO, ref, code, text, list)) },
  { weight: 1, arbitrary: fc.tuple(streamRef, headers).map(([ref, list]) => frame(FrameType.TRAILERS, ref, list)) },
  { weight: 3, arbitrary: fc.tuple(streamRef, resetCode, message).map(([ref, code, text]) => frame(FrameType.RESET, ref, code, text)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.oneof(streamRef, fc.constant(0)), credit)
      .map(([ref, amount]) => frame(FrameType.WINDOW, ref, amount)),
  },
  // Protocol 1's WebSocket frames (retired): a protocol error that ends the tunnel.
  {
    weight: 1,
    arbitrary: fc.tuple(streamRef, body).map(([ref, data]) => frame(10, ref, data, true, true)),
  },
  // A GOAWAY ends the rogue's tunnel (it reconnects): rare, and with any code and stream.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(0, 1, 2, 4, 5, 6, 7, 99, 0xffffffff), message)
      .map(([code, text]) => frame(FrameType.GOAWAY, 0, code, text)),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 12 }).map((bytes): Step => ({ raw: Buffer.from(bytes).toString('hex') })),
      fc.constantFrom<Step>({ text: '[4,1,200,"OK",[],null,true]' }, { frame: [14, 's'] }, { frame: [FrameType.OPEN, 's', 'req', 'GET', '/', [], '::1', null, true, false] }),
    ),
  },
);

const wait: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Step>({ wait: 'pong' }) },
  { weight: 3, arbitrary: fc.constant<Step>({ wait: 'tick' }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 10 }).map((ms): Step => ({ wait: ms })) },
);

// ---- an HTTP answer ------------------------------------------------------------------------------------

type LengthMode = 'none' | 'exact' | 'fewer' | 'more' | 'zero' | 'garbage' | 'twice';
type EndMode = 'last' | 'none' | 'early' | 'empty-data' | 'trailers';

const lengthMode = fc.oneof(
  { weight: 4, arbitrary: fc.constant<LengthMode>('none') },
  { weight: 4, arbitrary: fc.constant<LengthMode>('exact') },
  { weight: 2, arbitrary: fc.constant<LengthMode>('fewer') },
  { weight: 2, arbitrary: fc.constant<LengthMode>('more') },
  { weight: 1, arbitrary: fc.constant<LengthMode>('zero') },
  { weight: 1, arbitrary: fc.constant<LengthMode>('garbage') },
  { weight: 1, arbitrary: fc.constant<LengthMode>('twice') },
);
const endMode = fc.oneof(
  { weight: 8, arbitrary: fc.constant<EndMode>('last') },
  { weight: 1, arbitrary: fc.constant<EndMode>('none') },
  { weight: 2, arbitrary: fc.constant<EndMode>('early') },
  { weight: 2, arbitrary: fc.constant<EndMode>('empty-data') },
  { weight: 2, arbitrary: fc.constant<EndMode>('trailers') },
);
const GARBAGE_LENGTHS = ['abc', '-1', '1e3', ' 5', '', '5, 5', '0x10', '99999999999999999999', '+3', '3 ', '٣'];

/** Random frames before an answer (likely a protocol error: DATA before RESPONSE...) or after it (mostly ignored). */
const chaos = (max: number, weight: number): fc.Arbitrary<Step[]> =>
  fc.oneof({ weight: 6, arbitrary: fc.constant<Step[]>([]) }, { weight, arbitrary: fc.array(chaosStep, { minLength: 1, maxLength: max }) });

const httpAnswer: fc.Arbitrary<Step[]> = fc
  .record({
    prefix: chaos(2, 1),
    interim: fc.array(fc.tuple(fc.constantFrom(100, 102, 103), headers), { maxLength: 2 }),
    status,
    reason,
    headerPairs,
    lengthMode,
    lengthDelta: fc.integer({ min: 1, max: 100 }),
    garbageLength: fc.constantFrom(...GARBAGE_LENGTHS),
    lengthAt: fc.nat(),
    chunks: fc.array(sizes, { maxLength: 4 }),
    inline: fc.boolean(),
    end: endMode,
    suffix: chaos(3, 6),
  })
  .map((plan) => {
    const total = plan.chunks.reduce((sum, size) => sum + size, 0);
    const declared: string[] = [];
    switch (plan.lengthMode) {
      case 'exact':
        declared.push(String(total));
        break;
      case 'fewer':
        declared.push(String(Math.max(0, total - plan.lengthDelta)));
        break;
      case 'more':
        declared.push(String(total + plan.lengthDelta));
        break;
      case 'zero':
        declared.push('0');
        break;
      case 'garbage':
        declared.push(plan.garbageLength);
        break;
      case 'twice':
        declared.push(String(total), String(total + plan.lengthDelta));
        break;
      case 'none':
        break;
    }
    const list = plan.headerPairs.flat();
    const at = (plan.lengthAt % (plan.headerPairs.length + 1)) * 2;
    list.splice(at, 0, ...declared.flatMap((value) => ['content-length', value]));
    const bodies = plan.chunks.map(bodyOf);
    const inline = plan.inline && bodies.length > 0 ? bodies.shift()! : null;
    const steps: Step[] = [...plan.prefix];
    for (const [code, fields] of plan.interim) steps.push(frame(FrameType.INFO, 's', code, '', fields));
    const endsAt = plan.end === 'early' ? 0 : plan.end === 'last' ? bodies.length : -1;
    steps.push(frame(FrameType.RESPONSE, 's', plan.status, plan.reason, list, inline, endsAt === 0 && (bodies.length === 0 || plan.end === 'early')));
    // 'early' ends in RESPONSE and again at the last DATA: body frames after the end.
    bodies.forEach((chunk, i) => steps.push(frame(FrameType.DATA, 's', chunk, endsAt === i + 1 || (plan.end === 'early' && i === bodies.length - 1))));
    if (plan.end === 'empty-data') steps.push(frame(FrameType.DATA, 's', null, true));
    if (plan.end === 'trailers') steps.push(frame(FrameType.TRAILERS, 's', plan.headerPairs.flat()));
    steps.push(...plan.suffix);
    return steps;
  });

// ---- an answer to an upgrade -------------------------------------------------------------------------------

/** A 101 (or a refusal), then raw bytes toward the public client, a FIN, sometimes a RESET. */
const upgradeAnswer: fc.Arbitrary<Step[]> = fc
  .record({
    prefix: chaos(2, 1),
    status: upgradeStatus,
    reason,
    headers,
    bytes: fc.array(body, { maxLength: 4 }),
    fin: fc.boolean(),
    suffix: chaos(3, 6),
  })
  .map((plan) => {
    const switching = plan.status === 101;
    const steps: Step[] = [...plan.prefix, frame(FrameType.RESPONSE, 's', plan.status, plan.reason, switching ? ['Upgrade', 'websocket', 'Connection', 'Upgrade', ...plan.headers] : plan.headers, null, false)];
    for (const chunk of plan.bytes) steps.push(frame(FrameType.DATA, 's', chunk, false));
    if (plan.fin) steps.push(frame(FrameType.DATA, 's', null, true));
    steps.push(...plan.suffix);
    return steps;
  });

// ---- whole sequences -------------------------------------------------------------------------------------

const request: fc.Arbitrary<PublicRequest> = fc.oneof(
  { weight: 30, arbitrary: fc.constant<PublicRequest>({ kind: 'GET', bodySize: 0 }) },
  { weight: 5, arbitrary: fc.constant<PublicRequest>({ kind: 'HEAD', bodySize: 0 }) },
  { weight: 25, arbitrary: fc.integer({ min: 1, max: 4096 }).map((size): PublicRequest => ({ kind: 'POST', bodySize: size })) },
  // Past maxFrameBody (OPEN, then DATA within credit) and past the stream window (the edge waits for WINDOW).
  {
    weight: 3,
    arbitrary: fc.integer({ min: DEFAULT_SETTINGS.maxFrameBody + 1, max: 300_000 }).map((size): PublicRequest => ({ kind: 'POST_LARGE', bodySize: size })),
  },
  { weight: 8, arbitrary: fc.integer({ min: 1, max: 100_000 }).map((size): PublicRequest => ({ kind: 'POST_CHUNKED', bodySize: size })) },
  {
    weight: 20,
    arbitrary: fc.constantFrom('', '', 'chat', 'chat, superchat').map((protocols): PublicRequest => (protocols === '' ? { kind: 'WS', bodySize: 0 } : { kind: 'WS', bodySize: 0, protocols })),
  },
);

const randomSteps = fc.array(chaosStep, { minLength: 1, maxLength: 8 });

/**
 * Values the decoder refuses where they stand (the frame's type says what fits): the rest of the pools pass
 * the decoder, and one sequence in ten has one frame broken by one of these, which ends the tunnel.
 */
const REFUSED: readonly unknown[] = [
  ...REFUSED_STATUSES,
  2 ** 32,
  1.5,
  null,
  true,
  '',
  'x',
  {},
  [],
  ['a\r\nb', 'v'],
  ['x-a', 'a\r\nx-injected: 1'],
  ['nul\0', 'v'],
  ['x-a'],
  'a\r\nb',
];
const REFUSED_NAMES_AND_VALUES = [...REFUSED_NAMES, ...REFUSED_VALUES];

interface Corruption {
  step: number;
  element: number;
  value: unknown;
  /** Instead: a header pair with a refused name or value appended to the frame's header list. */
  header: string | null;
}

const corruption: fc.Arbitrary<Corruption> = fc.record({
  step: fc.nat(),
  element: fc.nat(),
  value: fc.constantFrom(...REFUSED),
  header: fc.option(fc.constantFrom(...REFUSED_NAMES_AND_VALUES), { freq: 2 }),
});

/** Breaks one frame of `steps` so that the decoder refuses it (or, rarely, so that it still passes). */
function corrupt(steps: Step[], how: Corruption): Step[] {
  const frames = steps.flatMap((step, i) => ('frame' in step && step.frame.length > 1 ? [i] : []));
  if (frames.length === 0) return steps;
  const at = frames[how.step % frames.length]!;
  const elements = (steps[at] as { frame: unknown[] }).frame.slice();
  const list = elements.findIndex((element, i) => i > 1 && Array.isArray(element));
  if (how.header !== null && list >= 0) {
    const refusedName = REFUSED_NAMES.includes(how.header);
    elements[list] = [...(elements[list] as unknown[]), refusedName ? how.header : 'x-a', refusedName ? 'v' : how.header];
  } else {
    elements[1 + (how.element % (elements.length - 1))] = how.value;
  }
  const broken = steps.slice();
  broken[at] = { frame: elements };
  return broken;
}

/** Steps with waits between some of them, so frames reach the edge in one turn or in several. */
function withWaits(steps: fc.Arbitrary<Step[]>): fc.Arbitrary<Step[]> {
  return steps.chain((list) =>
    fc
      .array(fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: wait }), { minLength: list.length, maxLength: list.length })
      .map((waits) => list.flatMap((step, i) => (waits[i] === null ? [step] : [waits[i]!, step]))),
  );
}

const publicAction: fc.Arbitrary<Step | null> = fc.oneof(
  { weight: 20, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.constant<Step>({ public: 'abort' }) },
  { weight: 1, arbitrary: fc.constant<Step>({ public: 'close' }) },
  { weight: 1, arbitrary: fc.constant<Step>({ public: 'send' }) },
);

/** Sometimes the public client does something in the middle: goes away, or sends on its WebSocket. */
function withPublicAction(steps: fc.Arbitrary<Step[]>): fc.Arbitrary<Step[]> {
  return fc.tuple(steps, publicAction, fc.nat()).map(([list, action, at]) => {
    if (action === null) return list;
    const copy = list.slice();
    copy.splice(at % (list.length + 1), 0, action);
    return copy;
  });
}

const sequenceBody: fc.Arbitrary<Omit<Sequence, 'seed'>> = request.chain((req) => {
  const own = req.kind === 'WS' ? upgradeAnswer : httpAnswer;
  const other = req.kind === 'WS' ? httpAnswer : upgradeAnswer;
  const answer = fc.oneof({ weight: 16, arbitrary: own }, { weight: 1, arbitrary: other }, { weight: 2, arbitrary: randomSteps });
  const steps = fc
    .tuple(answer, fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: corruption }))
    .map(([list, broken]) => (broken === null ? list : corrupt(list, broken)));
  return withPublicAction(withWaits(steps)).map((list) => ({ request: req, steps: list }));
});

/** The sequence of `seed`: the same seed gives the same sequence, on any machine. */
export function generateSequence(seed: number): Sequence {
  const [value] = fc.sample(sequenceBody, { seed, numRuns: 1 });
  return { seed, ...value! };
}

/** The seed of the `index`-th sequence of a run (spread so neighbouring runs do not overlap). */
export function sequenceSeed(runSeed: number, index: number): number {
  return (runSeed + Math.imul(index, 0x9e3779b1)) | 0;
}

// ---- what a sequence does -------------------------------------------------------------------------------

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The kinds of misbehaviour a sequence contains, by name: a crash report lists them, and a local run can
 * leave out sequences with known crash classes (`npm run fuzz -- --skip body-past-length`).
 */
export const FEATURES = [
  'body-past-length',
  'body-short-of-length',
  'status-1xx',
  'status-101',
  'status-out-of-range',
  'bad-header-name',
  'bad-header-value',
  'framing-header',
  'data-before-response',
  'data-after-end',
  'second-response',
  'reset',
  'window',
  'info',
  'trailers',
  'upgrade-raw-bytes',
  'retired-frame',
  'unknown-stream',
  'oversize-body',
  'goaway',
  'garbage',
  'public-abort',
] as const;
export type Feature = (typeof FEATURES)[number];

export function featuresOf(sequence: Sequence): Set<Feature> {
  const found = new Set<Feature>();
  const upgrade = sequence.request.kind === 'WS';
  let responses = 0;
  let ended = false;
  let switched = false;
  let declared = -1;
  let bodyTotal = 0;
  const checkHeaders = (list: unknown): void => {
    if (!Array.isArray(list)) return;
    for (let i = 0; i < list.length; i += 2) {
      const name = list[i];
      const value = list[i + 1];
      if (typeof name !== 'string' || !TOKEN.test(name)) found.add('bad-header-name');
      else if (name.toLowerCase() !== 'content-length' && FRAMING_NAMES.includes(name.toLowerCase())) found.add('framing-header');
      if (typeof value !== 'string' || !FIELD_VALUE.test(value)) found.add('bad-header-value');
    }
  };
  const checkStatus = (code: unknown): void => {
    if (typeof code !== 'number' || code < 100 || code > 599 || !Number.isInteger(code)) found.add('status-out-of-range');
    else if (code === 101) {
      if (!upgrade) found.add('status-101');
    } else if (code < 200) found.add('status-1xx');
  };
  for (const step of sequence.steps) {
    if ('text' in step || 'raw' in step) found.add('garbage');
    if ('public' in step && step.public !== 'send') found.add('public-abort');
    if (!('frame' in step)) continue;
    const [type, ref, ...fields] = step.frame;
    for (const field of fields) if (isBody(field) && bodySize(field) > DEFAULT_SETTINGS.maxFrameBody) found.add('oversize-body');
    if (ref === 'unopened') found.add('unknown-stream');
    if (type === FrameType.GOAWAY) found.add('goaway');
    if (type === FrameType.WINDOW) found.add('window');
    if (typeof type === 'number' && type >= 8 && type <= 11) {
      found.add('retired-frame');
      continue;
    }
    const known = type === FrameType.RESPONSE || type === FrameType.DATA || type === FrameType.RESET || type === FrameType.INFO || type === FrameType.TRAILERS;
    if (!known) {
      if (type !== FrameType.GOAWAY && type !== FrameType.WINDOW) found.add('garbage');
      continue;
    }
    if (ref !== 's') continue;
    if (type === FrameType.RESET) found.add('reset');
    if (type === FrameType.INFO) {
      found.add('info');
      checkStatus(fields[0]);
      checkHeaders(fields[2]);
    }
    if (type === FrameType.TRAILERS) {
      found.add('trailers');
      checkHeaders(fields[0]);
      if (responses === 0) found.add('data-before-response');
      ended = true;
    }
    if (type === FrameType.RESPONSE) {
      responses++;
      if (responses > 1) found.add('second-response');
      if (ended && responses > 1) found.add('data-after-end');
      checkStatus(fields[0]);
      checkHeaders(fields[2]);
      if (fields[0] === 101 && upgrade && responses === 1) switched = true;
      if (responses === 1 && Array.isArray(fields[2])) {
        for (let i = 0; i < fields[2].length; i += 2) {
          if (String(fields[2][i]).toLowerCase() === 'content-length' && /^[0-9]+$/.test(String(fields[2][i + 1]))) declared = Number(fields[2][i + 1]);
        }
      }
    }
    if (type === FrameType.DATA) {
      if (switched) found.add('upgrade-raw-bytes');
      else if (responses === 0) found.add('data-before-response');
      else if (ended) found.add('data-after-end');
    }
    if ((type === FrameType.RESPONSE || type === FrameType.DATA) && responses > 0 && !switched) {
      const chunk = type === FrameType.RESPONSE ? fields[3] : fields[0];
      if (isBody(chunk)) bodyTotal += bodySize(chunk);
      if ((type === FrameType.RESPONSE ? fields[4] : fields[1]) === true) ended = true;
    }
  }
  if (declared >= 0 && bodyTotal > declared) found.add('body-past-length');
  if (declared >= 0 && ended && bodyTotal < declared) found.add('body-short-of-length');
  return found;
}

// ---- reports --------------------------------------------------------------------------------------------

const FRAME_NAMES: Record<number, string> = Object.fromEntries(Object.entries(FrameType).map(([name, type]) => [type, name]));

function show(value: unknown): string {
  if (isBody(value)) return typeof value.$bin === 'string' ? `bin${JSON.stringify(value.$bin)}` : `bin(${value.$bin} bytes)`;
  if (Array.isArray(value)) return `[${value.map(show).join(', ')}]`;
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 40)}…(${text.length} chars)` : text;
}

/** One line per step, for people: `RESPONSE s 200 ["content-length", "2"] null false`. */
export function describeSteps(steps: readonly Step[]): string[] {
  return steps.map((step) => {
    if ('wait' in step) return `  (wait ${typeof step.wait === 'number' ? `${step.wait} ms` : step.wait})`;
    if ('text' in step) return `  text message ${show(step.text)}`;
    if ('raw' in step) return `  binary message 0x${step.raw}`;
    if ('public' in step) return `  (the public client ${step.public === 'abort' ? 'goes away' : step.public === 'close' ? 'closes' : 'sends a message'})`;
    const [type, ...rest] = step.frame;
    const name = typeof type === 'number' ? (FRAME_NAMES[type] ?? `type ${type}`) : show(type);
    return `  ${name} ${rest.map(show).join(' ')}`;
  });
}

export function describeRequest(request: PublicRequest): string {
  if (request.kind === 'WS') return request.protocols === undefined || request.protocols === '' ? 'WS' : `WS offering ${request.protocols}`;
  return request.kind === 'GET' || request.kind === 'HEAD' ? request.kind : `${request.kind} (${request.bodySize} bytes)`;
}
