/**
 * The page's files (src/inspector/page/), and the page modules it shares with the edge's web dashboard
 * (src/web/), read once when the inspector starts and served from memory.
 *
 * tsc copies no non-.ts files, so the compiled server (dist/src/inspector/) reads them from the source
 * tree: `../../../src/inspector/page/` from the compiled module. A copy next to the module (`./page/`)
 * wins when present, which is also what running from source finds. Both layouts ship with the package,
 * which has no "files" list: src/ travels with dist/.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Asset {
  body: Buffer;
  contentType: string;
}

/** URL path → file name and content type. Nothing else is served. */
const FILES: Record<string, [string, string]> = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/index.html': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/style.css': ['style.css', 'text/css; charset=utf-8'],
  '/favicon.svg': ['favicon.svg', 'image/svg+xml'],
};

/** Shared page modules (src/web/): URL path → file name. */
const SHARED_FILES: Record<string, string> = {
  '/exchange-format.js': 'exchange-format.js',
};

export function pageDirectory(): string {
  const candidates = [new URL('./page/', import.meta.url), new URL('../../../src/inspector/page/', import.meta.url)];
  for (const candidate of candidates) {
    const path = fileURLToPath(candidate);
    if (existsSync(`${path}index.html`)) return path;
  }
  throw new Error(`the inspector's page files are missing (looked in ${candidates.map((url) => fileURLToPath(url)).join(' and ')})`);
}

/** src/web/, found as pageDirectory() finds the page. */
export function sharedDirectory(): string {
  const candidates = [new URL('../web/', import.meta.url), new URL('../../../src/web/', import.meta.url)];
  for (const candidate of candidates) {
    const path = fileURLToPath(candidate);
    if (existsSync(`${path}exchange-format.js`)) return path;
  }
  throw new Error(`the shared page modules are missing (looked in ${candidates.map((url) => fileURLToPath(url)).join(' and ')})`);
}

let cache: Map<string, Asset> | null = null;

/** Every page file by URL path, read on the first call. */
export function loadAssets(directory = pageDirectory()): Map<string, Asset> {
  if (cache !== null) return cache;
  const assets = new Map<string, Asset>();
  const read = new Map<string, Buffer>();
  for (const [path, [file, contentType]] of Object.entries(FILES)) {
    let body = read.get(file);
    if (body === undefined) {
      body = readFileSync(`${directory}${file}`);
      read.set(file, body);
    }
    assets.set(path, { body, contentType });
  }
  const shared = sharedDirectory();
  for (const [path, file] of Object.entries(SHARED_FILES)) {
    assets.set(path, { body: readFileSync(`${shared}${file}`), contentType: 'text/javascript; charset=utf-8' });
  }
  cache = assets;
  return assets;
}
