/**
 * The web dashboard's static files (src/dashboard/page/, and src/web/ which it shares with the local
 * inspector's page), served from memory on the
 * API host: the page at `/`, its files under `/dashboard/`. Everything else on the API host stays the
 * API's (so `/health` and unknown paths keep answering the API's 404). The page talks to `/api/v1` only.
 *
 * tsc copies no non-.ts files: as with the inspector (src/inspector/assets.ts), the compiled module
 * reads the files from the source tree (`../../../src/dashboard/page/`), or from `../dashboard/page/`
 * next to it when running from source.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ServerExchange } from '../http1/server.js';
import { writeOwn } from './responses.js';

interface Asset {
  body: Buffer;
  contentType: string;
}

export const DASHBOARD_PREFIX = '/dashboard/';

/** URL path → file name and content type. Nothing else is served. */
const FILES: Record<string, [string, string]> = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/dashboard/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/dashboard/api.js': ['api.js', 'text/javascript; charset=utf-8'],
  '/dashboard/dom.js': ['dom.js', 'text/javascript; charset=utf-8'],
  '/dashboard/requests.js': ['requests.js', 'text/javascript; charset=utf-8'],
  '/dashboard/style.css': ['style.css', 'text/css; charset=utf-8'],
  '/dashboard/favicon.svg': ['favicon.svg', 'image/svg+xml'],
};

/** Page modules shared with the inspector (src/web/): URL path → file name. */
const SHARED_FILES: Record<string, string> = {
  '/dashboard/exchange-format.js': 'exchange-format.js',
};

/** The strict policy of docs/dashboard.md: the page's own scripts and styles, nothing inline, no framing. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'self'";

/** `folder` under src/, from the compiled module (dist/src/edge/) or from the source tree. */
function sourceDirectory(folder: string, probe: string): string {
  const candidates = [new URL(`../${folder}/`, import.meta.url), new URL(`../../../src/${folder}/`, import.meta.url)];
  for (const candidate of candidates) {
    const path = fileURLToPath(candidate);
    if (existsSync(`${path}${probe}`)) return path;
  }
  throw new Error(`the dashboard's page files are missing (looked in ${candidates.map((url) => fileURLToPath(url)).join(' and ')})`);
}

let cache: Map<string, Asset> | null = null;

function assets(): Map<string, Asset> {
  if (cache !== null) return cache;
  const directory = sourceDirectory('dashboard/page', 'index.html');
  const shared = sourceDirectory('web', 'exchange-format.js');
  const loaded = new Map<string, Asset>();
  for (const [path, [file, contentType]] of Object.entries(FILES)) loaded.set(path, { body: readFileSync(`${directory}${file}`), contentType });
  for (const [path, file] of Object.entries(SHARED_FILES)) loaded.set(path, { body: readFileSync(`${shared}${file}`), contentType: 'text/javascript; charset=utf-8' });
  cache = loaded;
  return loaded;
}

/** Reads the files now, so a missing file fails the edge's start rather than a first visit. */
export function loadDashboard(): void {
  assets();
}

/**
 * Serves a dashboard file for a GET or HEAD of one of its paths and returns true; false leaves the
 * request to the API. Called from the API-host branch of the edge's dispatch, which passes the request's
 * path (no query) and the API host's own headers (HSTS when asked for) as `extraHeaders`.
 */
export function serveDashboard(exchange: ServerExchange, path: string, extraHeaders: readonly (readonly [string, string])[] = []): boolean {
  if (path !== '/' && !path.startsWith(DASHBOARD_PREFIX)) return false;
  const method = exchange.head.method;
  if (method !== 'GET' && method !== 'HEAD') return false;
  const asset = assets().get(path);
  if (asset === undefined) return false;
  const fields = [
    'content-type', asset.contentType,
    'content-security-policy', DASHBOARD_CSP,
    'x-content-type-options', 'nosniff',
    'referrer-policy', 'no-referrer',
    'x-frame-options', 'DENY',
    'cross-origin-opener-policy', 'same-origin',
    'cache-control', 'no-cache',
  ];
  for (const [name, value] of extraHeaders) fields.push(name, value);
  exchange.attach(IGNORED_BODY);
  writeOwn(exchange, 200, fields, asset.body);
  return true;
}

/** A GET's body (there is none to speak of) is not read by anyone. */
const IGNORED_BODY = { onRequestBody(): void {}, onAborted(): void {} };
