/**
 * Hop-by-hop header rules shared by both ends of the tunnel (RFC 9110 section 7.6.1): these headers,
 * and those a Connection header names, describe one connection and never cross the tunnel.
 * Headers are flat arrays [name, value, ...] with names as they were sent (protocol 2 keeps their
 * case), so every comparison here is ASCII case-insensitive; the set holds lower-case names.
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

/** The lengths of the hop-by-hop names: most names are ruled out without lower-casing them. */
const HOP_LENGTHS = new Set([...HOP_BY_HOP].map((name) => name.length));

/** Whether `name` (any case) is hop-by-hop. */
export function isHopByHop(name: string): boolean {
  return HOP_LENGTHS.has(name.length) && HOP_BY_HOP.has(name.toLowerCase());
}

/** Whether `name` (any case) is `lowerCase`: field names are ASCII tokens, compared case-insensitively. */
export function isName(name: string, lowerCase: string): boolean {
  return name.length === lowerCase.length && (name === lowerCase || name.toLowerCase() === lowerCase);
}

const NAMES_NOTHING: readonly string[] = Object.freeze([]);

/** Tokens of a Connection header that name further headers to drop (beyond the hop-by-hop set), lower-case. */
export function connectionNamed(connection: string): readonly string[] {
  if (connection.indexOf(',') === -1) {
    // One token, as nearly every client sends (`keep-alive`, `close`): no split, no array.
    const name = connection.trim().toLowerCase();
    return name.length > 0 && name !== 'close' && !HOP_BY_HOP.has(name) ? [name] : NAMES_NOTHING;
  }
  const named: string[] = [];
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name.length > 0 && name !== 'close' && !HOP_BY_HOP.has(name)) named.push(name);
  }
  return named;
}

/** Removes the pairs whose names (any case) are in `names` (lower-case), in place. */
export function removeNamed(headers: string[], names: readonly string[]): void {
  let write = 0;
  for (let read = 0; read < headers.length; read += 2) {
    if (names.includes(headers[read]!.toLowerCase())) continue;
    headers[write++] = headers[read]!;
    headers[write++] = headers[read + 1]!;
  }
  headers.length = write;
}

/**
 * Drops hop-by-hop and Connection-named pairs from a flat list; `keep` names (lower-case) hop-by-hop
 * fields to leave in (an upgrade keeps `connection` and `upgrade`). Returns `headers` itself when
 * nothing goes.
 */
export function dropHopByHop(headers: string[], keep: readonly string[] = []): string[] {
  let connection = '';
  let clean = true;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (isHopByHop(name)) {
      if (isName(name, 'connection')) connection = connection === '' ? headers[i + 1]! : `${connection},${headers[i + 1]!}`;
      if (!keep.includes(name.toLowerCase())) clean = false;
    }
  }
  const named = connection === '' ? [] : connectionNamed(connection);
  if (clean && named.length === 0) return headers;
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    // Lower-cased only where it can matter: a local server's usual answer (`Connection: keep-alive`,
    // `Keep-Alive: timeout=5`) comes here, and a lower-cased copy of each of its names was garbage.
    if (isHopByHop(name) ? !keep.includes(name.toLowerCase()) : named.length > 0 && named.includes(name.toLowerCase())) continue;
    kept.push(name, headers[i + 1]!);
  }
  return kept;
}
