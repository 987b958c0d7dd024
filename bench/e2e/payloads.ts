/** What the benchmark sends and what the target answers: one definition for runner, probe and target. */

/** The target's answer to every GET. */
export const GET_BODY = '{"ok":true,"service":"burrow-bench-target"}';

/** The target's answer to a POST of `length` bytes. */
export function postBody(length: number): string {
  return `{"length":${length}}`;
}

/** A JSON document of exactly `size` bytes, shaped like a webhook delivery. */
export function jsonPayload(size: number): string {
  const head = '{"event":"bench.delivery","id":"evt_0001","data":{"padding":"';
  const tail = '"}}';
  const fill = size - head.length - tail.length;
  if (fill < 0) throw new Error(`a JSON payload cannot be smaller than ${head.length + tail.length} bytes`);
  return head + 'x'.repeat(fill) + tail;
}

export const POST_SIZE = 1024;
export const POST_PAYLOAD = jsonPayload(POST_SIZE);
export const POST_ANSWER = postBody(POST_SIZE);
