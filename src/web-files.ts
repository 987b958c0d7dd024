/**
 * The browser modules the local inspector's page and the edge's web dashboard share (src/web/): one
 * exchange list, detail, replay editor, WebSocket view, curl and HAR, and their stylesheet. The inspector
 * serves them at `/<file>`, the dashboard at `/dashboard/<file>`; both read them once, from here.
 *
 * tsc copies no non-.ts files, so the compiled module (dist/src/) reads them from the source tree
 * (`../../src/web/`); running from source finds them next to it (`./web/`). The package carries src/
 * with dist/.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** File name → content type. Nothing else in src/web/ is served. */
export const WEB_FILES: Readonly<Record<string, string>> = {
  'exchange-format.js': 'text/javascript; charset=utf-8',
  'elements.js': 'text/javascript; charset=utf-8',
  'exchange-list.js': 'text/javascript; charset=utf-8',
  'exchange-detail.js': 'text/javascript; charset=utf-8',
  'replay-editor.js': 'text/javascript; charset=utf-8',
  'websocket-view.js': 'text/javascript; charset=utf-8',
  'curl.js': 'text/javascript; charset=utf-8',
  'har.js': 'text/javascript; charset=utf-8',
  'exchange.css': 'text/css; charset=utf-8',
};

/** `folder` under src/, from a compiled module in dist/src/ or from the source tree; `probe` must exist in it. */
export function sourceFolder(folder: string, probe: string, what: string): string {
  const candidates = [new URL(`./${folder}/`, import.meta.url), new URL(`../../src/${folder}/`, import.meta.url)];
  for (const candidate of candidates) {
    const path = fileURLToPath(candidate);
    if (existsSync(`${path}${probe}`)) return path;
  }
  throw new Error(`${what} are missing (looked in ${candidates.map((url) => fileURLToPath(url)).join(' and ')})`);
}

/** src/web/, with a trailing slash. */
export function webDirectory(): string {
  return sourceFolder('web', 'exchange-format.js', 'the shared page modules (src/web/)');
}
