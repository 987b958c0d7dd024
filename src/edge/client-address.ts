/**
 * Who a request comes from, as far as the edge may believe it (DESIGN.md 5b, `--trust-proxy`).
 *
 * Every caller that needs a client address (captures, the API's auth throttling and rate limits, the
 * X-Forwarded-For sent through the tunnel) takes it from `requestOrigin`, so one rule decides for all.
 * Without --trust-proxy the rule is one branch: the TCP peer is the client, the scheme is the edge's own.
 * From a trusted peer the edge believes, in this order:
 * - a PROXY protocol v2 header (a layer-4 balancer such as HAProxy or an AWS NLB sends it first; the
 *   public listener reads it on plain-HTTP connections from trusted peers, src/edge/proxy-protocol.ts).
 *   Its address is the client; the HTTP headers then come from that client, so they are believed only
 *   when that address is trusted too.
 * - X-Forwarded-For, walked from the right: trusted addresses are proxies, the first untrusted one is
 *   the client (a client cannot hide behind a forged left part of the chain). A malformed entry ends the
 *   walk at the last address known good.
 * - X-Forwarded-Proto (`http` or `https`, first value) and X-Forwarded-Host (first value).
 * From anyone else nothing is believed (a PROXY header from an untrusted peer is not HTTP: 400).
 */
import { BlockList, isIP } from 'node:net';
import { fieldValue } from '../http1/head.js';

/** What a request's origin is read from: its connection's addresses and its fields. */
export interface OriginSource {
  /** The TCP peer, as text. */
  readonly remoteAddress: string;
  /** A trusted PROXY v2 header's source address, or ''. */
  readonly proxiedAddress: string;
}

/** What the edge believes about one request. One module-level object: read it synchronously. */
export interface RequestOrigin {
  /** The client's address: for captures, throttling, rate limits, access logs. */
  client: string;
  /** The address the edge got the request from, which it appends to X-Forwarded-For as any proxy does:
   * the TCP peer, or the address a trusted PROXY v2 header names. */
  hop: string;
  /** X-Forwarded-Proto to send: the edge's own scheme unless a trusted proxy said otherwise. */
  proto: string;
  /** X-Forwarded-Host to send; '' means the request's own Host. */
  forwardedHost: string;
}

const origin: RequestOrigin = { client: '', hop: '', proto: '', forwardedHost: '' };

/** The peers whose forwarded headers are believed: a set of CIDR blocks. */
export class TrustedProxies {
  private readonly blocks = new BlockList();
  /** Peers repeat (it is the same few proxies); BlockList.check is a native call with an allocation. */
  private readonly verdicts = new Map<string, boolean>();

  private constructor(readonly ranges: readonly string[]) {}

  /**
   * Parses `10.0.0.0/8,127.0.0.1/32,::1` (a bare address means that one address). Throws an Error
   * naming the first entry that is neither.
   */
  static parse(list: string | readonly string[]): TrustedProxies {
    const entries = (typeof list === 'string' ? list.split(',') : list.flatMap((item) => item.split(',')))
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    if (entries.length === 0) throw new Error('--trust-proxy needs at least one address or CIDR block (e.g. 127.0.0.1/32)');
    const trusted = new TrustedProxies(entries);
    for (const entry of entries) {
      const slash = entry.indexOf('/');
      const address = slash === -1 ? entry : entry.slice(0, slash);
      const family = isIP(address);
      const max = family === 4 ? 32 : 128;
      const prefixText = slash === -1 ? String(max) : entry.slice(slash + 1);
      const prefix = /^[0-9]{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
      if (family === 0 || prefix < 0 || prefix > max) {
        throw new Error(`--trust-proxy: "${entry}" is not an IP address or CIDR block (e.g. 10.0.0.0/8, 127.0.0.1/32, ::1/128)`);
      }
      trusted.blocks.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
    }
    return trusted;
  }

  /** Whether `address` (plain IPv4 or IPv6 text) is one of the trusted proxies. */
  trusts(address: string): boolean {
    let verdict = this.verdicts.get(address);
    if (verdict === undefined) {
      const family = isIP(address);
      verdict = family !== 0 && this.blocks.check(address, family === 4 ? 'ipv4' : 'ipv6');
      if (this.verdicts.size >= 4096) this.verdicts.clear();
      this.verdicts.set(address, verdict);
    }
    return verdict;
  }

  /** Fills `origin` from a trusted peer's PROXY v2 header and forwarded headers. */
  believe(source: OriginSource, fields: readonly string[], into: RequestOrigin): void {
    const proxied = source.proxiedAddress;
    if (proxied !== '') {
      const address = plainAddress(proxied);
      into.client = address;
      into.hop = address;
      if (!this.trusts(address)) return;
    }
    const chain = allValues(fields, 'x-forwarded-for');
    if (chain !== '') into.client = this.clientFromChain(chain, into.client);
    const proto = firstValue(fieldValue(fields, 'x-forwarded-proto') ?? '').toLowerCase();
    if (proto === 'https' || proto === 'http') into.proto = proto;
    const host = firstValue(fieldValue(fields, 'x-forwarded-host') ?? '');
    if (host !== '') into.forwardedHost = host;
  }

  /** The rightmost untrusted address of an X-Forwarded-For chain sent by a trusted proxy (`sender`: who sent it). */
  clientFromChain(chain: string, sender: string): string {
    let client = sender;
    let end = chain.length;
    while (end > 0) {
      const comma = chain.lastIndexOf(',', end - 1);
      const address = plainAddress(chain.slice(comma + 1, end).trim());
      if (isIP(address) === 0) return client;
      client = address;
      if (!this.trusts(address)) return client;
      end = comma === -1 ? 0 : comma;
    }
    return client;
  }
}

/**
 * The one place a request's client address comes from (read it synchronously: one object is shared).
 * `ownProto` is the scheme the edge itself is reached by.
 */
export function requestOrigin(source: OriginSource, fields: readonly string[], proxies: TrustedProxies | null, ownProto: string): RequestOrigin {
  const peer = source.remoteAddress;
  origin.client = peer;
  origin.hop = peer;
  origin.proto = ownProto;
  origin.forwardedHost = '';
  if (proxies !== null && proxies.trusts(peer)) proxies.believe(source, fields, origin);
  return origin;
}

/** Every value of a field, joined as one list (X-Forwarded-For may come in several lines). */
function allValues(fields: readonly string[], lowerCaseName: string): string {
  let joined = '';
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === lowerCaseName.length && name.toLowerCase() === lowerCaseName) joined = joined === '' ? fields[i + 1]! : `${joined}, ${fields[i + 1]!}`;
  }
  return joined;
}

function firstValue(header: string): string {
  const comma = header.indexOf(',');
  return (comma === -1 ? header : header.slice(0, comma)).trim();
}

/** `1.2.3.4`, `1.2.3.4:5678`, `[2001:db8::1]:443`, `::ffff:1.2.3.4` -> the address alone, as the edge prints it. */
export function plainAddress(text: string): string {
  let address = text;
  if (address.startsWith('[')) {
    const close = address.indexOf(']');
    address = close === -1 ? address : address.slice(1, close);
  } else if (address.indexOf(':') !== -1 && address.indexOf(':') === address.lastIndexOf(':') && address.indexOf('.') !== -1) {
    address = address.slice(0, address.indexOf(':'));
  }
  if (address.length > 7 && address.slice(0, 7).toLowerCase() === '::ffff:' && isIP(address.slice(7)) === 4) address = address.slice(7);
  return address;
}

/** The TCP peer's address as the edge prints it (IPv4-mapped IPv6 as plain IPv4). */
export function peerAddress(remote: string | undefined): string {
  if (remote === undefined) return '';
  return remote.length > 7 && remote.charCodeAt(0) === 58 /* : */ ? plainAddress(remote) : remote;
}
