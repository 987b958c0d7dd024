// The Requests page: one tunnel's captured requests (newest first, paged with "Load older"), filters
// by method, status and path over the loaded rows, a search the edge runs inside headers and bodies
// (GET /api/v1/requests?q=), a detail with headers, bodies (pretty and raw),
// timing and client address, copy as curl, and replay as-is or with edits. Captured data is shown as
// text only: it comes from whoever sent the request.
import { api, errorText } from './api.js';
import { clear, copyText, dateText, h, labelled } from './dom.js';
// Shared with the local inspector's page (src/web/exchange-format.js).
import { bodyInfo, latencyText as durationText, renderBody, statusClass, statusText } from './exchange-format.js';

const PAGE = 50;

export function requestsView(context) {
  const { root, subdomains, preferred, setError } = context;
  const state = { subdomain: preferred ?? subdomains[0] ?? null, items: [], more: false, nextBefore: null, olderLoaded: false, query: '', scanned: 0, selected: null, timer: null, loading: false };

  const tunnelSelect = h('select', { id: 'req-tunnel' }, subdomains.map((name) => h('option', { value: name, selected: name === state.subdomain }, name)));
  const method = h('select', { id: 'req-method' }, ['', 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].map((m) => h('option', { value: m }, m === '' ? 'any' : m)));
  const status = h('select', { id: 'req-status' }, [['', 'any'], ['2', '2xx'], ['3', '3xx'], ['4', '4xx'], ['5', '5xx'], ['err', 'errors (non-2xx)']].map(([v, t]) => h('option', { value: v }, t)));
  const path = h('input', { id: 'req-path', type: 'search', placeholder: '/webhooks', spellcheck: 'false' });
  const search = h('input', { id: 'req-search', type: 'search', placeholder: 'evt_… in bodies and headers', spellcheck: 'false', maxlength: '256' });
  const searchInfo = h('p.muted', { 'aria-live': 'polite', hidden: true });
  const list = h('div.request-list');
  const more = h('button', { type: 'button', hidden: true, on: { click: () => void load(true) } }, 'Load older');
  const detail = h('section.detail', { 'aria-label': 'Request detail', hidden: true });

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
    h('div.split', {}, h('div.list-pane', {}, list, more), detail),
  );

  tunnelSelect.addEventListener('change', () => {
    state.subdomain = tunnelSelect.value;
    state.items = [];
    state.nextBefore = null;
    state.olderLoaded = false;
    state.selected = null;
    detail.hidden = true;
    void load(false);
  });
  for (const input of [method, status]) input.addEventListener('change', render);
  path.addEventListener('input', render);
  let searchTimer = null;
  search.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const query = search.value.trim();
      if (query === state.query) return;
      state.query = query;
      state.items = [];
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

  function render() {
    const shown = state.items.filter(matches);
    more.hidden = !state.more;
    if (shown.length === 0) {
      const none = state.query !== '' ? 'No request found by the search.' : 'No requests captured yet.';
      clear(list).append(h('p.empty', {}, state.items.length === 0 ? none : 'No loaded request matches the filters.'));
      return;
    }
    const rows = shown.map((item) => {
      const row = h('tr', {
        tabindex: '0',
        class: `${statusClass(item)}${item.id === state.selected ? ' selected' : ''}`,
        'aria-selected': item.id === state.selected ? 'true' : 'false',
        on: { click: () => void open(item.id), keydown: (event) => { if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); void open(item.id); } } },
      },
      h('td.method', {}, item.method), h('td.path', {}, item.path), h('td.status', {}, statusText(item)),
      h('td.num', {}, durationText(item.duration_ms)), h('td.time', {}, dateText(item.received_at)));
      return row;
    });
    clear(list).append(h('div.table-wrap', {}, labelled(h('table.requests.cards', {}, h('caption', {}, `Requests on ${state.subdomain}, newest first`),
      h('thead', {}, h('tr', {}, ['Method', 'Path', 'Status', 'Duration', 'Received'].map((t) => h('th', { scope: 'col' }, t)))), h('tbody', {}, rows)))));
  }

  async function load(older) {
    if (state.subdomain === null) return;
    // A load already running for another search (or tunnel) is answered but not shown: `asked` says which.
    if (state.loading === `${state.subdomain} ${state.query}`) return;
    const asked = `${state.subdomain} ${state.query}`;
    state.loading = asked;
    try {
      const query = new URLSearchParams({ subdomain: state.subdomain, limit: String(PAGE) });
      if (state.query !== '') query.set('q', state.query);
      // A search goes on where the edge stopped looking (next_before), which may be past its last match.
      const cursor = state.query !== '' ? state.nextBefore : state.items[state.items.length - 1]?.id;
      if (older && cursor) query.set('before', cursor);
      const answer = await api('GET', `/api/v1/requests?${query}`);
      if (asked !== `${state.subdomain} ${state.query}`) return;
      const { requests } = answer;
      if (older) state.items.push(...requests);
      else if (!state.olderLoaded) state.items = requests;
      else {
        // A refresh keeps the older pages already loaded: the new requests go on top.
        const loaded = new Set(state.items.map((item) => item.id));
        state.items = [...requests.filter((item) => !loaded.has(item.id)), ...state.items];
      }
      if (older || !state.olderLoaded) {
        state.more = state.query !== '' ? answer.next_before !== null : requests.length === PAGE;
        if (state.query !== '') {
          state.nextBefore = answer.next_before;
          state.scanned = older ? state.scanned + answer.scanned : answer.scanned;
        }
      }
      if (older) state.olderLoaded = true;
      searchInfo.hidden = state.query === '';
      searchInfo.textContent = state.query === '' ? '' : `Search in paths, headers and bodies: ${state.items.length} found in the newest ${state.scanned} request${state.scanned === 1 ? '' : 's'}${state.more ? '; Load older searches further back' : ''}.`;
      setError(null);
      render();
    } catch (error) {
      if (error.code === 'NOT_FOUND') {
        state.items = [];
        render();
      } else setError(error);
    } finally {
      if (state.loading === asked) state.loading = false;
    }
  }

  async function open(id) {
    state.selected = id;
    render();
    try {
      const capture = await api('GET', `/api/v1/requests/${encodeURIComponent(id)}`);
      showDetail(detail, capture, context);
      detail.hidden = false;
      detail.querySelector('h2')?.focus();
    } catch (error) {
      setError(error);
    }
  }

  if (state.subdomain !== null) void load(false);
  state.timer = setInterval(() => { if (!document.hidden) void load(false); }, 4000);
  return () => clearInterval(state.timer);
}

function headerTable(caption, headers) {
  return h('div.table-wrap', {}, h('table.headers', {}, h('caption', {}, caption), h('tbody', {}, headers.map(([name, value]) => h('tr', {}, h('th', { scope: 'row' }, name), h('td', {}, value))))));
}

function bodyBlock(title, part, headers) {
  const pretty = renderBody(part, headers);
  const raw = renderBody(part, headers, true);
  const pre = h('pre.body', { tabindex: '0' }, pretty.text);
  const info = h('span.muted', {}, part.body_size === 0 ? '(empty)' : bodyInfo(part, pretty.kind));
  const note = part.truncated ? h('p.note', {}, 'Cut at the capture limit.') : null;
  let showingPretty = true;
  const toggle = pretty.kind !== 'JSON' ? null : h('button.small', { type: 'button', on: { click: () => {
    showingPretty = !showingPretty;
    const shown = showingPretty ? pretty : raw;
    pre.textContent = shown.text;
    info.textContent = bodyInfo(part, shown.kind);
    toggle.textContent = showingPretty ? 'Raw' : 'Pretty';
  } } }, 'Raw');
  return h('div.body-block', {}, h('h4', {}, title, ' ', info, toggle ? ' ' : null, toggle), note, part.body === '' ? null : pre);
}

function shellQuote(text) {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

const HOP_HEADERS = new Set(['host', 'content-length', 'connection', 'transfer-encoding', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-real-ip', 'accept-encoding']);

/** A curl command that sends the captured request again to the tunnel's public URL. */
export function curlCommand(capture, baseUrl) {
  const parts = ['curl', '-X', capture.method, shellQuote(`${baseUrl}${capture.path}`)];
  for (const [name, value] of capture.request.headers) if (!HOP_HEADERS.has(name.toLowerCase())) parts.push('-H', shellQuote(`${name}: ${value}`));
  if (capture.request.body !== '' && capture.request.body_encoding === 'utf8') parts.push('--data-binary', shellQuote(capture.request.body));
  return parts.join(' ');
}

function showDetail(detail, capture, context) {
  const heading = h('h2', { tabindex: '-1' }, h('span.method', {}, capture.method), ' ', h('span.path', {}, capture.path));
  const result = h('div.replay-result', { 'aria-live': 'polite' });
  const editor = h('div.editor', { hidden: true });
  const curlOut = h('pre.curl', { hidden: true, tabindex: '0' });
  const baseUrl = context.publicUrlOf(capture.subdomain);

  const replay = async (overrides) => {
    clear(result).append(h('p', {}, 'Replaying…'));
    try {
      const replayed = await api('POST', `/api/v1/requests/${encodeURIComponent(capture.id)}/replay`, overrides);
      clear(result).append(
        h('h3', {}, 'Replay result'),
        h('p', {}, `${replayed.method} ${replayed.path} → `, h('strong', {}, replayed.status === 0 ? 'ERR' : String(replayed.status)), ` in ${durationText(replayed.duration_ms)}`, replayed.error ? ` (${replayed.error})` : ''),
        headerTable('Replay response headers', replayed.response.headers),
        bodyBlock('Replay response body', replayed.response, replayed.response.headers),
      );
      context.refreshSoon?.();
    } catch (error) {
      clear(result).append(h('p.error', { role: 'alert' }, errorText(error)));
    }
  };

  const openEditor = () => {
    const method = h('input', { id: 'edit-method', value: capture.method, spellcheck: 'false' });
    const path = h('input', { id: 'edit-path', value: capture.path, spellcheck: 'false' });
    const headers = h('textarea', { id: 'edit-headers', rows: '6', spellcheck: 'false' });
    headers.value = capture.request.headers.filter(([name]) => !['host', 'content-length'].includes(name.toLowerCase())).map(([n, v]) => `${n}: ${v}`).join('\n');
    const body = h('textarea', { id: 'edit-body', rows: '8', spellcheck: 'false' });
    body.value = capture.request.body_encoding === 'utf8' ? capture.request.body : '';
    const send = (event) => {
      event.preventDefault();
      const overrides = { method: method.value.trim(), path: path.value.trim(), headers: {}, body: body.value };
      const kept = new Set();
      for (const line of headers.value.split('\n')) {
        const colon = line.indexOf(':');
        if (line.trim() === '' || colon < 1) continue;
        const name = line.slice(0, colon).trim().toLowerCase();
        overrides.headers[name] = line.slice(colon + 1).trim();
        kept.add(name);
      }
      // Headers deleted in the editor are removed from the replay (null), not kept from the capture.
      for (const [name] of capture.request.headers) if (!kept.has(name.toLowerCase()) && !['host', 'content-length'].includes(name.toLowerCase())) overrides.headers[name.toLowerCase()] = null;
      void replay(overrides);
    };
    clear(editor).append(h('form', { on: { submit: send } },
      h('h3', {}, 'Replay with edits'),
      h('div.grid', {}, h('label', { for: 'edit-method' }, 'Method'), method, h('label', { for: 'edit-path' }, 'Path'), path),
      h('label', { for: 'edit-headers' }, 'Headers (one "Name: value" a line)'), headers,
      h('label', { for: 'edit-body' }, 'Body'), body,
      h('div.actions', {}, h('button', { type: 'submit' }, 'Send replay'), h('button', { type: 'button', on: { click: () => { editor.hidden = true; } } }, 'Cancel'))));
    editor.hidden = false;
    method.focus();
  };

  clear(detail).append(
    heading,
    h('dl.facts', {},
      h('dt', {}, 'Status'), h('dd', {}, capture.status === 0 ? `ERR ${capture.error ?? ''}` : String(capture.status)),
      h('dt', {}, 'Duration'), h('dd', {}, durationText(capture.duration_ms)),
      h('dt', {}, 'Received'), h('dd', {}, dateText(capture.received_at)),
      h('dt', {}, 'Client address'), h('dd', {}, capture.client_address),
      h('dt', {}, 'Token'), h('dd', {}, capture.token_id ?? '—'),
      capture.replay_of ? [h('dt', {}, 'Replay of'), h('dd', {}, capture.replay_of)] : null,
      h('dt', {}, 'Id'), h('dd.mono', {}, capture.id)),
    h('div.actions', {},
      h('button', { type: 'button', on: { click: () => void replay({}) } }, 'Replay'),
      h('button', { type: 'button', on: { click: openEditor } }, 'Replay with edits'),
      h('button', { type: 'button', on: { click: async () => { curlOut.textContent = curlCommand(capture, baseUrl); curlOut.hidden = false; const copied = await copyText(curlOut.textContent, curlOut); context.notify(copied ? 'curl command copied' : 'curl command selected: copy it with Ctrl+C'); } } }, 'Copy as curl')),
    curlOut,
    editor,
    result,
    h('h3', {}, 'Request'),
    headerTable('Request headers', capture.request.headers),
    bodyBlock('Request body', capture.request, capture.request.headers),
    h('h3', {}, `Response ${capture.response.status === 0 ? '' : capture.response.status}`),
    headerTable('Response headers', capture.response.headers),
    bodyBlock('Response body', capture.response, capture.response.headers),
  );
}
