// Types for curl.js, which Node runs too (src/inspector/curl.ts loads it for the inspector's API).
import type { BodyJson } from '../exchange-json.js';

/** What curl.js and har.js read of an exchange: the fields the inspector's and the edge's JSON share. */
export interface ExchangeJsonLike {
  id: string;
  method: string;
  path: string;
  received_at: string;
  latency_ms?: number;
  duration_ms?: number;
  port?: number;
  client_address?: string | null;
  error?: string | null;
  replay_of?: string | null;
  request: { headers: [string, string][] } & BodyJson;
  response: { status: number; headers: [string, string][] } & BodyJson;
  messages?: { at: string; direction: 'in' | 'out'; binary: boolean; data: string; data_encoding: 'utf8' | 'base64' }[];
}

export type CurlTarget = 'public' | 'local';

export interface CurlCommand {
  command: string;
  target: CurlTarget;
  url: string;
  /** The body sent is the captured one cut at the capture limit. */
  truncated: boolean;
}

export function shellQuote(text: string): string;
export function ansiQuote(bytes: Uint8Array): string;
export function curlCommand(exchange: ExchangeJsonLike, target: CurlTarget, base: string): CurlCommand;
