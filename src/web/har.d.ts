// Types for har.js, which Node runs too (src/inspector/har.ts loads it for the inspector's API).
import type { ExchangeJsonLike } from './curl.js';

export function harLog(exchanges: readonly ExchangeJsonLike[], base: string, creator: { name: string; version: string }): Record<string, unknown>;
