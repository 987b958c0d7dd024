/**
 * The web dashboard's static files (src/dashboard/page/, and the modules it shares with the local
 * inspector's page, src/web/ as listed in src/web-files.ts), served from memory on the API host: the
 * page at `/`, its files under `/dashboard/`. Everything else on the API host stays the API's (so
 * `/health` and unknown paths keep answering the API's 404). The page talks to `/api/v1` only.
 *
 * tsc copies no non-.ts files: as with the inspector (src/inspector/assets.ts), the compiled module
 * reads the files from the source tree, which the package carries with dist/.
 */
import { readFileSync } from 'node:fs';
import type { ServerExchange } from '../http1/server.js';
import { sourceFolder, WEB_FILES, webDirectory } from '../web-files.js';
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
  '/dashboard/policy.js': ['policy.js', 'text/javascript; charset=utf-8'],
  '/dashboard/style.css': ['style.css', 'text/css; charset=utf-8'],
  '/dashboard/favicon.svg': ['favicon.svg', 'image/svg+xml'],
};

/** The strict policy of docs/dashboard.md: the page's own scripts and styles, nothing inline, no framing. */
export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'self'";

let cache: Map<string, Asset> | null = null;

function assets(): Map<string, Asset> {
  if (cache !== null) return cache;
  const directory = sourceFolder('dashboard/page', 'index.html', "the dashboard's page files");
  const shared = webDirectory();
  const loaded = new Map<string, Asset>();
  for (const [path, [file, contentType]] of Object.entries(FILES)) loaded.set(path, { body: readFileSync(`${directory}${file}`), contentType });
  for (const [file, contentType] of Object.entries(WEB_FILES)) loaded.set(`${DASHBOARD_PREFIX}${file}`, { body: readFileSync(`${shared}${file}`), contentType });
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
