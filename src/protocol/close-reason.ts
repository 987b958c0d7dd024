/**
 * A WebSocket close reason fits in a control frame: at most 123 bytes of UTF-8 (RFC 6455 section 5.5).
 * `ws` throws on a longer one, so every reason we pass on is cut here, on a character boundary.
 */
const MAX_CLOSE_REASON_BYTES = 123;

export function closeReason(text: string): string {
  if (text.length <= MAX_CLOSE_REASON_BYTES / 3 || Buffer.byteLength(text) <= MAX_CLOSE_REASON_BYTES) return text;
  let cut = '';
  let bytes = 0;
  for (const character of text) {
    const size = Buffer.byteLength(character);
    if (bytes + size > MAX_CLOSE_REASON_BYTES) break;
    cut += character;
    bytes += size;
  }
  return cut;
}
