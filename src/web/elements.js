// Building elements for both pages. Everything from an API (and so from whoever sent a captured request)
// becomes a text node or an attribute value, never markup: there is no innerHTML in either page.

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
