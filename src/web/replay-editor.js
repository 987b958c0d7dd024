// Replay with edits: a form with the captured method, path, headers and body, of which only what the user
// changed is sent (both replay APIs take the same edits: method, path, headers with null removing one,
// body). A body left as it is stays the captured bytes: a binary body is never turned into text on the
// way. A binary body is edited as hex (two digits a byte) and sent as base64 when changed.
import { h } from './elements.js';
import { base64Of, bytesOf, hexLines, isBinary, parseHex, sizeText } from './exchange-format.js';

/** Recomputed by the edge for the body sent, whatever the capture said: not offered for editing. */
const RECOMPUTED = new Set(['content-length', 'transfer-encoding']);

/** What the editor starts from: the captured request as the fields show it. */
export function editorValues(exchange) {
  const request = exchange.request;
  return {
    method: exchange.method,
    path: exchange.path,
    headers: request.headers.filter(([name]) => !RECOMPUTED.has(name.toLowerCase())).map(([name, value]) => `${name}: ${value}`).join('\n'),
    body: isBinary(request) ? hexLines(bytesOf(request)) : request.body,
  };
}

/**
 * The edits between `exchange`'s request and what the fields hold now (`values`, as editorValues gives
 * them): only what changed. Throws an Error whose message says which field is wrong.
 */
export function editsFrom(exchange, values) {
  const request = exchange.request;
  const start = editorValues(exchange);
  const edits = {};
  const method = values.method.trim().toUpperCase();
  if (method !== '' && method !== exchange.method) edits.method = method;
  const path = values.path.trim();
  if (path !== '' && path !== exchange.path) edits.path = path;
  const original = new Map(request.headers.map(([name, value]) => [name.toLowerCase(), value]));
  const headers = {};
  const kept = new Set();
  for (const line of values.headers.split('\n')) {
    if (line.trim() === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`Headers: "${line}" is not "Name: value".`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    kept.add(name);
    if (original.get(name) !== value) headers[name] = value;
  }
  // A deleted line removes the header (null in the replay APIs).
  for (const name of original.keys()) if (!kept.has(name) && !RECOMPUTED.has(name)) headers[name] = null;
  if (Object.keys(headers).length > 0) edits.headers = headers;
  if (values.body !== start.body) {
    if (isBinary(request)) {
      let bytes;
      try {
        bytes = parseHex(values.body);
      } catch (error) {
        throw new Error(`Body: ${error.message}`);
      }
      edits.body = base64Of(bytes);
      edits.body_encoding = 'base64';
    } else {
      edits.body = values.body;
    }
  }
  return edits;
}

function bodyNote(request) {
  const cut = request.truncated ? ` Cut at the capture limit: these are its first ${sizeText(bytesOf(request).length)} of ${sizeText(request.body_size)}; sent unchanged, the replay asks before sending the cut body.` : '';
  if (isBinary(request)) return `Binary: edit it as hex, two digits a byte. Sent only if changed, else the captured bytes go as they are.${cut}`;
  return `Sent only if changed.${cut}`;
}

/**
 * The form; `onSend(edits)` when submitted with valid edits. Its fields exist only while it is open, so a
 * closed editor leaves no hidden "Method" or "Path" field beside the page's own filters.
 */
export function replayEditor({ onSend }) {
  const element = h('form.editor', { id: 'editor', 'aria-label': 'Replay with edits', hidden: true, novalidate: true });
  let exchange = null;
  let fields = null;

  function build(target) {
    const request = target.request;
    const values = editorValues(target);
    const built = {
      method: h('input', { id: 'e-method', name: 'method', size: '8', spellcheck: 'false', autocomplete: 'off', value: values.method }),
      path: h('input', { id: 'e-path', name: 'path', spellcheck: 'false', autocomplete: 'off', value: values.path }),
      headers: h('textarea', { id: 'e-headers', name: 'headers', rows: '8', spellcheck: 'false', 'aria-describedby': 'e-headers-note' }),
      body: h(`textarea${isBinary(request) ? '.hex' : ''}`, { id: 'e-body', name: 'body', rows: '8', spellcheck: 'false', 'aria-describedby': 'e-body-note' }),
      problem: h('p.error', { id: 'e-error', role: 'alert', hidden: true }),
      send: h('button', { id: 'e-send', type: 'submit' }, 'Send replay'),
    };
    built.headers.value = values.headers;
    built.body.value = values.body;
    element.replaceChildren(
      h('h3', {}, 'Replay with edits'),
      h('div.editor-line', {},
        h('div.field', {}, h('label', { for: 'e-method' }, 'Method'), built.method),
        h('div.field.grow', {}, h('label', { for: 'e-path' }, 'Path'), built.path)),
      h('div.field', {},
        h('label', { for: 'e-headers' }, 'Headers'),
        h('small', { id: 'e-headers-note' }, 'One "Name: value" a line; changed and new ones are sent, a deleted line removes the header. Content-Length is recomputed.'),
        built.headers),
      h('div.field', {}, h('label', { for: 'e-body' }, 'Body'), h('small', { id: 'e-body-note' }, bodyNote(request)), built.body),
      built.problem,
      h('div.editor-actions', {}, built.send, h('button', { id: 'e-cancel', type: 'button', on: { click: () => close() } }, 'Cancel')));
    return built;
  }

  element.addEventListener('submit', (event) => {
    event.preventDefault();
    if (exchange === null) return;
    let edits;
    try {
      edits = editsFrom(exchange, { method: fields.method.value, path: fields.path.value, headers: fields.headers.value, body: fields.body.value });
    } catch (error) {
      fields.problem.textContent = error.message;
      fields.problem.hidden = false;
      return;
    }
    fields.problem.hidden = true;
    onSend(edits);
  });
  element.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') {
      event.preventDefault();
      event.stopPropagation();
      close();
    }
  });

  function open(target) {
    exchange = target;
    fields = build(target);
    element.hidden = false;
    fields.method.focus();
  }

  function close() {
    element.hidden = true;
    element.replaceChildren();
    exchange = null;
    fields = null;
  }

  return {
    element,
    open,
    close,
    get isOpen() {
      return !element.hidden;
    },
    /** Disables the send button while a replay is on its way. */
    busy(on) {
      if (fields !== null) fields.send.disabled = on;
    },
  };
}
