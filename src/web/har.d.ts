// Types for har.js, which Node runs too (src/inspector/har.ts loads it for the inspector's API).
import type { ExchangeJsonLike } from './curl.js';

export function harLog<T extends ExchangeJsonLike>(exchanges: readonly T[], base: string | ((exchange: T) => string), creator: { name: string; version: string }): Record<string, unknown>;
