/**
 * A forwarded request's headers as the first edge read them. undici, which carries the hop, writes Host
 * first and Content-Length last whatever their place, in lower case; the first edge says where they
 * stood and how they were spelled (ORDER_HEADER) and the owner puts them back, so the tunnel client gets
 * the same list in the same order as from a direct request.
 */

/** The ORDER_HEADER value for a request whose Host and Content-Length stood at these pair indices, with these names. */
export function headerOrder(hostAt: number, lengthAt: number, hostName: string, lengthName: string): string {
  return `${hostAt},${lengthAt},${hostName},${lengthName}`;
}

/**
 * Moves `host` and `content-length` back to the pair indices in `order` ("H,C,HostName,LengthName", -1
 * when absent), with their names in the case the public client sent them (undici writes both in lower
 * case). In place.
 */
export function restoreHeaderOrder(headers: string[], order: string): void {
  const parts = order.split(',');
  if (parts.length < 2) return;
  const hostAt = Number(parts[0]);
  const lengthAt = Number(parts[1]);
  if (!Number.isInteger(hostAt) || !Number.isInteger(lengthAt)) return;
  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const moved: [number, string, string][] = [];
  for (const [name, at, sent] of [['host', hostAt, parts[2]], ['content-length', lengthAt, parts[3]]] as const) {
    if (at < 0) continue;
    let index = 0;
    while (index < headers.length && headers[index]!.toLowerCase() !== name) index += 2;
    if (index >= headers.length) continue;
    const original = sent !== undefined && TOKEN.test(sent) && sent.toLowerCase() === name ? sent : headers[index]!;
    moved.push([at, original, headers[index + 1]!]);
    headers.splice(index, 2);
  }
  moved.sort((a, b) => a[0] - b[0]);
  for (const [at, name, value] of moved) headers.splice(Math.min(at * 2, headers.length), 0, name, value);
}
