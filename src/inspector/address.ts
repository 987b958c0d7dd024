/**
 * `--inspect ADDR`: "PORT", "HOST:PORT" or "[::1]:PORT", where HOST is a loopback address. The inspector
 * shows every captured body, so it never listens where another machine could reach it.
 */

export const DEFAULT_INSPECT_HOST = '127.0.0.1';
export const DEFAULT_INSPECT_PORT = 4040;
/** How many ports after the default are tried when it is taken (4040, 4041, ... 4059). */
export const DEFAULT_PORT_TRIES = 20;

export interface InspectAddress {
  /** The address to bind: an IP literal. */
  host: string;
  /** 0 picks any free port. */
  port: number;
}

/** Parses ADDR; returns the reason when it is not a loopback address and port. */
export function parseInspectAddress(text: string): InspectAddress | string {
  const value = text.trim();
  let host = DEFAULT_INSPECT_HOST;
  let portText = value;
  const bracketed = /^\[([^\]]+)\]:(.*)$/.exec(value);
  if (bracketed !== null) {
    host = bracketed[1]!;
    portText = bracketed[2]!;
  } else if (value.includes(':')) {
    const colon = value.lastIndexOf(':');
    host = value.slice(0, colon);
    portText = value.slice(colon + 1);
    if (host.includes(':')) return `"${text}": write an IPv6 address in brackets, e.g. [::1]:4040`;
  }
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535) return `"${text}": the port must be a number from 0 to 65535`;
  const loopback = loopbackLiteral(host);
  if (loopback === null) return `"${text}": the inspector listens on a loopback address only (localhost, 127.0.0.1, [::1])`;
  return { host: loopback, port: Number(portText) };
}

/** The IP literal to bind for a loopback host name, or null when it is not loopback. */
export function loopbackLiteral(host: string): string | null {
  const name = host.toLowerCase();
  if (name === 'localhost' || name === '') return DEFAULT_INSPECT_HOST;
  if (name === '::1' || name === '0:0:0:0:0:0:0:1') return '::1';
  const octets = /^127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$/.exec(name);
  if (octets !== null && octets.slice(1).every((octet) => Number(octet) <= 255)) return name;
  return null;
}

/** How a browser reaches a bound address: IPv6 literals in brackets. */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
