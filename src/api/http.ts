/**
 * Small helpers the handlers share: JSON bodies, query parameters, response builders.
 */
import { BurrowError } from '../errors.js';
import type { ApiRequest, ApiResponse, HeaderPairs } from './types.js';

const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9.+-]+\+)?json\s*(?:;|$)/i;

/** The request's JSON object body; 415 without a JSON content type, 400 when it is not an object. */
export function readJsonObject(req: ApiRequest, { optional = false } = {}): Record<string, unknown> {
  const empty = req.body === null || req.body.length === 0;
  if (empty) {
    if (optional) return {};
    throw new BurrowError('INVALID_REQUEST', 'A JSON body is required.');
  }
  if (!JSON_MEDIA_TYPE.test(req.headers['content-type'])) {
    throw new BurrowError('UNSUPPORTED_MEDIA_TYPE');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(req.body!.toString('utf8'));
  } catch (error) {
    throw new BurrowError('INVALID_REQUEST', `The body is not valid JSON: ${(error as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new BurrowError('INVALID_REQUEST', 'The body must be a JSON object.');
  }
  return parsed as Record<string, unknown>;
}

export function json(status: number, body: unknown, headers?: HeaderPairs): ApiResponse {
  return headers === undefined ? { status, body } : { status, body, headers };
}

export const NO_CONTENT: ApiResponse = Object.freeze({ status: 204 });

export function queryParams(req: ApiRequest): URLSearchParams {
  return new URLSearchParams(req.query);
}

/** An optional positive integer query parameter within [1, max]; 400 otherwise. */
export function intParam(params: URLSearchParams, name: string, fallback: number, max: number): number {
  const raw = params.get(name);
  if (raw === null) return fallback;
  if (!/^[0-9]{1,9}$/.test(raw)) throw new BurrowError('INVALID_REQUEST', `"${name}" must be a whole number from 1 to ${max}.`);
  const value = Number(raw);
  if (value < 1 || value > max) throw new BurrowError('INVALID_REQUEST', `"${name}" must be a whole number from 1 to ${max}.`);
  return value;
}
