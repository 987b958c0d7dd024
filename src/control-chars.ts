/**
 * Text a client chose (a request's path, header values, a body) on its way to a terminal or a log.
 *
 * C0 controls (U+0000-U+001F), DEL (U+007F) and the C1 controls (U+0080-U+009F) drive terminals: ESC
 * starts a sequence, and many terminals take U+009B (CSI) for `ESC [`, so a path could clear the screen,
 * move the cursor or retitle the window of whoever reads the output. Terminal text gets each one as
 * `\xHH`, as nginx writes them to its access log. JSON keeps its own spelling, `\u00HH`, so a parser
 * reads back exactly what was sent, and JSON.stringify already escapes C0; DEL and C1 are added here,
 * so JSON output holds no control character either.
 */

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
/** What a terminal may keep in a multi-line text (a body): line feed and tab. */
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
const JSON_UNESCAPED = /[\u007f-\u009f]/;
const JSON_UNESCAPED_ALL = /[\u007f-\u009f]/g;

const hex = (character: string): string => `\\x${character.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;
const unicode = (character: string): string => `\\u00${character.charCodeAt(0).toString(16).padStart(2, '0')}`;

/** For a terminal: every control character as `\xHH`; with `lines`, line feeds and tabs are kept. A string without any comes back as it is. */
export function escapeControls(text: string, lines = false): string {
  if (!CONTROL.test(text)) return text;
  return text.replace(lines ? CONTROL_BUT_LINES : CONTROLS, hex);
}

/** JSON.stringify whose output holds no control character (DEL and C1 as `\u00HH` too). */
export function controlSafeJson(value: unknown, space?: number): string {
  const text = JSON.stringify(value, null, space);
  return JSON_UNESCAPED.test(text) ? text.replace(JSON_UNESCAPED_ALL, unicode) : text;
}

/** One string as a JSON string literal, control-safe; the test alone when there is nothing to escape (the access log's path). */
export function controlSafeJsonString(text: string): string {
  const quoted = JSON.stringify(text);
  return JSON_UNESCAPED.test(text) ? quoted.replace(JSON_UNESCAPED_ALL, unicode) : quoted;
}
