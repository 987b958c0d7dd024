/**
 * Identifiers and the personal-access-token format (spec section 2).
 *
 * A token is `svc_pat_<id_segment>_<secret_segment>`: 8 lowercase hex characters, then 36. Its id is
 * `tok_<id_segment>` and its prefix `svc_pat_<id_segment>`, so the id segment finds the token's record
 * without a scan, and only a SHA-256 of the whole token is ever stored.
 */
import { createHash, randomBytes } from 'node:crypto';

export const TOKEN_PATTERN = /^svc_pat_([0-9a-f]{8})_([0-9a-f]{36})$/;
const TOKEN_PREFIX = 'svc_pat_';

export interface ParsedToken {
  idSegment: string;
  secretSegment: string;
}

export function parseToken(value: string): ParsedToken | null {
  const match = TOKEN_PATTERN.exec(value);
  if (match === null) return null;
  return { idSegment: match[1]!, secretSegment: match[2]! };
}

export function newTokenSecret(idSegment: string): string {
  return `${TOKEN_PREFIX}${idSegment}_${randomBytes(18).toString('hex')}`;
}

export function newTokenIdSegment(): string {
  return randomBytes(4).toString('hex');
}

export function tokenIdOf(idSegment: string): string {
  return `tok_${idSegment}`;
}

export function tokenPrefixOf(idSegment: string): string {
  return `${TOKEN_PREFIX}${idSegment}`;
}

/** `tok_<8 hex>` back to its id segment, or null for anything else. */
export function idSegmentOfTokenId(tokenId: string): string | null {
  return /^tok_[0-9a-f]{8}$/.test(tokenId) ? tokenId.slice(4) : null;
}

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

export function newAccountId(): string {
  return `usr_${randomBytes(8).toString('hex')}`;
}

export function nowIso(now: number = Date.now()): string {
  return new Date(now).toISOString();
}
