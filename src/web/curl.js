// "Copy as curl": a shell command that sends a captured request again, byte for byte, either to the
// tunnel's public URL (through the edge, as the original came) or straight to the local target. A plain
// function of an exchange as both APIs give it (src/exchange-json.ts), so the inspector's page, the
// dashboard and the inspector's own API (GET /api/requests/:id/curl, src/inspector/curl.ts) give the
// same command for the same request.
//
// Quoting is for POSIX sh and bash: plain words stay bare, text goes in single quotes, anything with
// control characters or bytes that are not UTF-8 in bash's $'...' with \xHH escapes. A body holding a
// NUL byte cannot be a shell argument at all, so it is written to a file first with printf's octal
// escapes and sent with --data-binary @file.
import { bytesOf } from './exchange-format.js';

/** Never copied: curl computes them, or they describe the edge↔client hop, or the edge sets them anew. */
const SKIPPED = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'expect', 'upgrade', 'te', 'trailer']);
const SET_BY_EDGE = /^x-forwarded-/;

const BARE = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** One shell word for `text` (printed as UTF-8). */
export function shellQuote(text) {
  if (text !== '' && BARE.test(text)) return text;
  // Printable text (tab and newline included) fits single quotes; only ' itself needs care.
  if (!/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text)) return `'${text.replaceAll("'", `'\\''`)}'`;
  return ansiQuote(new TextEncoder().encode(text));
}

/** bash's $'...' for raw bytes: printable ASCII as is (\\ and \' escaped), everything else \xHH. */
export function ansiQuote(bytes) {
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
function printfFormat(bytes) {
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

/**
 * The command for `exchange` ({id, method, path, request: {headers, body, body_encoding, body_size,
 * truncated}}) against `base` (the public URL, or http://localhost:PORT): {command, target, url,
 * truncated}, `truncated` when the body sent is the capture cut at its limit.
 */
export function curlCommand(exchange, target, base) {
  const url = `${base.replace(/\/+$/, '')}${exchange.path}`;
  const request = exchange.request;
  const lines = [];
  /** One option (with its value) per line. */
  const args = ['curl -sS -g --path-as-is'];
  const body = bytesOf(request);
  const hasBody = body.length > 0;
  if (exchange.method === 'HEAD') args[0] += ' --head';
  else if (exchange.method !== 'GET' || hasBody) args[0] += ` -X ${shellQuote(exchange.method)}`;
  args[0] += ` ${shellQuote(url)}`;
  const present = new Set();
  for (const [name, value] of request.headers) {
    const lower = name.toLowerCase();
    present.add(lower);
    if (SKIPPED.has(lower) || (target === 'public' && SET_BY_EDGE.test(lower))) continue;
    // "Name;" is curl's way of sending a header with an empty value.
    args.push(`-H ${shellQuote(value === '' ? `${name};` : `${name}: ${value}`)}`);
  }
  // curl adds these of its own when the request has none: an empty -H removes them.
  for (const name of ['User-Agent', 'Accept']) if (!present.has(name.toLowerCase())) args.push(`-H '${name}:'`);
  if (hasBody && !present.has('content-type')) args.push("-H 'Content-Type:'");
  if (hasBody) {
    if (body.includes(0)) {
      const file = `burrow-${exchange.id}.body`;
      lines.push(`printf ${printfFormat(body)} > ${file}`);
      args.push(`--data-binary @${file}`);
    } else {
      args.push(`--data-binary ${request.body_encoding === 'base64' ? ansiQuote(body) : shellQuote(request.body)}`);
    }
  }
  const truncated = request.truncated === true;
  if (truncated) lines.unshift(`# The captured body was cut at ${body.length} of ${request.body_size} bytes: this sends the first part only.`);
  lines.push(args.join(' \\\n  '));
  return { command: lines.join('\n'), target, url, truncated };
}
