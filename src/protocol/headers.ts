/**
 * Hop-by-hop header rules shared by both ends of the tunnel (RFC 9110 section 7.6.1): these headers,
 * and those a Connection header names, describe one connection and never cross the tunnel.
 * Headers are flat arrays [name, value, ...] with lower-case names.
 */

export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Tokens of a Connection header that name further headers to drop (beyond the hop-by-hop set). */
export function connectionNamed(connection: string): string[] {
  const named: string[] = [];
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name.length > 0 && name !== 'close' && !HOP_BY_HOP.has(name)) named.push(name);
  }
  return named;
}

/** Removes the pairs whose names are in `names` (in place). */
export function removeNamed(headers: string[], names: readonly string[]): void {
  let write = 0;
  for (let read = 0; read < headers.length; read += 2) {
    if (names.includes(headers[read]!)) continue;
    headers[write++] = headers[read]!;
    headers[write++] = headers[read + 1]!;
  }
  headers.length = write;
}

/** Drops hop-by-hop and Connection-named pairs from a flat list (the client's side of the rule). */
export function dropHopByHop(headers: string[]): string[] {
  let connection = '';
  let clean = true;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (HOP_BY_HOP.has(name)) {
      clean = false;
      if (name === 'connection') connection = connection === '' ? headers[i + 1]! : `${connection},${headers[i + 1]!}`;
    }
  }
  if (clean) return headers;
  const named = connection === '' ? [] : connectionNamed(connection);
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (HOP_BY_HOP.has(name) || named.includes(name)) continue;
    kept.push(name, headers[i + 1]!);
  }
  return kept;
}
