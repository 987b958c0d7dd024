/**
 * "Copy as curl": a shell command that sends a captured request again, byte for byte, either to the
 * tunnel's public URL (through the edge, as the original came) or straight to the local target.
 *
 * Quoting is for POSIX sh and bash: plain words stay bare, text goes in single quotes, anything with
 * control characters or bytes that are not UTF-8 in bash's $'...' with \xHH escapes. A body holding a
 * NUL byte cannot be a shell argument at all, so it is written to a file first with printf's octal
 * escapes and sent with --data-binary @file.
 */
import type { Exchange } from '../client/exchange.js';

export type CurlTarget = 'public' | 'local';

/** Never copied: curl computes them, or they describe the edge↔client hop, or the edge sets them anew. */
const SKIPPED = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'expect', 'upgrade', 'te', 'trailer']);
const SET_BY_EDGE = /^x-forwarded-/;

const BARE = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** One shell word for `text` (a JS string: UTF-8 when printed). */
export function shellQuote(text: string): string {
  if (text !== '' && BARE.test(text)) return text;
  // Printable text (tab and newline included) fits single quotes; only ' itself needs care.
  if (!/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text)) return `'${text.replaceAll("'", `'\\''`)}'`;
  return ansiQuote(Buffer.from(text, 'utf8'));
}

/** bash's $'...' for raw bytes: printable ASCII as is (\\ and \' escaped), everything else \xHH. */
export function ansiQuote(bytes: Uint8Array): string {
  let out = "$'";
  for (const byte of bytes) {
    if (byte === 0x5c) out += '\\\\';
    else if (byte === 0x27) out += "\\'";
    else if (byte >= 0x20 && byte < 0x7f) out += String.fromCharCode(byte);
    else out += `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `${out}'`;
}

/** printf's format string that writes exactly `bytes` (octal escapes; % doubled). */
function printfFormat(bytes: Uint8Array): string {
  let out = "'";
  for (const byte of bytes) {
    if (byte === 0x25) out += '%%';
    else if (byte === 0x5c) out += '\\\\';
    else if (byte === 0x27) out += "'\\''";
    else if (byte >= 0x20 && byte < 0x7f) out += String.fromCharCode(byte);
    else out += `\\${byte.toString(8).padStart(3, '0')}`;
  }
  return `${out}'`;
}

export interface CurlCommand {
  command: string;
  target: CurlTarget;
  url: string;
  /** The body sent is the captured one cut at the capture limit. */
  truncated: boolean;
}

/** The command for `exchange` against `base` (the public URL, or http://localhost:PORT). */
export function curlCommand(exchange: Exchange, target: CurlTarget, base: string): CurlCommand {
  const url = `${base.replace(/\/+$/, '')}${exchange.path}`;
  const lines: string[] = [];
  /** One option (with its value) per line. */
  const args: string[] = ['curl -sS -g --path-as-is'];
  const body = exchange.requestBody;
  const hasBody = body !== null && body.byteLength > 0;
  if (exchange.method === 'HEAD') args[0] += ' --head';
  else if (exchange.method !== 'GET' || hasBody) args[0] += ` -X ${shellQuote(exchange.method)}`;
  args[0] += ` ${shellQuote(url)}`;
  const headers = exchange.requestHeaders;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i]!.toLowerCase();
    if (SKIPPED.has(name) || (target === 'public' && SET_BY_EDGE.test(name))) continue;
    // "Name;" is curl's way of sending a header with an empty value.
    args.push(`-H ${shellQuote(headers[i + 1] === '' ? `${headers[i]};` : `${headers[i]}: ${headers[i + 1]}`)}`);
  }
  // curl adds these of its own when the request has none: an empty -H removes them.
  const present = new Set<string>();
  for (let i = 0; i < headers.length; i += 2) present.add(headers[i]!.toLowerCase());
  for (const name of ['User-Agent', 'Accept']) if (!present.has(name.toLowerCase())) args.push(`-H '${name}:'`);
  if (hasBody && !present.has('content-type')) args.push("-H 'Content-Type:'");
  if (hasBody) {
    if (body.includes(0)) {
      const file = `burrow-${exchange.id}.body`;
      lines.push(`printf ${printfFormat(body)} > ${file}`);
      args.push(`--data-binary @${file}`);
    } else {
      const text = body.toString('utf8');
      const exact = Buffer.byteLength(text) === body.byteLength && Buffer.from(text, 'utf8').equals(body);
      args.push(`--data-binary ${exact ? shellQuote(text) : ansiQuote(body)}`);
    }
  }
  const truncated = exchange.requestTruncated;
  if (truncated) lines.unshift(`# The captured body was cut at ${body?.byteLength ?? 0} of ${exchange.requestBodySize} bytes: this sends the first part only.`);
  lines.push(args.join(' \\\n  '));
  return { command: lines.join('\n'), target, url, truncated };
}
