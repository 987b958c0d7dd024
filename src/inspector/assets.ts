/**
 * The page's files (src/inspector/page/), and the page modules it shares with the edge's web dashboard
 * (src/web/, listed in src/web-files.ts), read once when the inspector starts and served from memory.
 *
 * tsc copies no non-.ts files, so the compiled server reads them from the source tree, which the package
 * carries with dist/ (it has no "files" list); running from source finds them next to the modules.
 */
import { readFileSync } from 'node:fs';
import { sourceFolder, WEB_FILES, webDirectory } from '../web-files.js';

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

export function pageDirectory(): string {
  return sourceFolder('inspector/page', 'index.html', "the inspector's page files");
}

let cache: Map<string, Asset> | null = null;

/** Every page file by URL path, read on the first call; the shared modules at `/<file>`. */
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
  const shared = webDirectory();
  for (const [file, contentType] of Object.entries(WEB_FILES)) assets.set(`/${file}`, { body: readFileSync(`${shared}${file}`), contentType });
  cache = assets;
  return assets;
}
