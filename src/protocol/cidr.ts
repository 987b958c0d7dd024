/**
 * CIDR blocks for `--allow-cidr` / `--deny-cidr` (docs/policies.md). Every address is held as 16 bytes:
 * IPv4 as its IPv4-mapped IPv6 form (::ffff:a.b.c.d), so an IPv4 block matches a client that reached a
 * dual-stack socket as `::ffff:203.0.113.7` as well as `203.0.113.7`, and an IPv4 block's prefix is
 * counted from bit 96. No I/O, no node:net: this runs in the CLI, the API and the edge alike.
 */

export interface CidrBlock {
  /** The block as written back: the network address (host bits cleared) and the prefix length. */
  readonly text: string;
  readonly bytes: Uint8Array;
  /** Prefix length over the 128-bit form. */
  readonly bits: number;
}

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

function parseIpv4(text: string, into: Uint8Array, offset: number): boolean {
  const parts = text.split('.');
  if (parts.length !== 4) return false;
  for (let i = 0; i < 4; i++) {
    const part = parts[i]!;
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return false;
    const value = Number(part);
    if (value > 255) return false;
    into[offset + i] = value;
  }
  return true;
}

/** An address as 16 bytes (IPv4 mapped), or null when `text` is not an IPv4 or IPv6 address. */
export function addressBytes(text: string): Uint8Array | null {
  const bytes = new Uint8Array(16);
  if (text.includes('.') && !text.includes(':')) {
    bytes.set(MAPPED_PREFIX);
    return parseIpv4(text, bytes, 12) ? bytes : null;
  }
  let address = text;
  const zone = address.indexOf('%');
  if (zone !== -1) address = address.slice(0, zone);
  if (address.startsWith('[') && address.endsWith(']')) address = address.slice(1, -1);
  if (!/^[0-9a-fA-F:.]+$/.test(address)) return null;
  let tail = address;
  let ipv4Tail = false;
  const lastColon = address.lastIndexOf(':');
  if (address.indexOf('.', lastColon) !== -1) {
    if (!parseIpv4(address.slice(lastColon + 1), bytes, 12)) return null;
    tail = `${address.slice(0, lastColon + 1)}0:0`;
    ipv4Tail = true;
  }
  const halves = tail.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (half: string): string[] | null => (half === '' ? [] : half.split(':'));
  const head = groupsOf(halves[0]!);
  const rest = halves.length === 2 ? groupsOf(halves[1]!) : [];
  if (head === null || rest === null) return null;
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...new Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...rest];
  for (let i = 0; i < 8; i++) {
    const group = groups[i]!;
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null;
    if (ipv4Tail && i >= 6) continue;
    const value = parseInt(group, 16);
    bytes[i * 2] = value >> 8;
    bytes[i * 2 + 1] = value & 0xff;
  }
  return bytes;
}

function isMapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 12; i++) if (bytes[i] !== MAPPED_PREFIX[i]) return false;
  return true;
}

function formatBytes(bytes: Uint8Array): string {
  if (isMapped(bytes)) return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // The longest run of two or more zero groups becomes "::" (RFC 5952).
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  if (bestStart === -1) return groups.join(':');
  return `${groups.slice(0, bestStart).join(':')}::${groups.slice(bestStart + bestLength).join(':')}`;
}

/**
 * Parses `203.0.113.0/24`, `2001:db8::/32`, or a bare address (one host). Host bits set past the prefix
 * are cleared (`10.1.2.3/8` is `10.0.0.0/8`), as routers do. Returns the reason when it is not a block.
 */
export function parseCidr(text: string): CidrBlock | string {
  const slash = text.indexOf('/');
  const addressText = slash === -1 ? text : text.slice(0, slash);
  const bytes = addressBytes(addressText);
  if (bytes === null) return `"${text}" is not an IPv4 or IPv6 address or CIDR block (e.g. 203.0.113.0/24, 2001:db8::/32)`;
  const ipv4 = isMapped(bytes) && !addressText.includes(':');
  const max = ipv4 ? 32 : 128;
  const prefixText = slash === -1 ? String(max) : text.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(prefixText) || Number(prefixText) > max) {
    return `"${text}": the prefix length must be 0 to ${max}`;
  }
  const prefix = Number(prefixText);
  const bits = ipv4 ? prefix + 96 : prefix;
  for (let bit = bits; bit < 128; bit++) bytes[bit >> 3]! &= ~(0x80 >> (bit & 7));
  return { text: `${formatBytes(bytes)}/${prefix}`, bytes, bits };
}

/** Whether the 16-byte address lies in `block`. */
export function cidrContains(block: CidrBlock, address: Uint8Array): boolean {
  const whole = block.bits >> 3;
  for (let i = 0; i < whole; i++) if (block.bytes[i] !== address[i]) return false;
  const rest = block.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (block.bytes[whole]! & mask) === (address[whole]! & mask);
}
