// The request list both pages show: method (WS for a WebSocket), path with its marks, status, timing and
// time, newest on top, non-2xx rows highlighted. The page feeds it (the inspector from its live feed, the
// dashboard from /api/v1 pages) and decides what a row opens; the list keeps the rows, the selection and
// the filter. Rows open on click, Enter or Space; the arrow keys (and j/k) move between them. Captured
// paths are text, never markup.
import { h } from './elements.js';
import { isConnection, latencyText, statusClass, statusText, whenText } from './exchange-format.js';

/**
 * `options`: `caption` (the table's accessible name), `timing` ({field: 'latency_ms' | 'duration_ms',
 * label}), `timeLabel`, `onOpen(id)`, `emptyText(loaded)` (what to say when no row shows; `loaded`: how
 * many rows the list holds).
 */
export function exchangeList(options) {
  const { timing, onOpen } = options;
  const rows = h('tbody', { id: 'rows' });
  const caption = h('caption', {}, options.caption);
  const table = h('table.requests', {},
    caption,
    h('thead', {}, h('tr', {},
      h('th.c-method', { scope: 'col' }, 'Method'),
      h('th.c-path', { scope: 'col' }, 'Path'),
      h('th.c-status', { scope: 'col' }, 'Status'),
      h('th.c-latency', { scope: 'col' }, timing.label),
      h('th.c-time', { scope: 'col' }, options.timeLabel))),
    rows);
  const empty = h('p.empty', { id: 'empty' });
  const element = h('div.table-wrap.list-wrap', { id: 'table-wrap' }, table, empty);

  const items = new Map();
  const trs = new Map();
  /** Ids, newest first. */
  let order = [];
  let selected = null;
  let predicate = () => true;

  function marks(item) {
    const found = [];
    if (item.source === 'edge') found.push(h('span.edge-mark', { title: "loaded from the edge's capture history (seen before this inspector started)" }, '⇣ edge'));
    if (item.rejected) found.push(h('span.rejected-mark', { title: rejectedText(item.rejected) }, `rejected: ${item.rejected}`));
    if (item.kind === 'websocket' && item.websocket) {
      const ws = item.websocket;
      const count = ws.messages_in + ws.messages_out;
      found.push(h('span.ws-mark', {}, ws.closed_at === null ? `open · ${count} msgs` : `closed ${ws.close_code ?? ''} · ${count} msgs`));
    }
    if (item.delivery) found.push(h('span.held-mark', { title: deliveryText(item.delivery) }, `held · #${item.delivery.attempt}`));
    if (item.replay_of) found.push(h('span.replay-mark', { title: `replay of ${item.replay_of}` }, '↻ replay'));
    if (isConnection(item)) found.push(h('span.conn-mark', { title: `a ${item.method === 'TLS' ? 'TLS passthrough' : 'TCP'} connection from this client address` }, 'connection'));
    return found;
  }

  /** `burrow start`'s inspector records several tunnels: a row starts with its tunnel's name. */
  function tunnelMark(item) {
    return item.tunnel ? h('span.tunnel-mark', { title: `through tunnel ${item.tunnel}` }, item.tunnel) : null;
  }

  function fill(tr, item) {
    const cls = statusClass(item);
    tr.className = `${cls}${cls === 's2xx' ? '' : ' non2xx'}${selected === item.id ? ' selected' : ''}`;
    tr.setAttribute('aria-selected', String(selected === item.id));
    const title = item.error ? `${item.path}\n${item.error}` : item.path;
    tr.replaceChildren(
      h('td.method', {}, item.kind === 'websocket' ? 'WS' : item.method),
      h('td.path', { title }, tunnelMark(item), item.path, marks(item)),
      h('td.status', {}, statusText(item)),
      // A WebSocket's lifetime is not a latency.
      h('td.latency', {}, item.kind === 'websocket' ? '—' : latencyText(item[timing.field] ?? 0)),
      h('td.time', { title: item.received_at }, whenText(item.received_at)));
    tr.hidden = !predicate(item);
  }

  function build(item) {
    const tr = h('tr', { 'data-id': item.id, tabindex: '-1' });
    fill(tr, item);
    return tr;
  }

  /** Adds rows (newest first) at the top or the bottom; rows already listed are updated in place. */
  function add(list, where, fresh) {
    const added = [];
    for (const item of list) {
      items.set(item.id, item);
      const tr = trs.get(item.id);
      if (tr !== undefined) fill(tr, item);
      else added.push(item);
    }
    if (added.length > 0) {
      const fragment = document.createDocumentFragment();
      for (const item of added) {
        const tr = build(item);
        if (fresh) tr.classList.add('fresh');
        trs.set(item.id, tr);
        fragment.append(tr);
      }
      const ids = added.map((item) => item.id);
      if (where === 'top') {
        rows.prepend(fragment);
        order = [...ids, ...order];
      } else {
        rows.append(fragment);
        order = [...order, ...ids];
      }
    }
    settle();
    return added.length;
  }

  /** The empty-list line, and which row the Tab key reaches (the selected one, else the first shown). */
  function settle() {
    const shown = visibleIds();
    empty.hidden = shown.length > 0;
    if (shown.length === 0) empty.textContent = options.emptyText(order.length);
    const focusable = selected !== null && shown.includes(selected) ? selected : shown[0];
    for (const [id, tr] of trs) tr.tabIndex = id === focusable ? 0 : -1;
  }

  function visibleIds() {
    return order.filter((id) => !trs.get(id).hidden);
  }

  function select(id, { scroll = true, focus = false } = {}) {
    if (selected !== null) {
      const previous = trs.get(selected);
      previous?.classList.remove('selected');
      previous?.setAttribute('aria-selected', 'false');
    }
    selected = id;
    const tr = trs.get(id);
    if (tr !== undefined) {
      tr.classList.add('selected');
      tr.setAttribute('aria-selected', 'true');
      if (scroll) tr.scrollIntoView({ block: 'nearest' });
      if (focus) tr.focus();
    }
    settle();
  }

  /** Moves the selection `step` rows among those shown (from the top when none is selected) and opens it. */
  function move(step, { focus = false } = {}) {
    const shown = visibleIds();
    if (shown.length === 0) return;
    const index = selected === null ? -1 : shown.indexOf(selected);
    const next = index < 0 ? 0 : Math.min(shown.length - 1, Math.max(0, index + step));
    select(shown[next], { focus });
    onOpen(shown[next]);
  }

  rows.addEventListener('click', (event) => {
    const tr = event.target.closest('tr');
    if (tr === null || tr.dataset.id === undefined) return;
    select(tr.dataset.id, { scroll: false });
    onOpen(tr.dataset.id);
  });
  rows.addEventListener('keydown', (event) => {
    const tr = event.target.closest('tr');
    if (tr === null || event.ctrlKey || event.metaKey || event.altKey) return;
    const steps = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1, Home: -Infinity, End: Infinity };
    if (event.key === 'Enter' || event.key === ' ') {
      select(tr.dataset.id, { scroll: false });
      onOpen(tr.dataset.id);
    } else if (event.key in steps) {
      if (selected !== tr.dataset.id) select(tr.dataset.id, { scroll: false });
      move(steps[event.key], { focus: true });
    } else {
      return;
    }
    // Handled here: the page's own shortcuts must not act on it a second time.
    event.preventDefault();
    event.stopPropagation();
  });

  return {
    element,
    table,
    setCaption(text) {
      caption.textContent = text;
    },
    /** Newer exchanges (newest first) on top; `fresh` ones flash. Returns how many were new. */
    prepend(list, { fresh = false } = {}) {
      return add(list, 'top', fresh);
    },
    /** Older exchanges (newest first) at the bottom. */
    append(list) {
      return add(list, 'bottom', false);
    },
    /** Everything replaced by `list` (newest first); the selection stays if its row does. */
    reset(list) {
      rows.replaceChildren();
      items.clear();
      trs.clear();
      order = [];
      add(list, 'bottom', false);
      if (selected !== null && trs.has(selected)) select(selected, { scroll: false });
    },
    /** Keeps the newest `max` rows. */
    trim(max) {
      while (order.length > max) {
        const id = order.pop();
        items.delete(id);
        trs.get(id)?.remove();
        trs.delete(id);
      }
      settle();
    },
    /** Shows only the rows `test(item)` accepts (re-applied to rows added later). */
    filter(test) {
      predicate = test;
      for (const id of order) trs.get(id).hidden = !predicate(items.get(id));
      settle();
    },
    refilter() {
      this.filter(predicate);
    },
    select,
    move,
    get: (id) => items.get(id),
    has: (id) => items.has(id),
    ids: () => [...order],
    visibleIds,
    get selected() {
      return selected;
    },
    get size() {
      return order.length;
    },
    /** The oldest row's id (the cursor for "Load older"). */
    last: () => order[order.length - 1],
  };
}

/** What a capture's `rejected` mark means: the edge refused the request before it reached the local server. */
export function rejectedText(rejected) {
  return rejected === 'signature'
    ? 'refused by the edge: the webhook signature did not verify (401); it never reached the local server'
    : `refused by the edge (${rejected}); it never reached the local server`;
}

/** "held webhook, delivery attempt 2, received by the edge at …": a held event the edge delivered. */
export function deliveryText(delivery) {
  const parts = [`held webhook, delivery attempt ${delivery.attempt}`];
  if (delivery.received_at !== null) parts.push(`received by the edge at ${delivery.received_at}`);
  if (delivery.event_id !== null) parts.push(`event ${delivery.event_id}`);
  return parts.join(', ');
}
