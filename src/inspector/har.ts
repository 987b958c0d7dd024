/**
 * Export as HAR 1.2 for the inspector's API (GET /api/har): the same module the dashboard's page runs
 * (src/web/har.js), loaded from the source tree once.
 */
import { pathToFileURL } from 'node:url';
import { webDirectory } from '../web-files.js';
import { VERSION } from '../version.js';
import type { ExchangeJsonLike } from '../web/curl.js';

const shared = (await import(pathToFileURL(`${webDirectory()}har.js`).href)) as typeof import('../web/har.js');

/**
 * The HAR document of `exchanges` (the inspector's JSON); entries oldest first. `base` prefixes each
 * path: one URL, or each exchange's own (its tunnel's, under `burrow start`).
 */
export function harLog<T extends ExchangeJsonLike>(exchanges: readonly T[], base: string | ((exchange: T) => string)): Record<string, unknown> {
  return shared.harLog(exchanges, base, { name: 'Burrow inspector', version: VERSION });
}
