// The dashboard's own element helpers: dates and its tables (the element builder is shared with the
// inspector's page, src/web/elements.js).
import { h } from './elements.js';

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
