// The inspector page: the tunnel's status bar, the request list kept live over the inspector's WebSocket
// feed, a filter that also searches headers and bodies, keyboard shortcuts, and the exchange detail.
// The list, the detail, the replay editor, curl and the WebSocket view are the modules the edge's
// dashboard uses too (src/web/); this file is their data source: the inspector's own API.
import { h } from './elements.js';
import { exchangeDetail } from './exchange-detail.js';
import { exchangeList } from './exchange-list.js';
import { latencyText, statusClass, statusText } from './exchange-format.js';

const MAX_ROWS = 1000;
const $ = (id) => document.getElementById(id);

const state = {
  filter: '',
  /** Ids the inspector found for the filter's words (bodies and headers included); null: not asked yet. */
  searchIds: null,
  onlyErrors: false,
  maxRows: MAX_ROWS,
  /** Each attached tunnel's public URL by its name (null: burrow http's one; names: burrow start's). */
  publicUrls: new Map(),
};

/** The inspector's JSON; an error answer rejects with its code and message. */
async function inspectorJson(path, init) {
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(body.error?.message ?? `the inspector answered ${response.status}`);
    error.code = body.error?.code ?? `HTTP_${response.status}`;
    throw error;
  }
  return body;
}

const byId = (id) => `/api/requests/${encodeURIComponent(id)}`;

// ---- the list ------------------------------------------------------------------------------------------

function matches(item) {
  if (state.onlyErrors && statusClass(item) === 's2xx') return false;
  if (state.filter === '') return true;
  if (state.searchIds !== null && state.searchIds.has(item.id)) return true;
  const haystack = `${item.method} ${item.path} ${statusText(item)} ${item.id} ${item.replay_of ?? ''} ${item.client_address ?? ''}${item.delivery ? ` held ${item.delivery.event_id ?? ''}` : ''}${item.tunnel ? ` ${item.tunnel}` : ''}`.toLowerCase();
  return state.filter.split(/\s+/).every((word) => haystack.includes(word));
}

const list = exchangeList({
  caption: 'Requests through this tunnel, newest first',
  timing: { field: 'latency_ms', label: 'Latency' },
  timeLabel: 'Time',
  onOpen: (id) => void open(id),
  emptyText: (loaded) => (loaded === 0 ? 'Waiting for requests… send one to your public URL.' : 'No request matches the filter.'),
});
list.filter(matches);

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
      const { requests } = await inspectorJson(`/api/requests?summary=1&limit=${state.maxRows}&q=${encodeURIComponent(filter)}`);
      if (ticket !== searchTicket || filter !== state.filter) return;
      state.searchIds = new Set(requests.map((item) => item.id));
      list.refilter();
    } catch {
      // The feed's reconnect says when the inspector is gone.
    }
  }, 150);
}

/** Summaries from the feed (oldest first, as they completed): new ones on top, flashing. */
function upsert(items) {
  const added = list.prepend([...items].reverse(), { fresh: true });
  list.trim(state.maxRows);
  for (const item of items) detail.update(item);
  if (added > 0 && state.filter !== '') scheduleSearch();
}

async function loadList() {
  const { requests } = await inspectorJson(`/api/requests?summary=1&limit=${state.maxRows}`);
  list.reset(requests);
}

// ---- the detail ----------------------------------------------------------------------------------------

const detail = exchangeDetail({
  timing: { field: 'latency_ms', label: 'Latency' },
  replay: (exchange, edits) => inspectorJson(`${byId(exchange.id)}/replay`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(edits) }),
  load: (id) => inspectorJson(byId(id)),
  curlTargets: ['public', 'local'],
  curlBase(exchange, target) {
    if (target === 'local') return `http://localhost:${exchange.port}`;
    // The exchange's own tunnel's: burrow start records several tunnels in one inspector.
    const publicUrl = state.publicUrls.get(exchange.tunnel ?? null) ?? null;
    if (publicUrl === null) throw new Error('the tunnel has no public URL right now (reconnecting or closed); copy the local command instead.');
    return publicUrl;
  },
  har: (exchange) => ({ href: `/api/har?id=${encodeURIComponent(exchange.id)}`, filename: '' }),
  link: (id, text) => h('a', { href: `#${id}`, on: { click: (event) => { event.preventDefault(); void open(id, { select: true }); } } }, text),
  replayed(result, original) {
    const cut = result.truncated === true ? ' (the captured body, cut at the capture limit)' : '';
    toast(`Replayed ${original.id} as ${result.id}: ${statusText(result)} in ${latencyText(result.latency_ms ?? 0)}${cut}`, false, result.id);
    if (result.method !== undefined && result.received_at !== undefined) upsert([result]);
  },
  notify: (text) => toast(text),
  webSocketNote:
    'Recorded by this inspector only: the edge keeps no capture of WebSocket connections, so a ws_ id is unknown to "burrow requests", the edge API and the dashboard, and a connection cannot be replayed.',
});

let detailTicket = 0;

async function open(id, { select = false } = {}) {
  if (select) list.select(id);
  history.replaceState(null, '', `#${id}`);
  const ticket = ++detailTicket;
  let exchange;
  try {
    exchange = await inspectorJson(byId(id));
  } catch {
    if (ticket === detailTicket) toast(`${id} is no longer in the inspector`, true);
    return;
  }
  if (ticket !== detailTicket) return;
  $('placeholder').hidden = true;
  $('detail').hidden = false;
  detail.show(exchange);
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
  state.publicUrls = new Map((status.tunnels ?? [{ ...status, name: null }]).map((tunnel) => [tunnel.name, tunnel.public_url]));
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
      upsert(message.items);
      if (message.status !== undefined) showStatus(message.status);
    } else if (message.type === 'status') showStatus(message.status);
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
  element.replaceChildren(text);
  if (linkId !== null) element.append(' ', h('a', { href: `#${linkId}`, on: { click: (event) => { event.preventDefault(); void open(linkId, { select: true }); } } }, 'open'));
  element.className = `toast${isError ? ' toast-error' : ''}`;
  element.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (element.hidden = true), isError ? 8000 : 4000);
}

// ---- wiring --------------------------------------------------------------------------------------------

/** Keys on a field, a button or a link are theirs (Enter presses a focused button), not shortcuts. */
function ownKeys(target) {
  return target instanceof Element && target.closest('input, textarea, select, button, a, [contenteditable]') !== null;
}

function wire() {
  $('list').replaceWith(list.element);
  $('detail').append(detail.element);
  $('filter').addEventListener('input', () => {
    state.filter = $('filter').value.trim().toLowerCase();
    state.searchIds = null;
    list.refilter();
    scheduleSearch();
  });
  $('only-errors').addEventListener('change', () => {
    state.onlyErrors = $('only-errors').checked;
    list.refilter();
  });
  $('clear').addEventListener('click', () => list.reset([]));
  document.addEventListener('keydown', (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (ownKeys(event.target)) {
      if (event.key === 'Escape') event.target.blur();
      return;
    }
    switch (event.key) {
      case 'j':
      case 'ArrowDown':
        list.move(1);
        break;
      case 'k':
      case 'ArrowUp':
        list.move(-1);
        break;
      case 'Enter':
        if (list.selected === null) list.move(0);
        else void open(list.selected);
        break;
      case 'r':
        void detail.replay();
        break;
      case 'e':
        detail.openEditor();
        break;
      case '/':
        $('filter').focus();
        break;
      case 'Escape':
        detail.closeEditor();
        break;
      default:
        return;
    }
    event.preventDefault();
  });
  inspectorJson('/api/status').then(showStatus, () => {});
  connectFeed();
  const wanted = location.hash.slice(1);
  if (/^(req|ws)_/.test(wanted)) void open(wanted, { select: true });
}

wire();
