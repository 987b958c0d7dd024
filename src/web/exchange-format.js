// How a captured exchange reads on a page: status classes, times, sizes, and bodies (JSON pretty-printed,
// binary as a hex dump). Shared by the local inspector's page (served at /exchange-format.js) and the
// web dashboard (/dashboard/exchange-format.js); plain functions of the JSON both APIs return
// (src/exchange-json.ts), no DOM. Everything they return is text for textContent.

export function statusClass(item) {
  if (item.error !== null && item.status === 0) return 'serr';
  const s = item.status;
  if (s === 101) return 's2xx';
  if (s >= 200 && s < 300) return 's2xx';
  if (s >= 300 && s < 400) return 's3xx';
  if (s >= 400 && s < 500) return 's4xx';
  return s >= 500 ? 's5xx' : 'serr';
}

export function statusText(item) {
  return item.status === 0 ? 'ERR' : String(item.status);
}

export function latencyText(ms) {
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 10000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

export function timeText(iso) {
  const date = new Date(iso);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
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

/** What a body pane shows: pretty JSON, the text, or a hex dump; `raw` shows the text exactly as received. */
export function renderBody(part, headers, raw = false) {
  if (part.body_encoding === 'base64') return { text: hexDump(base64Bytes(part.body)), kind: 'binary, hex dump' };
  if (raw) return { text: part.body, kind: 'raw text' };
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
  const kept = part.truncated ? `, first ${sizeText(part.body_encoding === 'base64' ? Math.floor((part.body.length * 3) / 4) : new TextEncoder().encode(part.body).length)} kept` : '';
  return `(${sizeText(part.body_size)}, ${kind}${kept})`;
}
