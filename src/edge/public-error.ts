/**
 * What the edge answers by itself on a tunnel host (no such tunnel, the local server down or too slow,
 * a refusal): a small HTML page when the request is a browser navigation (its Accept prefers
 * `text/html`), the spec's JSON `{"error":{"code","message"}}` otherwise, the code in both and in the
 * `Burrow-Error` header, so people and programs alike tell the edge's answer from the app's.
 *
 * Pure: status, header pairs and body from (code, message, Accept). The response writers put them on
 * the wire. The page is text only: every value is escaped, it loads nothing, and its CSP allows only
 * its own inline style (by hash).
 */
import { createHash } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { defaultErrorJson, ERROR_CODES, type ErrorCode } from '../errors.js';

/** The header that marks the edge's own answers (DESIGN.md section 4: `burrow-error`; names are case-insensitive). */
export const BURROW_ERROR_HEADER = 'Burrow-Error';

export interface PublicErrorAnswer {
  status: number;
  /** Content-Type, Burrow-Error and, for the page, its security headers; in this order. */
  headers: readonly (readonly [string, string])[];
  body: string;
}

const PAGE_STYLE =
  'body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1d2330;background:#f6f7f9}' +
  'main{max-width:36rem;margin:12vh auto;padding:0 1.25rem}' +
  '.status{margin:0;color:#5d6675;font-size:.9rem;letter-spacing:.04em;text-transform:uppercase}' +
  'h1{margin:.25rem 0 1rem;font-size:1.5rem;line-height:1.25}' +
  'code{font:.95em ui-monospace,monospace;background:#e7e9ee;padding:.1em .35em;border-radius:4px}' +
  '.note{margin-top:2rem;color:#5d6675;font-size:.875rem}' +
  '@media (prefers-color-scheme:dark){body{color:#e6e8ec;background:#14171c}.status,.note{color:#9aa3b2}code{background:#262b33}}';

/** No script, no image, no frame, no form: the page's own style and nothing else. */
export const ERROR_PAGE_CSP =
  `default-src 'none'; style-src 'sha256-${createHash('sha256').update(PAGE_STYLE).digest('base64')}'; ` +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE_SECURITY_HEADERS: readonly (readonly [string, string])[] = [
  ['Content-Security-Policy', ERROR_PAGE_CSP],
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
  // The tunnel may be back a second later: a browser must not keep this page for the URL.
  ['Cache-Control', 'no-store'],
];

/** Per code, built once: the JSON answer's headers (an error flood on a tunnel host allocates nothing here). */
const jsonHeaders = new Map<ErrorCode, readonly (readonly [string, string])[]>();

function jsonHeadersOf(code: ErrorCode): readonly (readonly [string, string])[] {
  let headers = jsonHeaders.get(code);
  if (headers === undefined) {
    headers = [
      ['Content-Type', 'application/json'],
      [BURROW_ERROR_HEADER, code],
    ];
    jsonHeaders.set(code, headers);
  }
  return headers;
}

/** The spec's error body: the code's cached default, or this message. */
export function errorJson(code: ErrorCode, message: string): string {
  return message === ERROR_CODES[code].message ? defaultErrorJson(code) : JSON.stringify({ error: { code, message } });
}

/**
 * The edge's answer to a public request on a tunnel host. HTML when `accept` prefers `text/html` (a
 * browser navigation), JSON otherwise (curl's `*\/*`, fetch, webhook senders, API clients).
 */
export function publicErrorAnswer(code: ErrorCode, message: string, accept: string): PublicErrorAnswer {
  const status = ERROR_CODES[code].status;
  if (!acceptsHtml(accept)) return { status, headers: jsonHeadersOf(code), body: errorJson(code, message) };
  return {
    status,
    headers: [['Content-Type', 'text/html; charset=utf-8'], [BURROW_ERROR_HEADER, code], ...PAGE_SECURITY_HEADERS],
    body: errorPage(code, message),
  };
}

/**
 * Whether an Accept header asks for HTML before JSON: `text/html` listed with a quality above 0 and
 * above `application/json`'s. Wildcards count for neither, so `*\/*` and an absent header get JSON.
 */
export function acceptsHtml(accept: string): boolean {
  if (accept === '' || !accept.toLowerCase().includes('text/html')) return false;
  let html = 0;
  let json = 0;
  for (const range of accept.toLowerCase().split(',')) {
    const [type = '', ...parameters] = range.split(';');
    const media = type.trim();
    if (media !== 'text/html' && media !== 'application/json') continue;
    let quality = 1;
    for (const parameter of parameters) {
      const [name, value] = parameter.split('=');
      if (name?.trim() === 'q') quality = Number(value?.trim());
    }
    if (!Number.isFinite(quality)) quality = 0;
    if (media === 'text/html') html = Math.max(html, quality);
    else json = Math.max(json, quality);
  }
  return html > 0 && html > json;
}

/** The Accept value of a flat [name, value, ...] header list with lower-case names ('' when absent). */
export function acceptOf(headers: readonly string[]): string {
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === 'accept') return headers[i + 1]!;
  return '';
}

/** The page: the status, what the code means, the message (it may name the host), the code. */
export function errorPage(code: ErrorCode, message: string): string {
  const { status, message: meaning } = ERROR_CODES[code];
  const reason = STATUS_CODES[status] ?? '';
  const detail = message === meaning ? '' : `<p>${escapeHtml(message)}</p>\n`;
  return (
    '<!doctype html>\n' +
    '<html lang="en">\n' +
    '<head>\n' +
    '<meta charset="utf-8">\n' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n' +
    '<meta name="robots" content="noindex">\n' +
    `<title>${status} ${escapeHtml(reason)} · ${code}</title>\n` +
    `<style>${PAGE_STYLE}</style>\n` +
    '</head>\n' +
    '<body>\n' +
    '<main>\n' +
    `<p class="status">${status} ${escapeHtml(reason)}</p>\n` +
    `<h1>${escapeHtml(meaning)}</h1>\n` +
    detail +
    `<p>Error code: <code>${code}</code></p>\n` +
    '<p class="note">This answer comes from the Burrow edge, not from the app behind the tunnel.</p>\n' +
    '</main>\n' +
    '</body>\n' +
    '</html>\n'
  );
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ESCAPES[character]!);
}
