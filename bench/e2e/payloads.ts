/**
 * What the benchmark sends and what the target answers: one definition for runner, probes and target.
 *
 * A scenario is a method, a body size and a response shape. POST sends `size` bytes up and gets a short
 * JSON answer with the length the target read (so a lost byte shows as a wrong body); GET gets `size`
 * bytes down. The shape is how the target frames its answer: `length` (a `content-length`) or `chunked`
 * (`transfer-encoding: chunked`, what streaming frameworks and `res.write()` without a length send).
 */

export type Method = 'GET' | 'POST';
export type Shape = 'length' | 'chunked';
export const SHAPES: readonly Shape[] = ['length', 'chunked'];

export interface Scenario {
  method: Method;
  /** Bytes up (POST) or down (GET). */
  size: number;
  shape: Shape;
}

export const KIB = 1024;
export const MIB = 1024 * 1024;
export const SMALL = KIB;

/** The target's answer to a POST of `length` bytes. */
export function postBody(length: number): string {
  return `{"length":${length}}`;
}

/** A JSON document of exactly `size` bytes, shaped like a webhook delivery (or an API answer, going down). */
export function jsonPayload(size: number): string {
  const head = '{"event":"bench.delivery","id":"evt_0001","data":{"padding":"';
  const tail = '"}}';
  const fill = size - head.length - tail.length;
  if (fill < 0) throw new Error(`a JSON payload cannot be smaller than ${head.length + tail.length} bytes`);
  return head + 'x'.repeat(fill) + tail;
}

/** The request path of a scenario: the target reads the shape and the size of a GET from it. */
export function scenarioPath(scenario: Scenario): string {
  return `/bench/${scenario.shape}/${scenario.method === 'GET' ? scenario.size : 0}`;
}

const payloads = new Map<number, string>();
/** The body sent up (POST) or expected down (GET), cached: built once per size. */
export function payload(size: number): string {
  let text = payloads.get(size);
  if (text === undefined) {
    text = jsonPayload(size);
    payloads.set(size, text);
  }
  return text;
}

/** The body a correct answer to the scenario has. */
export function expectedAnswer(scenario: Scenario): string {
  return scenario.method === 'POST' ? postBody(scenario.size) : payload(scenario.size);
}

export function sizeLabel(size: number): string {
  return size >= MIB ? `${size / MIB} MiB` : `${size / KIB} KiB`;
}

export function scenarioLabel(scenario: Scenario): string {
  return `${scenario.method} ${sizeLabel(scenario.size)} ${scenario.method === 'POST' ? 'up' : 'down'}, ${scenario.shape}`;
}

/** The answer to a GET of any path outside /bench/<shape>/<size> (`npm run bench:hops`). */
export const GET_BODY = '{"ok":true,"service":"burrow-bench-target"}';

// The old single-shape names, still used by bench/e2e/hops.ts (`npm run bench:hops`).
export const POST_SIZE = SMALL;
export const POST_PAYLOAD = payload(SMALL);
export const POST_ANSWER = postBody(SMALL);
