// A WebSocket connection's life and messages, instead of bodies: opened, closed, close code, counts, and
// the kept messages (time, direction, text or binary, size, data). A binary message is a hex dump even
// when its bytes happen to be valid text; a long message wraps or scrolls inside its cell, so the table
// never grows wider than its pane. Message data is text, never markup.
import { h } from './elements.js';
import { messageText, sizeText, timeText } from './exchange-format.js';

function timeOrDash(iso) {
  return iso === null ? '—' : `${timeText(iso)}  (${iso})`;
}

/** `note`: a line under the heading (the inspector says where the connection is recorded). */
export function webSocketPane({ note = null } = {}) {
  const opened = h('dd', { id: 'ws-opened' });
  const closed = h('dd', { id: 'ws-closed' });
  const code = h('dd', { id: 'ws-code' });
  const counts = h('dd', { id: 'ws-counts' });
  const messages = h('tbody', { id: 'ws-messages' });
  const element = h('section.pane.ws-pane', { id: 'ws-pane', 'aria-label': 'WebSocket connection', hidden: true },
    h('h3', {}, 'WebSocket'),
    note === null ? null : h('p.muted.note', { id: 'ws-note' }, note),
    h('dl.facts', {},
      h('dt', {}, 'Opened'), opened,
      h('dt', {}, 'Closed'), closed,
      h('dt', {}, 'Close code'), code,
      h('dt', {}, 'Messages'), counts),
    h('table.messages', {},
      h('caption', {}, 'Messages, oldest first'),
      h('colgroup', {}, h('col.m-time'), h('col.m-direction'), h('col.m-type'), h('col.m-size'), h('col.m-data')),
      h('thead', {}, h('tr', {}, ['Time', 'Direction', 'Type', 'Size', 'Data'].map((name) => h('th', { scope: 'col' }, name)))),
      messages));

  return {
    element,
    /** Shows `exchange`'s connection, or hides the pane when it is not a WebSocket. */
    show(exchange) {
      const ws = exchange.websocket ?? null;
      element.hidden = ws === null;
      if (ws === null) return;
      const kept = exchange.messages ?? [];
      opened.textContent = timeOrDash(ws.opened_at);
      closed.textContent = ws.closed_at === null ? 'open' : timeOrDash(ws.closed_at);
      code.textContent = ws.close_code === null ? '—' : `${ws.close_code}${ws.close_reason === '' ? '' : ` (${ws.close_reason})`}`;
      counts.textContent = `${ws.messages_in} in · ${ws.messages_out} out${kept.length < ws.messages_in + ws.messages_out ? ` (the last ${kept.length} kept)` : ''}`;
      messages.replaceChildren(...kept.map((message) => h(`tr.ws-${message.direction}`, {},
        h('td', {}, timeText(message.at)),
        h('td', {}, message.direction === 'in' ? '→ local' : '← local'),
        h('td', {}, message.binary ? 'binary' : 'text'),
        h('td', {}, sizeText(message.size) + (message.truncated ? ' (cut)' : '')),
        h('td', {}, h(`pre.ws-data${message.binary ? '.hex' : ''}`, { tabindex: '0' }, messageText(message))))));
    },
  };
}
