/**
 * "Copy as curl" for the inspector's API (GET /api/requests/:id/curl): the same module the pages run
 * (src/web/curl.js), loaded from the source tree once, so the API, the inspector's page and the
 * dashboard give one command for one request.
 */
import { pathToFileURL } from 'node:url';
import { webDirectory } from '../web-files.js';

const shared = (await import(pathToFileURL(`${webDirectory()}curl.js`).href)) as typeof import('../web/curl.js');

export type { CurlCommand, CurlTarget } from '../web/curl.js';
export const { ansiQuote, curlCommand, shellQuote } = shared;
