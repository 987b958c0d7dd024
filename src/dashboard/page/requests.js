// The Requests page: one tunnel's captured requests (newest first, paged with "Load older"), filters by
// method, status and path over the loaded rows, and a search the edge runs inside headers and bodies
// (GET /api/v1/requests?q=). The list and the detail (bodies pretty, raw and hex, replay as captured or
// with edits, copy as curl, HAR) are the modules the local inspector's page uses too (src/web/); this
// file is their data source: the edge's /api/v1.
import { api } from './api.js';
import { clear, h } from './elements.js';
import { exchangeDetail } from './exchange-detail.js';
import { exchangeList } from './exchange-list.js';
import { harLog } from './har.js';

const PAGE = 50;
const byId = (id) => `/api/v1/requests/${encodeURIComponent(id)}`;

/**
 * `context`: root, subdomains (the names offered), preferred (the name to show first), request (an id to
 * open, from #/requests/NAME/ID), setError, notify, publicUrlOf(subdomain), build (the edge's version).
 */
export function requestsView(context) {
  const { root, subdomains, preferred, setError, publicUrlOf } = context;
  const state = { subdomain: preferred ?? subdomains[0] ?? null, more: false, nextBefore: null, olderLoaded: false, query: '', scanned: 0, timer: null, loading: false };

  const tunnelSelect = h('select', { id: 'req-tunnel' }, subdomains.map((name) => h('option', { value: name, selected: name === state.subdomain }, name)));
  const method = h('select', { id: 'req-method' }, ['', 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'TCP', 'TLS'].map((m) => h('option', { value: m }, m === '' ? 'any' : m)));
  const status = h('select', { id: 'req-status' }, [['', 'any'], ['2', '2xx'], ['3', '3xx'], ['4', '4xx'], ['5', '5xx'], ['err', 'errors (non-2xx)']].map(([v, t]) => h('option', { value: v }, t)));
  const path = h('input', { id: 'req-path', type: 'search', placeholder: '/webhooks', spellcheck: 'false' });
  const search = h('input', { id: 'req-search', type: 'search', placeholder: 'evt_… in bodies and headers', spellcheck: 'false', maxlength: '256' });
  const searchInfo = h('p.muted', { 'aria-live': 'polite', hidden: true });
  const more = h('button', { type: 'button', hidden: true, on: { click: () => void load(true) } }, 'Load older');
  const detailSection = h('section.detail', { 'aria-label': 'Request detail', hidden: true });

  const captionOf = () => `Requests on ${state.subdomain}, newest first`;
  const list = exchangeList({
    caption: captionOf(),
    timing: { field: 'duration_ms', label: 'Duration' },
    timeLabel: 'Received',
    onOpen: (id) => void open(id),
    emptyText: (loaded) => (loaded > 0 ? 'No loaded request matches the filters.' : state.query !== '' ? 'No request found by the search.' : 'No requests captured yet.'),
  });
  list.filter(matches);

  /** A link that opens request `id` of this tunnel here (and is an address of it). */
  const link = (id, text) =>
    h('a', {
      href: `#/requests/${encodeURIComponent(state.subdomain)}/${encodeURIComponent(id)}`,
      on: { click: (event) => { event.preventDefault(); list.select(id); void open(id); } },
    }, text);

  const detail = exchangeDetail({
    timing: { field: 'duration_ms', label: 'Duration' },
    replay: (capture, edits) => api('POST', `${byId(capture.id)}/replay`, edits),
    load: (id) => api('GET', byId(id)),
    curlTargets: ['public'],
    curlBase: (capture) => publicUrlOf(capture.subdomain),
    har(capture) {
      const log = harLog([capture], publicUrlOf(capture.subdomain), { name: 'Burrow dashboard', version: context.build });
      const href = URL.createObjectURL(new Blob([JSON.stringify(log, null, 1)], { type: 'application/json' }));
      setTimeout(() => URL.revokeObjectURL(href), 60_000);
      return { href, filename: `burrow-${capture.id}.har` };
    },
    link,
    replayed: () => void load(false),
    notify: context.notify,
    webSocketNote: null,
  });
  detailSection.append(detail.element);

  clear(root).append(
    h('h1', {}, 'Requests'),
    subdomains.length === 0
      ? h('p.empty', {}, 'No tunnel yet: start one with "burrow http <port>" and its requests appear here.')
      : h('div.filters', {},
          h('label', { for: 'req-tunnel' }, 'Tunnel'), tunnelSelect,
          h('label', { for: 'req-method' }, 'Method'), method,
          h('label', { for: 'req-status' }, 'Status'), status,
          h('label', { for: 'req-path' }, 'Path'), path,
          h('label', { for: 'req-search' }, 'Search'), search),
    searchInfo,
    subdomains.length === 0 ? null : h('div.split', {}, h('div.list-pane', {}, list.element, more), detailSection),
  );

  tunnelSelect.addEventListener('change', () => {
    state.subdomain = tunnelSelect.value;
    history.replaceState(null, '', `#/requests/${encodeURIComponent(state.subdomain)}`);
    list.setCaption(captionOf());
    list.reset([]);
    state.nextBefore = null;
    state.olderLoaded = false;
    detailSection.hidden = true;
    void load(false);
  });
  for (const input of [method, status]) input.addEventListener('change', () => list.refilter());
  path.addEventListener('input', () => list.refilter());
  let searchTimer = null;
  search.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const query = search.value.trim();
      if (query === state.query) return;
      state.query = query;
      list.reset([]);
      state.nextBefore = null;
      state.olderLoaded = false;
      void load(false);
    }, 300);
  });

  function matches(item) {
    if (method.value !== '' && item.method !== method.value) return false;
    const s = status.value;
    if (s === 'err' && item.status >= 200 && item.status < 300) return false;
    if (s !== '' && s !== 'err' && String(item.status)[0] !== s) return false;
    return path.value === '' || item.path.toLowerCase().includes(path.value.toLowerCase());
  }

  async function load(older) {
    if (state.subdomain === null) return;
    // A load already running for another search (or tunnel) is answered but not shown: `asked` says which.
    const asked = `${state.subdomain} ${state.query}`;
    if (state.loading === asked) return;
    state.loading = asked;
    try {
      const query = new URLSearchParams({ subdomain: state.subdomain, limit: String(PAGE) });
      if (state.query !== '') query.set('q', state.query);
      // A search goes on where the edge stopped looking (next_before), which may be past its last match.
      const cursor = state.query !== '' ? state.nextBefore : list.last();
      if (older && cursor) query.set('before', cursor);
      const answer = await api('GET', `/api/v1/requests?${query}`);
      if (asked !== `${state.subdomain} ${state.query}`) return;
      const { requests } = answer;
      if (older) list.append(requests);
      else if (!state.olderLoaded) list.reset(requests);
      // A refresh keeps the older pages already loaded: the new requests go on top.
      else list.prepend(requests);
      if (older || !state.olderLoaded) {
        state.more = state.query !== '' ? answer.next_before !== null : requests.length === PAGE;
        if (state.query !== '') {
          state.nextBefore = answer.next_before;
          state.scanned = older ? state.scanned + answer.scanned : answer.scanned;
        }
      }
      if (older) state.olderLoaded = true;
      more.hidden = !state.more;
      searchInfo.hidden = state.query === '';
      searchInfo.textContent = state.query === '' ? '' : `Search in paths, headers and bodies: ${list.size} found in the newest ${state.scanned} request${state.scanned === 1 ? '' : 's'}${state.more ? '; Load older searches further back' : ''}.`;
      setError(null);
    } catch (error) {
      if (error.code === 'NOT_FOUND') list.reset([]);
      else setError(error);
    } finally {
      if (state.loading === asked) state.loading = false;
    }
  }

  let openTicket = 0;
  async function open(id) {
    const ticket = ++openTicket;
    try {
      const capture = await api('GET', byId(id));
      if (ticket !== openTicket) return;
      detail.show(capture);
      detailSection.hidden = false;
      detail.focus();
    } catch (error) {
      setError(error);
    }
  }

  if (state.subdomain !== null) void load(false);
  if (context.request !== null) {
    list.select(context.request);
    void open(context.request);
  }
  state.timer = setInterval(() => { if (!document.hidden) void load(false); }, 4000);
  return () => {
    clearInterval(state.timer);
    detail.stop();
  };
}
