// How a captured exchange reads on a page: status classes, times, sizes, and bodies (JSON pretty-printed,
// raw, or as a hex dump), and the bytes behind a body for the editor, curl and HAR. Shared by the local
// inspector's page (served at /exchange-format.js) and the web dashboard (/dashboard/exchange-format.js);
// plain functions of the JSON both APIs return (src/exchange-json.ts), no DOM, so Node runs them too.
// Everything they return for display is text for textContent.

/**
 * A TCP or TLS passthrough connection's record (docs/tcp.md): method TCP or TLS, no HTTP status, the
 * client's address:port as its path, the bytes each way as its body sizes and how it ended as its error.
 */
export function isConnection(item) {
  return item.status === 0 && (item.method === 'TCP' || item.method === 'TLS');
}

const CONNECTION_ENDS = {
  CLIENT_CLOSED: ['client dropped', 'the public client reset or dropped the connection'],
  LOCAL_UNREACHABLE: ['local unreachable', 'the tunnel client could not reach, or lost, the local server'],
  TUNNEL_CLOSED: ['tunnel closed', 'the tunnel went away while the connection was open'],
  ADDRESS_FORBIDDEN: ['refused', "refused at once: the client's address is not allowed (--allow-cidr/--deny-cidr)"],
  TUNNEL_BUSY: ['refused', "refused at once: the tunnel's connections were at their cap"],
};

/** How a connection ended: a short word for the list and a sentence for the detail. */
export function connectionEnd(item) {
  if (item.error === null || item.error === undefined) return { short: 'closed', text: 'closed by both sides' };
  const [short, text] = CONNECTION_ENDS[item.error] ?? ['ended', item.error];
  return { short, text: `${item.error}: ${text}` };
}

export function statusClass(item) {
  if (isConnection(item)) return item.error === null || item.error === undefined ? 's2xx' : 'serr';
  if (item.error !== null && item.status === 0) return 'serr';
  const s = item.status;
  if (s === 101) return 's2xx';
  if (s >= 200 && s < 300) return 's2xx';
  if (s >= 300 && s < 400) return 's3xx';
  if (s >= 400 && s < 500) return 's4xx';
  return s >= 500 ? 's5xx' : 'serr';
}

export function statusText(item) {
  if (isConnection(item)) return connectionEnd(item).short;
  return item.status === 0 ? 'ERR' : String(item.status);
}

export function latencyText(ms) {
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 10000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

export function timeText(iso) {
  const date = new Date(iso);
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

/** The time of day for today's exchanges; the date too for older ones (the edge keeps days of them). */
export function whenText(iso, now = new Date()) {
  const date = new Date(iso);
  if (date.toDateString() === now.toDateString()) return timeText(iso);
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

export function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export function headerValue(headers, name) {
  for (const [key, value] of headers) if (key.toLowerCase() === name) return value;
  return '';
}

export function base64Bytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function base64Of(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** The bytes of a body (or a WebSocket message): `{body, body_encoding}` or `{data, data_encoding}`. */
export function bytesOf(part) {
  const text = part.body ?? part.data;
  const encoding = part.body_encoding ?? part.data_encoding;
  return encoding === 'base64' ? base64Bytes(text) : new TextEncoder().encode(text);
}

/** A body the editor shows as hex: not text (the API sends it as base64). */
export function isBinary(part) {
  return part.body_encoding === 'base64';
}

/** Bytes as the editor's hex: two digits a byte, 16 bytes a line. */
export function hexLines(bytes) {
  const lines = [];
  for (let offset = 0; offset < bytes.length; offset += 16) {
    lines.push(Array.from(bytes.subarray(offset, offset + 16), (byte) => byte.toString(16).padStart(2, '0')).join(' '));
  }
  return lines.join('\n');
}

/** The editor's hex back to bytes: pairs of hex digits, any white space between them. Throws on anything else. */
export function parseHex(text) {
  const digits = text.replace(/\s+/g, '');
  const bad = /[^0-9a-fA-F]/.exec(digits);
  if (bad !== null) throw new Error(`"${bad[0]}" is not a hex digit: write the body as pairs of hex digits (00-ff).`);
  if (digits.length % 2 !== 0) throw new Error(`${digits.length} hex digits: a byte is two of them, so the count must be even.`);
  const bytes = new Uint8Array(digits.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(digits.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

const HEX_LIMIT = 64 * 1024;

export function hexDump(bytes) {
  const lines = [];
  const end = Math.min(bytes.length, HEX_LIMIT);
  for (let offset = 0; offset < end; offset += 16) {
    let hex = '';
    let ascii = '';
    for (let i = 0; i < 16; i++) {
      if (offset + i < end) {
        const byte = bytes[offset + i];
        hex += byte.toString(16).padStart(2, '0') + (i === 7 ? '  ' : ' ');
        ascii += byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : '.';
      } else {
        hex += i === 7 ? '    ' : '   ';
      }
    }
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${hex} |${ascii}|`);
  }
  if (bytes.length > end) lines.push(`… ${bytes.length - end} more bytes`);
  return lines.join('\n');
}

/**
 * What a body pane shows in `mode`: 'pretty' (JSON pretty-printed, else the text), 'raw' (the text exactly
 * as received) or 'hex' (a hex dump of the bytes). A binary body is a hex dump in every mode.
 */
export function renderBody(part, headers, mode = 'pretty') {
  if (part.body_encoding === 'base64') return { text: hexDump(base64Bytes(part.body)), kind: 'binary, hex dump' };
  if (mode === 'hex') return { text: hexDump(new TextEncoder().encode(part.body)), kind: 'hex dump' };
  if (mode === 'raw') return { text: part.body, kind: 'raw text' };
  const type = headerValue(headers, 'content-type').toLowerCase();
  const trimmed = part.body.trimStart();
  if (!part.truncated && (type.includes('json') || trimmed.startsWith('{') || trimmed.startsWith('['))) {
    try {
      return { text: JSON.stringify(JSON.parse(part.body), null, 2), kind: 'JSON' };
    } catch {
      // Not JSON after all: shown as text.
    }
  }
  return { text: part.body, kind: 'text' };
}

export function bodyInfo(part, kind) {
  if (part.body_size === 0) return '';
  const kept = part.truncated ? `, first ${sizeText(bytesOf(part).length)} kept` : '';
  return `(${sizeText(part.body_size)}, ${kind}${kept})`;
}

/** A WebSocket message as text: a binary message is a hex dump whatever its bytes, text as sent. */
export function messageText(message) {
  return message.binary ? hexDump(bytesOf(message)) : message.data;
}
