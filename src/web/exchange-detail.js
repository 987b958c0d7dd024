// One exchange in detail, the same on both pages: method, path and status; the facts (id, time, timing,
// client address, replay of, held webhook, error, and what the page's source adds: local port, token,
// history); Replay, Replay with edits, Copy as curl, HAR; a truncated capture's replay refused first with
// the choice to send the cut body anyway; the replay's result; request and response headers and bodies
// (Pretty, Raw, Hex); a WebSocket's messages instead of bodies; a TCP or TLS connection's record as its
// facts only (start, duration, client, bytes each way, how it ended). Everything captured is text.
//
// The page gives its data source as an adapter:
//   timing         {field: 'latency_ms' | 'duration_ms', label}: the timing the source measures
//   replay(exchange, edits) → the replayed exchange (+ `truncated`); rejects with an Error carrying `code`
//   load(id)       → an exchange, to follow a WebSocket that is still open
//   curlTargets    ['public'] or ['public', 'local']: where "Copy as curl" may send
//   curlBase(exchange, target) → the URL base; throws an Error saying why there is none
//   har(exchange)  → {href, filename}: what the HAR link downloads
//   link(id, text) → an element that opens exchange `id` on this page
//   replayed(result, original) (optional): told after each replay
//   notify(text)   a short message (curl copied)
//   webSocketNote  a line shown under a WebSocket's heading, or null
import { clear, copyText, h } from './elements.js';
import { curlCommand } from './curl.js';
import { bodyInfo, connectionEnd, isConnection, latencyText, renderBody, sizeText, statusClass, statusText, whenText } from './exchange-format.js';
import { deliveryText, rejectedText } from './exchange-list.js';
import { replayEditor } from './replay-editor.js';
import { webSocketPane } from './websocket-view.js';

const BODY_MODES = [
  ['pretty', 'Pretty', 'JSON pretty-printed, binary as a hex dump'],
  ['raw', 'Raw', 'The body exactly as received (binary as a hex dump)'],
  ['hex', 'Hex', 'Every byte as a hex dump'],
];

const CURL_BUTTONS = {
  public: ['curl-public', 'Copy as curl', 'A curl command that sends this request to the public URL, through the edge'],
  local: ['curl-local', 'Copy as curl (local)', 'A curl command that sends this request straight to the local server'],
};

function headerRows(headers) {
  return headers.map(([name, value]) => h('tr', {}, h('td', {}, name), h('td', {}, value)));
}

export function exchangeDetail(adapter) {
  let current = null;
  let bodyMode = 'pretty';
  let pendingTruncated = null;
  let wsTimer = null;

  const method = h('span.method', { id: 'd-method' });
  const path = h('span.path', { id: 'd-path' });
  const status = h('span.status', { id: 'd-status' });
  // The heading's accessible name is "METHOD PATH" exactly, as the dashboard's has always been; the
  // status follows it.
  const heading = h('h2', { id: 'd-heading', tabindex: '-1' }, method, ' ', path);
  const summary = h('div.summary', { id: 'd-summary' }, heading, ' ', status);
  const replayButton = h('button', { id: 'replay', type: 'button', title: 'Send this request to the local server again (r)', on: { click: () => void replay({}) } }, 'Replay');
  const editButton = h('button', { id: 'replay-edit', type: 'button', title: 'Edit method, path, headers or body, then replay (e)', on: { click: () => openEditor() } }, 'Replay with edits');
  const curlButtons = adapter.curlTargets.map((target) => {
    const [id, text, title] = CURL_BUTTONS[target];
    return h('button.http-only', { id, type: 'button', title, on: { click: () => void showCurl(target) } }, text);
  });
  const harLink = h('a.button', { id: 'har-one', href: '#', download: '', title: 'Download this request as a HAR 1.2 file' }, 'HAR');
  harLink.addEventListener('click', () => {
    const { href, filename } = adapter.har(current);
    harLink.href = href;
    harLink.download = filename;
  });
  const facts = h('dl.facts', { id: 'd-facts' });

  const truncatedMessage = h('p', { id: 'truncated-message' });
  const sendCut = h('button', { id: 'replay-truncated', type: 'button', on: { click: () => void replay({ ...pendingTruncated, allow_truncated: true }) } }, 'Replay the cut body anyway');
  const truncated = h('div.banner', { id: 'truncated', role: 'alert', hidden: true },
    truncatedMessage, sendCut,
    h('button', { id: 'truncated-cancel', type: 'button', on: { click: () => { truncated.hidden = true; } } }, 'Cancel'));

  const curlTarget = h('span', { id: 'curl-target' });
  const curlNote = h('span.error-text', { id: 'curl-note', hidden: true }, 'The captured body was cut at the capture limit: this sends only its first part.');
  const curlText = h('pre.body.curl', { id: 'curl-text', tabindex: '0' });
  const curlPane = h('div.curl-pane', { id: 'curl', hidden: true },
    h('p', {}, curlTarget, ' ', curlNote), curlText,
    h('button', { id: 'curl-close', type: 'button', on: { click: () => { curlPane.hidden = true; } } }, 'Close'));

  const editor = replayEditor({ onSend: (edits) => void replay(edits) });
  const result = h('div.replay-result', { id: 'replay-result', 'aria-live': 'polite', hidden: true });
  const webSocket = webSocketPane({ note: adapter.webSocketNote ?? null });

  const modeButtons = BODY_MODES.map(([mode, text, title]) =>
    h('button.body-mode', { type: 'button', 'data-mode': mode, 'aria-pressed': String(mode === bodyMode), title, on: { click: () => setBodyMode(mode) } }, text));
  const requestHeaders = h('table.headers', { id: 'req-headers' });
  const responseHeaders = h('table.headers', { id: 'res-headers' });
  const requestBody = h('pre.body.http-only', { id: 'req-body', tabindex: '0' });
  const responseBody = h('pre.body.http-only', { id: 'res-body', tabindex: '0' });
  const requestInfo = h('small', { id: 'req-body-info' });
  const responseInfo = h('small', { id: 'res-body-info' });
  const responseStatus = h('span.status', { id: 'res-status' });

  // A TCP or TLS connection's record has no headers or bodies to show: the facts say it all.
  const panes = h('div.panes', {},
    h('article.pane', { 'aria-label': 'Request' },
      h('h3', {}, 'Request'),
      h('h4', {}, 'Headers'), requestHeaders,
      h('h4.http-only', {}, 'Body ', requestInfo), requestBody),
    h('article.pane', { 'aria-label': 'Response' },
      h('h3', {}, 'Response ', responseStatus),
      h('h4', {}, 'Headers'), responseHeaders,
      h('h4.http-only', {}, 'Body ', responseInfo), responseBody));

  const element = h('div.exchange-detail', {},
    h('div.detail-head', {},
      summary,
      h('div.actions', {}, replayButton, editButton, curlButtons, harLink),
      facts),
    truncated,
    curlPane,
    editor.element,
    result,
    webSocket.element,
    h('div.body-modes.http-only', { role: 'group', 'aria-label': 'Body view' }, modeButtons),
    panes);

  function fact(id, label, ...value) {
    return [h('dt', { id: `${id}-label` }, label), h('dd', { id }, ...value)];
  }

  /** A connection's facts: when it started, how long it lasted, the bytes each way, how it ended. */
  function connectionFacts(x) {
    return [
      fact('d-id', 'Id', x.id),
      fact('d-time', 'Started', `${whenText(x.received_at)}  (${x.received_at})`),
      fact('d-latency', 'Duration', latencyText(x.duration_ms ?? x.latency_ms ?? 0)),
      fact('d-client', 'Client', x.path),
      fact('d-bytes-in', 'Bytes from the client', sizeText(x.request.body_size)),
      fact('d-bytes-out', 'Bytes to the client', sizeText(x.response.body_size)),
      fact('d-ended', 'Ended', connectionEnd(x).text),
      x.token_id === undefined ? null : fact('d-token', 'Token', x.token_id ?? '—'),
    ];
  }

  function showFacts() {
    const x = current;
    if (isConnection(x)) {
      clear(facts).append(...connectionFacts(x).filter((pair) => pair !== null).flat());
      if (x.error) facts.querySelector('#d-ended')?.classList.add('error-text');
      return;
    }
    const delivery = x.delivery ? deliveryText(x.delivery) : x.event_id ? `held webhook, event ${x.event_id}` : null;
    clear(facts).append(...[
      fact('d-id', 'Id', x.id),
      fact('d-time', 'Received', `${whenText(x.received_at)}  (${x.received_at})`),
      x.kind === 'websocket' ? null : fact('d-latency', adapter.timing.label, latencyText(x[adapter.timing.field] ?? 0)),
      x.port === undefined ? null : fact('d-port', 'Local port', String(x.port)),
      fact('d-client', 'Client address', x.client_address || '—'),
      x.token_id === undefined ? null : fact('d-token', 'Token', x.token_id ?? '—'),
      x.source === 'edge' ? fact('d-source', 'Source', "loaded from the edge's capture history") : null,
      x.replay_of ? fact('d-replay-of', 'Replay of', adapter.link(x.replay_of, x.replay_of)) : null,
      delivery === null ? null : fact('d-delivery', 'Held webhook', delivery),
      x.rejected ? fact('d-rejected', 'Rejected', `${x.rejected}: ${rejectedText(x.rejected)}`) : null,
      x.error ? fact('d-error', 'Error', x.error) : null,
    ].filter((pair) => pair !== null).flat());
    facts.querySelector('#d-error')?.classList.add('error-text');
    facts.querySelector('#d-rejected')?.classList.add('error-text');
  }

  function showBodies() {
    for (const button of modeButtons) button.setAttribute('aria-pressed', String(button.dataset.mode === bodyMode));
    const request = renderBody(current.request, current.request.headers, bodyMode);
    requestBody.textContent = request.text;
    requestInfo.textContent = bodyInfo(current.request, request.kind);
    const response = renderBody(current.response, current.response.headers, bodyMode);
    responseBody.textContent = response.text;
    responseInfo.textContent = bodyInfo(current.response, response.kind);
  }

  function setBodyMode(mode) {
    bodyMode = mode;
    if (current !== null) showBodies();
  }

  function show(exchange) {
    const same = current?.id === exchange.id;
    current = exchange;
    const isWebSocket = (exchange.websocket ?? null) !== null;
    const connection = isConnection(exchange);
    const cls = statusClass(exchange);
    method.textContent = exchange.method;
    path.textContent = exchange.path;
    status.textContent = statusText(exchange);
    status.className = `status ${cls}`;
    responseStatus.textContent = statusText(exchange);
    responseStatus.className = `status ${cls}`;
    showFacts();
    requestHeaders.replaceChildren(h('caption', {}, 'Request headers'), h('tbody', {}, headerRows(exchange.request.headers)));
    responseHeaders.replaceChildren(h('caption', {}, 'Response headers'), h('tbody', {}, headerRows(exchange.response.headers)));
    showBodies();
    // A WebSocket connection cannot be replayed: no replay, no curl, no bodies; its messages instead.
    // Nor a TCP or TLS connection: its bytes are not kept, only counted.
    for (const hidden of element.querySelectorAll('.http-only')) hidden.hidden = isWebSocket || connection;
    replayButton.hidden = isWebSocket || connection;
    editButton.hidden = isWebSocket || connection;
    harLink.hidden = connection;
    panes.hidden = connection;
    webSocket.show(exchange);
    followWebSocket(exchange);
    if (!same) {
      truncated.hidden = true;
      result.hidden = true;
      curlPane.hidden = true;
    }
    if (editor.isOpen) {
      if (isWebSocket || connection) editor.close();
      else if (!same) editor.open(exchange);
    }
  }

  /** An open WebSocket is asked for again every second while it is shown, for its new messages. */
  function followWebSocket(exchange) {
    clearTimeout(wsTimer);
    if (exchange.websocket?.closed_at !== null || exchange.websocket === undefined) return;
    wsTimer = setTimeout(async () => {
      if (current?.id !== exchange.id || !element.isConnected) return;
      const fresh = await adapter.load(exchange.id).catch(() => null);
      if (fresh !== null && current?.id === exchange.id) show(fresh);
    }, 1000);
  }

  function openEditor() {
    if (current === null || current.websocket || isConnection(current)) return;
    editor.open(current);
  }

  function showResult(replayed) {
    const cut = replayed.truncated === true ? ' The body sent was the captured one, cut at the capture limit.' : '';
    clear(result).append(
      h('h3', {}, 'Replay result'),
      h('p', {},
        `${replayed.method} ${replayed.path} → `, h('strong', { class: `status ${statusClass(replayed)}` }, statusText(replayed)),
        ` in ${latencyText(replayed[adapter.timing.field] ?? 0)}`, replayed.error ? ` (${replayed.error})` : '',
        `, recorded as `, adapter.link(replayed.id, replayed.id), '.', cut),
      h('table.headers', {}, h('caption', {}, 'Replay response headers'), h('tbody', {}, headerRows(replayed.response.headers))),
      h('pre.body', { tabindex: '0' }, renderBody(replayed.response, replayed.response.headers, bodyMode).text));
    result.hidden = false;
  }

  function showError(error) {
    clear(result).append(h('h3', {}, 'Replay failed'), h('p.error', { role: 'alert' }, `${error.code ?? 'ERROR'}: ${error.message}`));
    result.hidden = false;
  }

  async function replay(edits) {
    if (current === null || current.websocket || isConnection(current)) return null;
    const original = current;
    const buttons = [replayButton, editButton, sendCut];
    for (const button of buttons) button.disabled = true;
    editor.busy(true);
    try {
      const replayed = await adapter.replay(original, edits);
      truncated.hidden = true;
      pendingTruncated = null;
      editor.close();
      if (current?.id === original.id) showResult(replayed);
      adapter.replayed?.(replayed, original);
      return replayed;
    } catch (error) {
      if (error.code === 'REPLAY_TRUNCATED') {
        // Shown until acted on: the user decides whether the cut body is good enough.
        truncatedMessage.textContent = error.message;
        pendingTruncated = edits;
        truncated.hidden = false;
        sendCut.focus();
      } else {
        showError(error);
      }
      return null;
    } finally {
      for (const button of buttons) button.disabled = false;
      editor.busy(false);
    }
  }

  async function showCurl(target) {
    if (current === null) return;
    let built;
    try {
      built = curlCommand(current, target, adapter.curlBase(current, target));
    } catch (error) {
      curlPane.hidden = false;
      curlTarget.textContent = `No curl command: ${error.message}`;
      curlNote.hidden = true;
      curlText.textContent = '';
      return;
    }
    curlPane.hidden = false;
    curlTarget.textContent =
      target === 'public' ? `Against the public URL (${built.url}): through the edge, like the original.` : `Straight to the local target (${built.url}), bypassing the tunnel.`;
    curlNote.hidden = !built.truncated;
    curlText.textContent = built.command;
    const copied = await copyText(built.command, curlText);
    adapter.notify(copied ? 'curl command copied' : 'curl command selected: copy it with Ctrl+C');
  }

  return {
    element,
    show,
    get current() {
      return current;
    },
    /** Live changes to the exchange shown (a replay mark, a held event's id) without a new load. */
    update(summary) {
      if (current === null || summary.id !== current.id) return;
      current = { ...current, replay_of: summary.replay_of ?? current.replay_of, delivery: summary.delivery ?? current.delivery };
      showFacts();
    },
    replay: () => replay({}),
    openEditor,
    closeEditor: () => editor.close(),
    focus: () => heading.focus(),
    /** Stops following an open WebSocket (the page leaves). */
    stop: () => clearTimeout(wsTimer),
  };
}

