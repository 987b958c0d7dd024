// The inspector page: a list of exchanges kept live over a WebSocket, a detail view, replay.
// Plain DOM, no framework. Everything captured is shown with textContent, never parsed as HTML:
// paths, headers and bodies come from whoever sent the request.
import { statusClass, statusText, latencyText, timeText, sizeText, base64Bytes, hexDump, renderBody, bodyInfo } from './exchange-format.js';

const MAX_ROWS = 1000;
const $ = (id) => document.getElementById(id);

const state = {
  /** Summaries by id, and their order (newest first). */
  items: new Map(),
  order: [],
  rows: new Map(),
  selected: null,
  detail: null,
  filter: '',
  /** Ids the inspector found for the filter's words (bodies and headers included); null: not asked yet. */
  searchIds: null,
  onlyErrors: false,
  /** 'pretty' or 'raw', for both body panes. */
  bodyMode: 'pretty',
  hiddenBefore: 0,
  maxRows: MAX_ROWS,
};

// ---- the list ------------------------------------------------------------------------------------------

function matches(item) {
  if (state.onlyErrors && statusClass(item) === 's2xx') return false;
  if (state.filter === '') return true;
  if (state.searchIds !== null && state.searchIds.has(item.id)) return true;
  const haystack = `${item.method} ${item.path} ${statusText(item)} ${item.id} ${item.replay_of ?? ''} ${item.client_address ?? ''}${item.delivery ? ` held ${item.delivery.event_id ?? ''}` : ''}${item.tunnel ? ` ${item.tunnel}` : ''}`.toLowerCase();
  return state.filter.split(/\s+/).every((word) => haystack.includes(word));
}

let searchTimer = null;
let searchTicket = 0;

/** Asks the inspector which exchanges hold the filter's words anywhere, bodies included. */
function scheduleSearch() {
  clearTimeout(searchTimer);
  if (state.filter === '') {
    state.searchIds = null;
    return;
  }
  searchTimer = setTimeout(async () => {
    const ticket = ++searchTicket;
    const filter = state.filter;
    try {
      const response = await fetch(`/api/requests?summary=1&limit=${state.maxRows}&q=${encodeURIComponent(filter)}`);
      if (!response.ok || ticket !== searchTicket) return;
      const { requests } = await response.json();
      if (ticket !== searchTicket || filter !== state.filter) return;
      state.searchIds = new Set(requests.map((item) => item.id));
      applyFilter();
    } catch {
      // The feed's reconnect says when the inspector is gone.
    }
  }, 150);
}

/** "held webhook, delivery attempt 2, received by the edge at …": a held event the edge delivered. */
function deliveryText(delivery) {
  const parts = [`held webhook, delivery attempt ${delivery.attempt}`];
  if (delivery.received_at !== null) parts.push(`received by the edge at ${delivery.received_at}`);
  if (delivery.event_id !== null) parts.push(`event ${delivery.event_id}`);
  return parts.join(', ');
}

function buildRow(item) {
  const tr = document.createElement('tr');
  tr.dataset.id = item.id;
  fillRow(tr, item);
  return tr;
}

function fillRow(tr, item) {
  const cls = statusClass(item);
  tr.className = `${cls}${cls === 's2xx' ? '' : ' non2xx'}${state.selected === item.id ? ' selected' : ''}`;
  const cells = [
    ['method', item.kind === 'websocket' ? 'WS' : item.method],
    ['path', item.path],
    ['status', statusText(item)],
    ['latency', latencyText(item.latency_ms)],
    ['time', timeText(item.received_at)],
  ];
  tr.replaceChildren();
  for (const [name, text] of cells) {
    const td = document.createElement('td');
    td.className = name;
    td.textContent = text;
    if (name === 'path') {
      td.title = item.error === null ? item.path : `${item.path}\n${item.error}`;
      // burrow start: one inspector for several tunnels; the filter box finds a tunnel by its name.
      if (item.tunnel) {
        const mark = document.createElement('span');
        mark.className = 'tunnel-mark';
        mark.textContent = item.tunnel;
        mark.title = `through tunnel ${item.tunnel}`;
        td.prepend(mark);
      }
      if (item.source === 'edge') {
        const mark = document.createElement('span');
        mark.className = 'edge-mark';
        mark.textContent = '⇣ edge';
        mark.title = "loaded from the edge's capture history (seen before this inspector started)";
        td.append(mark);
      }
      if (item.kind === 'websocket') {
        const mark = document.createElement('span');
        mark.className = 'ws-mark';
        const ws = item.websocket;
        mark.textContent = ws.closed_at === null ? `open · ${ws.messages_in + ws.messages_out} msgs` : `closed ${ws.close_code ?? ''} · ${ws.messages_in + ws.messages_out} msgs`;
        td.append(mark);
      }
      if (item.delivery !== null && item.delivery !== undefined) {
        const mark = document.createElement('span');
        mark.className = 'held-mark';
        mark.textContent = `held · #${item.delivery.attempt}`;
        mark.title = deliveryText(item.delivery);
        td.append(mark);
      }
      if (item.replay_of !== null) {
        const mark = document.createElement('span');
        mark.className = 'replay-mark';
        mark.textContent = '↻ replay';
        mark.title = `replay of ${item.replay_of}`;
        td.append(mark);
      }
    }
    tr.append(td);
  }
  tr.hidden = !matches(item);
}

/** Adds or updates summaries; `fresh` ones (from the live feed) flash. */
function upsert(items, fresh) {
  const rowsBody = $('rows');
  const added = [];
  for (const item of items) {
    const existing = state.items.get(item.id);
    state.items.set(item.id, item);
    if (existing !== undefined) {
      const tr = state.rows.get(item.id);
      if (tr !== undefined) fillRow(tr, item);
      if (state.selected === item.id && state.detail !== null) {
        state.detail.replay_of = item.replay_of;
        state.detail.delivery = item.delivery;
        showFacts(state.detail);
      }
      continue;
    }
    added.push(item);
  }
  if (added.length > 0) {
    // `items` arrive oldest first (in the order they completed): the newest goes on top.
    added.reverse();
    const fragment = document.createDocumentFragment();
    for (const item of added) {
      const tr = buildRow(item);
      if (fresh) tr.classList.add('fresh');
      state.rows.set(item.id, tr);
      fragment.append(tr);
    }
    rowsBody.prepend(fragment);
    state.order = [...added.map((item) => item.id), ...state.order];
    trim();
  }
  updateEmpty();
  if (added.length > 0 && state.filter !== '') scheduleSearch();
}

function trim() {
  while (state.order.length > state.maxRows) {
    const id = state.order.pop();
    state.items.delete(id);
    state.rows.get(id)?.remove();
    state.rows.delete(id);
  }
}

function updateEmpty() {
  const visible = state.order.some((id) => !state.rows.get(id).hidden);
  $('empty').hidden = visible;
  if (!visible) $('empty').textContent = state.order.length === 0 ? 'Waiting for requests… send one to your public URL.' : 'No request matches the filter.';
}

function applyFilter() {
  for (const id of state.order) state.rows.get(id).hidden = !matches(state.items.get(id));
  updateEmpty();
}

async function loadList() {
  const response = await fetch(`/api/requests?summary=1&limit=${state.maxRows}`);
  if (!response.ok) throw new Error(`the list answered ${response.status}`);
  const { requests } = await response.json();
  state.items.clear();
  state.rows.clear();
  state.order = [];
  $('rows').replaceChildren();
  upsert(requests.reverse(), false);
  if (state.selected !== null && state.rows.has(state.selected)) state.rows.get(state.selected).classList.add('selected');
}

// ---- the detail ----------------------------------------------------------------------------------------

function fillHeaders(table, headers) {
  table.replaceChildren();
  for (const [name, value] of headers) {
    const tr = document.createElement('tr');
    const n = document.createElement('td');
    n.textContent = name;
    const v = document.createElement('td');
    v.textContent = value;
    tr.append(n, v);
    table.append(tr);
  }
}

function showFacts(detail) {
  $('d-id').textContent = detail.id;
  $('d-time').textContent = `${timeText(detail.received_at)}  (${detail.received_at})`;
  $('d-latency').textContent = latencyText(detail.latency_ms);
  $('d-port').textContent = String(detail.port);
  $('d-client').textContent = detail.client_address ?? '—';
  const fromEdge = detail.source === 'edge';
  $('d-source').hidden = !fromEdge;
  $('d-source-label').hidden = !fromEdge;
  $('d-source').textContent = fromEdge ? "loaded from the edge's capture history" : '';
  const replayOf = detail.replay_of;
  $('d-replay-of').hidden = replayOf === null;
  $('d-replay-of-label').hidden = replayOf === null;
  $('d-replay-of').replaceChildren();
  if (replayOf !== null) {
    const link = document.createElement('a');
    link.href = `#${replayOf}`;
    link.textContent = replayOf;
    link.addEventListener('click', (event) => {
      event.preventDefault();
      select(replayOf);
    });
    $('d-replay-of').append(link);
  }
  const delivery = detail.delivery ?? null;
  $('d-delivery').hidden = delivery === null;
  $('d-delivery-label').hidden = delivery === null;
  $('d-delivery').textContent = delivery === null ? '' : deliveryText(delivery);
  $('d-error').hidden = detail.error === null;
  $('d-error-label').hidden = detail.error === null;
  $('d-error').textContent = detail.error ?? '';
}

function showDetail(detail) {
  state.detail = detail;
  $('placeholder').hidden = true;
  $('detail').hidden = false;
  $('d-method').textContent = detail.method;
  $('d-path').textContent = detail.path;
  const cls = statusClass(detail);
  $('d-status').textContent = statusText(detail);
  $('d-status').className = `status ${cls}`;
  showFacts(detail);
  fillHeaders($('req-headers'), detail.request.headers);
  $('res-status').textContent = statusText(detail);
  $('res-status').className = `status ${cls}`;
  fillHeaders($('res-headers'), detail.response.headers);
  showBodies(detail);
  showWebSocket(detail);
  $('har-one').href = `/api/har?id=${encodeURIComponent(detail.id)}`;
  if (state.truncatedReplay?.id !== detail.id) $('truncated').hidden = true;
  $('curl').hidden = true;
  if (!$('editor').hidden) openEditor();
}

function showBodies(detail) {
  const raw = state.bodyMode === 'raw';
  for (const button of document.querySelectorAll('.body-mode')) button.setAttribute('aria-pressed', String(button.dataset.mode === state.bodyMode));
  const requestBody = renderBody(detail.request, detail.request.headers, raw);
  $('req-body').textContent = requestBody.text;
  $('req-body-info').textContent = bodyInfo(detail.request, requestBody.kind);
  const responseBody = renderBody(detail.response, detail.response.headers, raw);
  $('res-body').textContent = responseBody.text;
  $('res-body-info').textContent = bodyInfo(detail.response, responseBody.kind);
}

function timeOrDash(iso) {
  return iso === null ? '—' : `${timeText(iso)}  (${iso})`;
}

let wsPoll = null;

/** A WebSocket connection: its life and messages instead of bodies; refreshed while it is open. */
function showWebSocket(detail) {
  clearTimeout(wsPoll);
  const ws = detail.websocket;
  $('ws-pane').hidden = ws === null;
  for (const element of document.querySelectorAll('.http-only')) element.hidden = ws !== null;
  if (ws === null) return;
  $('ws-opened').textContent = timeOrDash(ws.opened_at);
  $('ws-closed').textContent = ws.closed_at === null ? 'open' : timeOrDash(ws.closed_at);
  $('ws-code').textContent = ws.close_code === null ? '—' : `${ws.close_code}${ws.close_reason === '' ? '' : ` (${ws.close_reason})`}`;
  $('ws-counts').textContent = `${ws.messages_in} in · ${ws.messages_out} out${detail.messages.length < ws.messages_in + ws.messages_out ? ` (the last ${detail.messages.length} kept)` : ''}`;
  const rows = [];
  for (const message of detail.messages) {
    const tr = document.createElement('tr');
    tr.className = `ws-${message.direction}`;
    const data = message.data_encoding === 'base64' ? hexDump(base64Bytes(message.data)) : message.data;
    const cells = [
      timeText(message.at),
      message.direction === 'in' ? '→ local' : '← local',
      message.binary ? 'binary' : 'text',
      sizeText(message.size) + (message.truncated ? ' (cut)' : ''),
      data,
    ];
    for (const text of cells) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    rows.push(tr);
  }
  $('ws-messages').replaceChildren(...rows);
  if (ws.closed_at === null) {
    wsPoll = setTimeout(async () => {
      if (state.detail?.id !== detail.id) return;
      const response = await fetch(`/api/requests/${encodeURIComponent(detail.id)}`).catch(() => null);
      if (response?.ok && state.detail?.id === detail.id) showDetail(await response.json());
    }, 1000);
  }
}

async function showCurl(target) {
  const detail = state.detail;
  if (detail === null) return;
  const response = await fetch(`/api/requests/${encodeURIComponent(detail.id)}/curl?target=${target}`);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    toast(`No curl command: ${body.error?.code ?? response.status}: ${body.error?.message ?? ''}`, true);
    return;
  }
  $('curl').hidden = false;
  $('curl-target').textContent =
    target === 'public' ? `Against the public URL (${body.url}): through the edge, like the original.` : `Straight to the local target (${body.url}), bypassing the tunnel.`;
  $('curl-note').hidden = !body.truncated;
  $('curl-text').textContent = body.command;
  try {
    await navigator.clipboard.writeText(body.command);
    toast('curl command copied');
  } catch {
    toast('Select the command below to copy it');
  }
}

let detailRequest = 0;

async function select(id, { scroll = true } = {}) {
  if (state.selected !== null) state.rows.get(state.selected)?.classList.remove('selected');
  state.selected = id;
  const tr = state.rows.get(id);
  if (tr !== undefined) {
    tr.classList.add('selected');
    if (scroll) tr.scrollIntoView({ block: 'nearest' });
  }
  history.replaceState(null, '', `#${id}`);
  const ticket = ++detailRequest;
  const response = await fetch(`/api/requests/${encodeURIComponent(id)}`);
  if (ticket !== detailRequest) return;
  if (!response.ok) {
    toast(`${id} is no longer in the inspector`, true);
    return;
  }
  showDetail(await response.json());
}

function visibleIds() {
  return state.order.filter((id) => !state.rows.get(id).hidden);
}

function move(step) {
  const ids = visibleIds();
  if (ids.length === 0) return;
  const index = state.selected === null ? -1 : ids.indexOf(state.selected);
  const next = index < 0 ? 0 : Math.min(ids.length - 1, Math.max(0, index + step));
  void select(ids[next]);
}

// ---- replay --------------------------------------------------------------------------------------------

async function replay(id, edits) {
  const buttons = [$('replay'), $('replay-edit'), $('e-send'), $('replay-truncated')];
  for (const button of buttons) button.disabled = true;
  try {
    const response = await fetch(`/api/requests/${encodeURIComponent(id)}/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(edits ?? {}),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      if (body.error?.code === 'REPLAY_TRUNCATED') {
        // Shown until acted on: the user decides whether the cut body is good enough.
        $('truncated-message').textContent = body.error.message;
        $('truncated').hidden = false;
        state.truncatedReplay = { id, edits: edits ?? {} };
        return null;
      }
      toast(`Replay failed: ${body.error?.code ?? response.status}: ${body.error?.message ?? ''}`, true);
      return null;
    }
    $('truncated').hidden = true;
    const cut = body.truncated === true ? ' (the captured body, cut at the capture limit)' : '';
    toast(`Replayed ${id} as ${body.id}: ${body.status === 0 ? 'ERR' : body.status} in ${latencyText(body.latency_ms ?? body.duration_ms ?? 0)}${cut}`, false, body.id);
    if (body.method !== undefined && body.received_at !== undefined) upsert([body], true);
    return body;
  } catch (error) {
    toast(`Replay failed: ${error.message}`, true);
    return null;
  } finally {
    for (const button of buttons) button.disabled = false;
  }
}

function openEditor() {
  const detail = state.detail;
  if (detail === null) return;
  $('editor').hidden = false;
  $('e-method').value = detail.method;
  $('e-path').value = detail.path;
  $('e-headers').value = detail.request.headers.map(([name, value]) => `${name}: ${value}`).join('\n');
  const binary = detail.request.body_encoding === 'base64' || detail.request.truncated;
  $('e-body').value = binary ? '' : detail.request.body;
  $('e-body').disabled = binary;
  $('e-body').placeholder = binary ? 'Binary or truncated body: replayed unchanged' : '';
  $('e-body-note').textContent = binary ? '(binary or truncated: replayed as captured)' : '(sent only if changed)';
  $('e-method').focus();
}

function closeEditor() {
  $('editor').hidden = true;
}

/** The edits: what differs from the captured request. Header lines are "Name: value". */
function collectEdits() {
  const detail = state.detail;
  const edits = {};
  const method = $('e-method').value.trim().toUpperCase();
  if (method !== '' && method !== detail.method) edits.method = method;
  const path = $('e-path').value.trim();
  if (path !== '' && path !== detail.path) edits.path = path;
  const original = new Map(detail.request.headers.map(([name, value]) => [name.toLowerCase(), value]));
  const headers = {};
  const kept = new Set();
  for (const line of $('e-headers').value.split('\n')) {
    if (line.trim() === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`"${line}" is not "Name: value"`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    kept.add(name);
    if (original.get(name) !== value) headers[name] = value;
  }
  // A deleted line removes the header (null in the replay API).
  for (const name of original.keys()) if (!kept.has(name) && name !== 'content-length') headers[name] = null;
  if (Object.keys(headers).length > 0) edits.headers = headers;
  if (!$('e-body').disabled && $('e-body').value !== detail.request.body) edits.body = $('e-body').value;
  return edits;
}

// ---- the header bar and the live feed ------------------------------------------------------------------

function showStatus(status) {
  const session = $('session');
  if (status.connected) {
    session.textContent = 'online';
    session.className = 'pill pill-on';
  } else {
    session.textContent = status.public_url === null ? 'offline' : 'reconnecting';
    session.className = 'pill pill-off';
  }
  const lines = [];
  const tunnels = status.tunnels?.length > 1 ? status.tunnels : [{ ...status, name: null }];
  for (const tunnel of tunnels) {
    if (tunnel.public_url === null || tunnel.default_port === null) continue;
    lines.push(`${tunnel.name === null ? '' : `${tunnel.name}: `}${tunnel.public_url} → localhost:${tunnel.default_port}`);
    for (const route of tunnel.routes) lines.push(`${route.prefix} → localhost:${route.port}`);
  }
  $('forwarding').textContent = lines.join('   ');
  const plural = (count, word) => `${count} ${word}${count === 1 ? '' : 's'}`;
  $('counts').textContent = `${plural(status.requests, 'request')} · ${plural(status.errors, 'error')} · ${status.active_streams} open`;
  state.maxRows = Math.max(1, Math.min(MAX_ROWS, status.max_exchanges ?? MAX_ROWS));
}

let feedDelay = 250;

function connectFeed() {
  const socket = new WebSocket(`ws://${location.host}/api/live`);
  socket.addEventListener('open', () => {
    feedDelay = 250;
    void loadList().catch((error) => toast(error.message, true));
  });
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(event.data);
    if (message.type === 'exchanges') {
      upsert(message.items, true);
      if (message.status !== undefined) showStatus(message.status);
    }
    else if (message.type === 'status') showStatus(message.status);
    else if (message.type === 'resync') void loadList();
  });
  socket.addEventListener('close', () => {
    const session = $('session');
    session.textContent = 'inspector offline';
    session.className = 'pill pill-off';
    setTimeout(connectFeed, feedDelay);
    feedDelay = Math.min(5000, feedDelay * 2);
  });
}

let toastTimer = null;

function toast(text, isError = false, linkId = null) {
  const element = $('toast');
  element.replaceChildren();
  element.append(document.createTextNode(text));
  if (linkId !== null) {
    element.append(' ');
    const link = document.createElement('a');
    link.href = `#${linkId}`;
    link.textContent = 'open';
    link.addEventListener('click', (event) => {
      event.preventDefault();
      void select(linkId);
    });
    element.append(link);
  }
  element.className = `toast${isError ? ' toast-error' : ''}`;
  element.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (element.hidden = true), isError ? 8000 : 4000);
}

// ---- wiring --------------------------------------------------------------------------------------------

function typing(target) {
  return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement;
}

function wire() {
  $('rows').addEventListener('click', (event) => {
    const tr = event.target.closest('tr');
    if (tr !== null && tr.dataset.id !== undefined) void select(tr.dataset.id, { scroll: false });
  });
  $('filter').addEventListener('input', () => {
    state.filter = $('filter').value.trim().toLowerCase();
    state.searchIds = null;
    applyFilter();
    scheduleSearch();
  });
  $('only-errors').addEventListener('change', () => {
    state.onlyErrors = $('only-errors').checked;
    applyFilter();
  });
  $('clear').addEventListener('click', () => {
    for (const id of state.order) state.rows.get(id).remove();
    state.items.clear();
    state.rows.clear();
    state.order = [];
    updateEmpty();
  });
  $('replay').addEventListener('click', () => {
    if (state.detail !== null) void replay(state.detail.id);
  });
  $('replay-truncated').addEventListener('click', () => {
    const pending = state.truncatedReplay;
    if (pending === undefined) return;
    void replay(pending.id, { ...pending.edits, allow_truncated: true }).then((result) => {
      if (result !== null) closeEditor();
    });
  });
  $('truncated-cancel').addEventListener('click', () => {
    $('truncated').hidden = true;
  });
  $('curl-public').addEventListener('click', () => void showCurl('public'));
  $('curl-local').addEventListener('click', () => void showCurl('local'));
  $('curl-close').addEventListener('click', () => {
    $('curl').hidden = true;
  });
  for (const button of document.querySelectorAll('.body-mode')) {
    button.addEventListener('click', () => {
      state.bodyMode = button.dataset.mode;
      if (state.detail !== null) showBodies(state.detail);
    });
  }
  $('replay-edit').addEventListener('click', openEditor);
  $('e-cancel').addEventListener('click', closeEditor);
  $('editor').addEventListener('submit', (event) => {
    event.preventDefault();
    let edits;
    try {
      edits = collectEdits();
    } catch (error) {
      toast(error.message, true);
      return;
    }
    void replay(state.detail.id, edits).then((result) => {
      if (result !== null) closeEditor();
    });
  });
  document.addEventListener('keydown', (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) {
      if (event.key === 'Escape') {
        event.target.blur();
        if (event.target.closest('#editor') !== null) closeEditor();
      }
      return;
    }
    switch (event.key) {
      case 'j':
      case 'ArrowDown':
        move(1);
        break;
      case 'k':
      case 'ArrowUp':
        move(-1);
        break;
      case 'Enter':
        if (state.selected === null) move(0);
        else void select(state.selected);
        break;
      case 'r':
        if (state.detail !== null) void replay(state.detail.id);
        break;
      case 'e':
        openEditor();
        break;
      case '/':
        $('filter').focus();
        break;
      case 'Escape':
        closeEditor();
        break;
      default:
        return;
    }
    event.preventDefault();
  });
  fetch('/api/status')
    .then((response) => response.json())
    .then(showStatus)
    .catch(() => {});
  connectFeed();
  const wanted = location.hash.slice(1);
  if (wanted.startsWith('req_')) void select(wanted);
}

wire();
