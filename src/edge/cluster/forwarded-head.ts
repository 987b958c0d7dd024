/**
 * A forwarded request's headers as the first edge read them. undici, which carries the hop, writes Host
 * first and Content-Length last whatever their place; the first edge says where they stood
 * (ORDER_HEADER) and the owner moves them back, so the tunnel client gets the same list in the same
 * order as from a direct request.
 */

/**
 * Moves `host` and `content-length` (names of any case) back to the pair indices in `order` ("H,C", -1
 * when absent). In place.
 */
export function restoreHeaderOrder(headers: string[], order: string): void {
  const comma = order.indexOf(',');
  if (comma === -1) return;
  const hostAt = Number(order.slice(0, comma));
  const lengthAt = Number(order.slice(comma + 1));
  if (!Number.isInteger(hostAt) || !Number.isInteger(lengthAt)) return;
  const moved: [number, string, string][] = [];
  for (const [name, at] of [['host', hostAt], ['content-length', lengthAt]] as const) {
    if (at < 0) continue;
    let index = 0;
    while (index < headers.length && headers[index]!.toLowerCase() !== name) index += 2;
    if (index >= headers.length) continue;
    moved.push([at, headers[index]!, headers[index + 1]!]);
    headers.splice(index, 2);
  }
  moved.sort((a, b) => a[0] - b[0]);
  for (const [at, name, value] of moved) headers.splice(Math.min(at * 2, headers.length), 0, name, value);
}
