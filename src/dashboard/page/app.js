// The Burrow dashboard: sign-in, navigation and the pages (docs/dashboard.md). Plain modules, no
// framework, no build step. The session lives in an HttpOnly cookie the page cannot read; the page
// learns whether it is signed in by asking GET /api/v1/session.
import { api, errorText, onApiFailure } from './api.js';
import { dateText, labelled, table } from './dom.js';
import { clear, copyText, h } from './elements.js';
import { sizeText } from './exchange-format.js';
import { openPolicyEditor } from './policy.js';
import { requestsView } from './requests.js';

const $ = (id) => document.getElementById(id);
const VIEWS = ['tunnels', 'requests', 'tokens', 'reserved', 'queue', 'account'];
/** `seen`: every subdomain this page saw live, so a closed tunnel's requests stay one click away. */
const state = { session: null, leave: null, seen: new Set() };

// ---- sign-in and the shell -----------------------------------------------------------------------------

function showSignIn(message) {
  state.session = null;
  leaveView();
  $('shell').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message ?? '';
  $('signin-token').focus();
}

async function showShell() {
  $('signin').hidden = true;
  $('shell').hidden = false;
  $('who').textContent = `${state.session.account.email} · ${state.session.account.plan}`;
  await route();
}

async function start() {
  let message;
  try {
    // 204 (null) when this browser has no session: a first visit is not an error.
    state.session = await api('GET', '/api/v1/session');
  } catch (error) {
    state.session = null;
    message = error.status === 401 ? 'Your session ended (signed out elsewhere, idle too long, or its token was revoked): sign in again.' : errorText(error);
  }
  if (state.session === null) showSignIn(message);
  else await showShell();
}

$('signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = $('signin-token');
  const token = input.value.trim();
  $('signin-error').textContent = '';
  try {
    state.session = await api('POST', '/api/v1/session', { token });
    input.value = '';
    // Without a hashchange event: showShell routes once.
    if (!location.hash) history.replaceState(null, '', '#/tunnels');
    await showShell();
  } catch (error) {
    $('signin-error').textContent = errorText(error);
    input.select();
  }
});

$('signout').addEventListener('click', async () => {
  try {
    await api('DELETE', '/api/v1/session');
  } catch {
    // Signed out already (revoked or expired): the sign-in screen is right either way.
  }
  showSignIn('Signed out.');
});

onApiFailure((error) => {
  if (error.status === 401 && state.session !== null) showSignIn(`${errorText(error)}`);
});

// One line under the navigation for both: an error (red, until the next action clears it) or a notice of
// success (green, gone after a moment). Each sets its own class, so an error that follows a notice is
// never shown in the notice's colour.
let noticeTimer = null;

function setError(error) {
  const element = $('error');
  clearTimeout(noticeTimer);
  element.className = 'error';
  element.setAttribute('role', 'alert');
  element.hidden = error === null;
  element.textContent = error === null ? '' : errorText(error);
}

function notify(message) {
  const element = $('error');
  clearTimeout(noticeTimer);
  element.className = 'notice';
  element.setAttribute('role', 'status');
  element.hidden = false;
  element.textContent = message;
  noticeTimer = setTimeout(() => setError(null), 2500);
}

function leaveView() {
  if (state.leave !== null) state.leave();
  state.leave = null;
}

let routeTicket = 0;

async function route() {
  if (state.session === null) return;
  const ticket = ++routeTicket;
  leaveView();
  setError(null);
  const [, name = 'tunnels', argument] = /^#\/([a-z]+)(?:\/(.*))?$/.exec(location.hash) ?? [];
  const view = VIEWS.includes(name) ? name : 'tunnels';
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.view === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const root = clear($('view'));
  try {
    const leave = (await VIEW_FUNCTIONS[view](root, argument === undefined ? null : argument)) ?? null;
    // Another route began while this view loaded: this one is gone, and so must be its timers.
    if (ticket === routeTicket) state.leave = leave;
    else leave?.();
  } catch (error) {
    if (ticket === routeTicket) setError(error);
  }
}

window.addEventListener('hashchange', () => void route());

// ---- confirmation dialog -------------------------------------------------------------------------------

/** Asks first; once confirmed, sends the DELETE, says `done`, shows an error as text, and refreshes. */
async function confirmThenDelete(dialog, path, done, refresh) {
  if (!(await confirmAction(dialog))) return;
  try {
    await api('DELETE', path);
    notify(done);
  } catch (error) {
    setError(error);
  }
  await refresh();
}

/** Asks in a modal dialog; resolves true when the `confirmLabel` button was chosen. */
function confirmAction({ title, text, warnings = [], confirmLabel }) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  clear($('confirm-warnings')).append(...warnings.map((warning) => h('li', {}, warning)));
  $('confirm-warnings').hidden = warnings.length === 0;
  $('confirm-ok').textContent = confirmLabel;
  dialog.returnValue = '';
  dialog.showModal();
  // Cancel has the focus: Enter pressed once too often must not revoke or close anything.
  $('confirm-cancel').focus();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true }));
}

// ---- shared look-ups -----------------------------------------------------------------------------------

async function loadTunnelsAndReservations() {
  const [{ tunnels }, { reserved_subdomains: reserved }] = await Promise.all([api('GET', '/api/v1/tunnels'), api('GET', '/api/v1/reserved-subdomains')]);
  for (const tunnel of tunnels) state.seen.add(tunnel.subdomain);
  return { tunnels, reserved };
}

/** A tunnel's public URL, from the edge's pattern (GET /api/v1/session). */
function publicUrlOf(subdomain) {
  const pattern = state.session?.tunnel_url ?? `${location.protocol}//{subdomain}.${location.host.replace(/^api\./, '')}`;
  return pattern.replace('{subdomain}', subdomain);
}

// ---- Tunnels -------------------------------------------------------------------------------------------

async function tunnelsView(root) {
  const body = h('div');
  root.append(h('h1', {}, 'Tunnels'), h('p.muted', {}, 'Live tunnels of this account; the list refreshes every few seconds.'), body);
  let tokens = new Map();
  const refresh = async () => {
    try {
      const [{ tunnels, reserved }, tokenList] = await Promise.all([loadTunnelsAndReservations(), api('GET', '/api/v1/tokens')]);
      tokens = new Map(tokenList.tokens.map((token) => [token.id, token]));
      const reservedNames = new Set(reserved.map((record) => record.subdomain));
      const rows = tunnels.map((tunnel) => {
        const token = tokens.get(tunnel.token_id);
        return h('tr', {},
          h('td', {}, h('a', { href: `#/requests/${encodeURIComponent(tunnel.subdomain)}`, 'aria-label': `Requests of ${tunnel.subdomain}` }, tunnel.subdomain)),
          h('td', {}, h('a', { href: publicUrlOf(tunnel.subdomain), rel: 'noreferrer noopener', target: '_blank' }, publicUrlOf(tunnel.subdomain))),
          h('td.num', {}, String(tunnel.port)),
          h('td', {}, dateText(tunnel.started_at)),
          h('td', {}, token === undefined ? tunnel.token_id : `${token.label} (${token.prefix}…)`),
          h('td', {}, reservedNames.has(tunnel.subdomain) ? 'yes' : 'no'),
          h('td', {}, h('button.danger', { type: 'button', 'aria-label': 'Close', title: `Close ${tunnel.subdomain}`, on: { click: () => void close(tunnel) } }, 'Close')));
      });
      clear(body).append(table('Live tunnels', ['Subdomain', 'Public URL', 'Port', 'Started', 'Token', 'Reserved', ''], rows, 'No live tunnels. Start one with "burrow http <port>".'));
      setError(null);
    } catch (error) {
      setError(error);
    }
  };
  const close = (tunnel) =>
    confirmThenDelete(
      {
        title: `Close ${tunnel.subdomain}?`,
        text: `The tunnel ${publicUrlOf(tunnel.subdomain)} ends now; its client is told so and does not reconnect. Captured requests stay.`,
        confirmLabel: 'Close tunnel',
      },
      `/api/v1/tunnels/${encodeURIComponent(tunnel.subdomain)}`,
      `Closed ${tunnel.subdomain}.`,
      refresh,
    );
  await refresh();
  const timer = setInterval(() => { if (!document.hidden) void refresh(); }, 3000);
  return () => clearInterval(timer);
}

// ---- Requests ------------------------------------------------------------------------------------------

/** #/requests/NAME opens a tunnel's requests, #/requests/NAME/ID one of them too. */
async function requestsPage(root, argument) {
  const [subdomain = null, request = null] = argument === null ? [] : argument.split('/', 2).map(decodeURIComponent);
  const [{ tunnels, reserved }, instance] = await Promise.all([loadTunnelsAndReservations(), api('GET', '/api/v1/instance')]);
  const names = [...new Set([...tunnels.map((tunnel) => tunnel.subdomain), ...reserved.map((record) => record.subdomain), ...state.seen])];
  if (subdomain !== null && !names.includes(subdomain)) names.unshift(subdomain);
  return requestsView({ root, subdomains: names, preferred: subdomain, request, setError, notify, publicUrlOf, build: instance.build });
}

// ---- Access tokens -------------------------------------------------------------------------------------

async function tokensView(root) {
  const label = h('input', { id: 'token-label', maxlength: '64', required: true, autocomplete: 'off' });
  const created = h('div', { 'aria-live': 'polite' });
  const list = h('div');
  const create = async (event) => {
    event.preventDefault();
    try {
      const token = await api('POST', '/api/v1/tokens', { label: label.value });
      label.value = '';
      const secret = h('code.secret', { id: 'new-token' }, token.token);
      // The secret lives only in this element: "Done" removes it for good.
      clear(created).append(h('section.once', { 'aria-label': 'New token' },
        h('h2', {}, `Token "${token.label}" created`),
        h('p.warning', {}, "Copy it now: you won't see it again. Burrow keeps only its hash."),
        secret,
        h('div.actions', {},
          h('button', { type: 'button', on: { click: async () => notify((await copyText(token.token, secret)) ? 'Token copied.' : 'Token selected: copy it with Ctrl+C.') } }, 'Copy token'),
          h('button', { type: 'button', on: { click: () => clear(created) } }, 'Done'))));
      await refresh();
    } catch (error) {
      setError(error);
    }
  };
  const refresh = async () => {
    const [{ tokens }, { tunnels }] = await Promise.all([api('GET', '/api/v1/tokens'), api('GET', '/api/v1/tunnels')]);
    const rows = tokens.map((token) => h('tr', {},
      h('td', {}, token.label, token.id === state.session.token_id ? h('span.badge', {}, 'this session') : null),
      h('td.mono', {}, `${token.prefix}…`),
      h('td', {}, dateText(token.created_at)),
      h('td', {}, dateText(token.last_used_at)),
      h('td.num', {}, String(tunnels.filter((tunnel) => tunnel.token_id === token.id).length)),
      h('td', {}, h('button.danger', { type: 'button', 'aria-label': 'Revoke', title: `Revoke ${token.label}`, on: { click: () => void revoke(token, tunnels) } }, 'Revoke'))));
    clear(list).append(table('Active tokens', ['Label', 'Prefix', 'Created', 'Last used', 'Live tunnels', ''], rows, 'No active tokens.'));
  };
  const revoke = async (token, tunnels) => {
    const live = tunnels.filter((tunnel) => tunnel.token_id === token.id).map((tunnel) => tunnel.subdomain);
    const warnings = [];
    if (token.id === state.session.token_id) warnings.push('This is the token of your current session: revoking it signs you out.');
    if (live.length > 0) warnings.push(`${live.length} live tunnel${live.length === 1 ? '' : 's'} use${live.length === 1 ? 's' : ''} this token and will close now: ${live.join(', ')}.`);
    const ok = await confirmAction({ title: `Revoke "${token.label}"?`, text: `Clients using ${token.prefix}… can no longer connect or call the API.`, warnings, confirmLabel: 'Revoke token' });
    if (!ok) return;
    try {
      await api('DELETE', `/api/v1/tokens/${encodeURIComponent(token.id)}`);
      if (token.id === state.session.token_id) {
        showSignIn('The token of this session was revoked: sign in with another token.');
        return;
      }
      notify(`Revoked ${token.label}.`);
      await refresh();
    } catch (error) {
      setError(error);
    }
  };
  root.append(
    h('h1', {}, 'Access tokens'),
    h('form.inline', { on: { submit: create } }, h('label', { for: 'token-label' }, 'Label'), label, h('button', { type: 'submit' }, 'Create token')),
    created,
    list,
  );
  await refresh();
}

// ---- Reserved subdomains -------------------------------------------------------------------------------

async function reservedView(root) {
  const name = h('input', { id: 'reserve-name', required: true, autocomplete: 'off', spellcheck: 'false' });
  const list = h('div');
  const editorHost = h('div');
  const refresh = async () => {
    const { tunnels, reserved } = await loadTunnelsAndReservations();
    const live = new Set(tunnels.map((tunnel) => tunnel.subdomain));
    // A TCP port or a TLS passthrough name has no offline mode, stored policy or queue: the edge reads no HTTP on it.
    const http = (record) => (record.kind ?? 'http') === 'http';
    const rows = reserved.map((record) => h('tr', {},
      h('td', {}, record.subdomain),
      h('td', {}, RESERVATION_KINDS[record.kind] ?? record.kind),
      h('td', {}, dateText(record.created_at)),
      h('td', {}, live.has(record.subdomain) ? 'live' : 'idle'),
      h('td', {}, http(record) ? offlineSelect(record) : '-'),
      h('td', {}, http(record) ? [record.policy ?? 'none', ' ', h('button.small', { type: 'button', 'aria-label': `Policy of ${record.subdomain}`, on: { click: () => void editPolicy(record.subdomain) } }, 'Edit')] : `CIDR rules of burrow ${record.kind}`),
      h('td', {}, http(record) ? h('a', { href: `#/queue/${encodeURIComponent(record.subdomain)}`, 'aria-label': `Queue of ${record.subdomain}` }, 'Queue') : '-'),
      h('td', {}, h('button.danger', { type: 'button', 'aria-label': 'Release', title: `Release ${record.subdomain}`, on: { click: () => void release(record, live.has(record.subdomain)) } }, 'Release'))));
    clear(list).append(table('Reserved subdomains', ['Subdomain', 'Kind', 'Reserved', 'Tunnel', 'Offline mode', 'Policy', 'Held webhooks', ''], rows, 'No reserved subdomains.'));
  };
  /** The name's policy (docs/policies.md) in an editor under the list (src/dashboard/page/policy.js). */
  const editPolicy = async (subdomain) => {
    setError(null);
    try {
      const editor = await openPolicyEditor(editorHost, subdomain, {
        onDone: async () => {
          clear(editorHost);
          await refresh();
        },
        report: setError,
        notify,
        confirm: confirmAction,
      });
      editor.querySelector('input, textarea')?.focus();
    } catch (error) {
      setError(error);
    }
  };
  /** The name's offline mode (docs/offline.md): changed at once, with PATCH, when another is chosen. */
  const offlineSelect = (record) => {
    const select = h('select', { 'aria-label': 'Offline mode', title: `Offline mode of ${record.subdomain}` },
      OFFLINE_MODES.map(([value, text]) => h('option', { value, selected: value === record.offline }, text)));
    select.addEventListener('change', async () => {
      try {
        const updated = await api('PATCH', `/api/v1/reserved-subdomains/${encodeURIComponent(record.subdomain)}`, { offline: select.value });
        record.offline = updated.offline;
        notify(`Offline mode of ${record.subdomain}: ${updated.offline}.`);
      } catch (error) {
        select.value = record.offline;
        setError(error);
      }
    });
    return select;
  };
  const reserveWith = async (body) => {
    try {
      const record = await api('POST', '/api/v1/reserved-subdomains', body);
      name.value = '';
      notify(record.kind === 'tcp' ? `Reserved ${record.subdomain}: burrow tcp LOCAL_PORT --remote-port ${record.subdomain.slice(4)}.` : `Reserved ${record.subdomain}.`);
      await refresh();
    } catch (error) {
      setError(error);
    }
  };
  const reserve = (event) => {
    event.preventDefault();
    return reserveWith({ subdomain: name.value.trim() });
  };
  const release = (record, live) => {
    const warnings = [];
    if (live) warnings.push(`A tunnel is live on ${record.subdomain}: it keeps running, but once it disconnects any account may take the name.`);
    if (record.offline === 'queue') warnings.push(`Webhooks held for ${record.subdomain} are dropped.`);
    return confirmThenDelete(
      {
        title: `Release ${record.subdomain}?`,
        text: `${record.subdomain} stops being yours alone: another account can reserve it or open a tunnel on it.`,
        warnings,
        confirmLabel: 'Release subdomain',
      },
      `/api/v1/reserved-subdomains/${encodeURIComponent(record.subdomain)}`,
      `Released ${record.subdomain}.`,
      refresh,
    );
  };
  root.append(
    h('h1', {}, 'Reserved subdomains'),
    h('p.muted', {}, 'A reserved name is yours alone: no other account can open a tunnel on it. A TCP port of the edge (tcp:PORT, for burrow tcp --remote-port PORT) is reserved the same way.'),
    h('form.inline', { on: { submit: reserve } }, h('label', { for: 'reserve-name' }, 'Subdomain'), name, h('button', { type: 'submit' }, 'Reserve'),
      h('button', { type: 'button', on: { click: () => void reserveWith({ kind: 'tcp' }) } }, 'Reserve a TCP port')),
    list,
    editorHost,
  );
  await refresh();
}

const RESERVATION_KINDS = { http: 'HTTP', tls: 'TLS passthrough', tcp: 'TCP port' };

const OFFLINE_MODES = [['off', 'off (404)'], ['reject', 'reject (503, retry later)'], ['queue', 'queue (hold and deliver)']];

// ---- Queue ---------------------------------------------------------------------------------------------

/** The webhooks held for one reserved subdomain (docs/offline.md): redeliver, discard, pause, resume. */
async function queueView(root, path) {
  const argument = path === null ? null : decodeURIComponent(path);
  const { reserved_subdomains: reserved } = await api('GET', '/api/v1/reserved-subdomains');
  const names = reserved.filter((record) => (record.kind ?? 'http') === 'http').map((record) => record.subdomain);
  if (argument !== null && !names.includes(argument)) names.unshift(argument);
  let subdomain = argument ?? names[0] ?? null;
  root.append(h('h1', {}, 'Queue'), h('p.muted', {}, 'Webhooks held for a reserved subdomain while its tunnel is offline (offline mode "queue"), delivered in order when it connects.'));
  if (subdomain === null) {
    root.append(h('p.empty', {}, 'No reserved subdomains: reserve one, set its offline mode to "queue", and held webhooks appear here.'));
    return null;
  }
  const select = h('select', { id: 'queue-subdomain' }, names.map((name) => h('option', { value: name, selected: name === subdomain }, name)));
  const facts = h('div');
  const pauseButton = h('button', { type: 'button', on: { click: () => void togglePause() } }, 'Pause queue');
  const discardAllButton = h('button.danger', { type: 'button', on: { click: () => void discardAll() } }, 'Discard all');
  const list = h('div');
  let paused = false;
  select.addEventListener('change', () => {
    subdomain = select.value;
    history.replaceState(null, '', `#/queue/${encodeURIComponent(subdomain)}`);
    void refresh();
  });
  root.append(h('div.filters', {}, h('label', { for: 'queue-subdomain' }, 'Reserved subdomain'), select, pauseButton, discardAllButton), facts, list);

  const refresh = async () => {
    try {
      const queue = await api('GET', `/api/v1/queue?subdomain=${encodeURIComponent(subdomain)}`);
      paused = queue.paused;
      pauseButton.textContent = paused ? 'Resume queue' : 'Pause queue';
      clear(facts).append(h('dl.facts', {},
        h('dt', {}, 'Offline mode'), h('dd', {}, queue.offline),
        h('dt', {}, 'Delivery'), h('dd', {}, queue.paused ? 'paused: nothing is delivered, live requests are held too' : 'running'),
        h('dt', {}, 'Held'), h('dd', {}, `${queue.events} event${queue.events === 1 ? '' : 's'}, ${sizeText(queue.bytes)}`),
        h('dt', {}, 'Expired'), h('dd', {}, String(queue.expired))));
      const rows = queue.queue.map((event) => h('tr', {},
        h('td.mono', {}, event.id),
        h('td', {}, event.state),
        h('td.num', {}, String(event.attempts)),
        h('td', {}, dateText(event.received_at)),
        h('td.num', {}, sizeText(event.size)),
        h('td', {}, `${event.method} ${event.path}`),
        h('td', {}, event.last_status === null ? '—' : `${event.last_status}${event.last_error ? ` ${event.last_error}` : ''}`),
        h('td', {}, h('div.actions', {},
          event.state === 'delivering' ? null : h('button', { type: 'button', 'aria-label': 'Redeliver', title: `Redeliver ${event.id}`, on: { click: () => void redeliver(event) } }, 'Redeliver'),
          h('button.danger', { type: 'button', 'aria-label': 'Discard', title: `Discard ${event.id}`, on: { click: () => void discard(event) } }, 'Discard')))));
      clear(list).append(table(`Held webhooks of ${subdomain}, oldest first`, ['Event', 'State', 'Attempts', 'Received', 'Size', 'Request', 'Last status', ''], rows, 'Nothing held.'));
      setError(null);
    } catch (error) {
      setError(error);
    }
  };
  const redeliver = async (event) => {
    try {
      await api('POST', `/api/v1/queue/${encodeURIComponent(event.id)}/deliver`);
      notify(`${event.id} queued for delivery.`);
    } catch (error) {
      setError(error);
    }
    await refresh();
  };
  const discard = (event) =>
    confirmThenDelete(
      {
        title: `Discard ${event.id}?`,
        text: `The held ${event.method} ${event.path} (${sizeText(event.size)}) is dropped and never delivered again.`,
        confirmLabel: 'Discard event',
      },
      `/api/v1/queue/${encodeURIComponent(event.id)}`,
      `Discarded ${event.id}.`,
      refresh,
    );
  const discardAll = () =>
    confirmThenDelete(
      {
        title: `Discard every event of ${subdomain}?`,
        text: 'Every held event of this name (queued, failed and delivered) is dropped and never delivered again.',
        confirmLabel: 'Discard all events',
      },
      `/api/v1/queue?subdomain=${encodeURIComponent(subdomain)}&state=all`,
      `Discarded every event of ${subdomain}.`,
      refresh,
    );
  const togglePause = async () => {
    try {
      await api('POST', `/api/v1/queue/${paused ? 'resume' : 'pause'}?subdomain=${encodeURIComponent(subdomain)}`);
    } catch (error) {
      setError(error);
    }
    await refresh();
  };
  await refresh();
  const timer = setInterval(() => { if (!document.hidden) void refresh(); }, 3000);
  return () => clearInterval(timer);
}

// ---- Account -------------------------------------------------------------------------------------------

async function accountView(root) {
  const [me, billing, instance, session, { reserved_subdomains: reserved }] = await Promise.all([
    api('GET', '/api/v1/auth/me'),
    api('GET', '/api/v1/billing/summary'),
    api('GET', '/api/v1/instance'),
    api('GET', '/api/v1/session'),
    api('GET', '/api/v1/reserved-subdomains'),
  ]);
  const usage = (label, used, limit) => h('tr', {}, h('th', { scope: 'row' }, label), h('td.num', {}, used), h('td.num', {}, limit),
    h('td', {}, typeof used === 'number' && typeof limit === 'number' ? h('meter', { min: '0', max: String(limit), value: String(used), 'aria-label': `${label} used` }) : ''));
  const u = billing.usage;
  const l = billing.limits;
  root.append(
    h('h1', {}, 'Account'),
    h('dl.facts', {},
      h('dt', {}, 'Email'), h('dd', {}, me.email),
      h('dt', {}, 'Plan'), h('dd', {}, me.plan),
      h('dt', {}, 'Account id'), h('dd.mono', {}, me.id),
      h('dt', {}, 'Session'), h('dd', {}, `token ${session.token_id}, ends ${dateText(session.expires_at)} unless used`)),
    h('h2', {}, 'Usage this period'),
    h('p.muted', {}, `${dateText(billing.period.start)} to ${dateText(billing.period.end)}`),
    h('div.table-wrap', {}, labelled(h('table.cards', {}, h('caption', {}, 'Usage against the plan\'s limits'),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'What'), h('th.num', { scope: 'col' }, 'Used'), h('th.num', { scope: 'col' }, 'Limit'), h('th', { scope: 'col' }, 'Share'))),
      h('tbody', {},
        usage('Active tokens', u.active_tokens, l.active_tokens),
        usage('Active tunnels', u.active_tunnels, l.active_tunnels),
        usage('Reserved subdomains', reserved.length, l.reserved_subdomains),
        usage('Requests', u.requests, '—'),
        usage('Bytes in', sizeText(u.bytes_in), '—'),
        usage('Bytes out', sizeText(u.bytes_out), '—'),
        usage('Captured requests per tunnel', '—', l.captured_requests_per_tunnel),
        usage('Capture retention', '—', `${l.retention_hours} h`),
        usage('API requests per minute', '—', l.requests_per_minute))))),
    h('h2', {}, 'Instance'),
    h('dl.facts', {},
      h('dt', {}, 'Build'), h('dd', {}, instance.build),
      h('dt', {}, 'Region'), h('dd', {}, instance.region),
      h('dt', {}, 'Server time'), h('dd', {}, dateText(instance.server_time))),
  );
}

const VIEW_FUNCTIONS = { tunnels: tunnelsView, requests: requestsPage, tokens: tokensView, reserved: reservedView, queue: queueView, account: accountView };

void start();
