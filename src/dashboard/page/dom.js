// Building the page's elements. Everything from the API (and so from whoever sent a captured request)
// becomes a text node or an attribute value, never markup: there is no innerHTML anywhere in the page.

/** h('tag.class', {attributes, on: {event: fn}}, ...children): strings are text, null is skipped. */
export function h(tag, attributes = {}, ...children) {
  const [name, ...classes] = tag.split('.');
  const element = document.createElement(name);
  if (classes.length > 0) element.className = classes.join(' ');
  for (const [key, value] of Object.entries(attributes ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'on') for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    else if (key === 'text') element.textContent = String(value);
    else if (key in element && typeof value !== 'string') element[key] = value;
    else element.setAttribute(key, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(element) {
  element.replaceChildren();
  return element;
}

export function dateText(iso) {
  if (iso === null || iso === undefined) return 'never';
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A table with a caption (its accessible name), column heads and rows of cells. */
export function table(caption, heads, rows, empty) {
  if (rows.length === 0) return h('p.empty', {}, empty);
  return h('div.table-wrap', {}, labelled(h('table.cards', {}, h('caption', {}, caption), h('thead', {}, h('tr', {}, heads.map((head) => h('th', { scope: 'col' }, head)))), h('tbody', {}, rows))));
}

/** Gives each body cell its column's head as data-label: on narrow screens rows show as cards with labels. */
export function labelled(tableElement) {
  const heads = [...tableElement.querySelectorAll('thead th')].map((th) => th.textContent);
  for (const row of tableElement.querySelectorAll('tbody tr')) {
    [...row.children].forEach((cell, index) => cell.setAttribute('data-label', heads[index] ?? ''));
  }
  return tableElement;
}

/** Copies text; falls back to selecting it when the clipboard is not available (plain HTTP). */
export async function copyText(text, selectable) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (selectable !== undefined) {
      const range = document.createRange();
      range.selectNodeContents(selectable);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    }
    return false;
  }
}
