/**
 * Subdomain names: what a chosen one may be, and how the edge makes one up (DESIGN.md section 4).
 */
import { randomInt } from 'node:crypto';

/** A DNS label of 3 to 63 characters: a-z, 0-9 and '-', not starting or ending with '-'. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{1,61})[a-z0-9]$/;

/** Names a tunnel may never take: they belong to the service or invite phishing. */
export const RESERVED_NAMES: ReadonlySet<string> = new Set([
  'api', 'www', 'admin', 'app', 'auth', 'login', 'dashboard', 'status', 'edge', 'mail', 'smtp', 'imap',
  'ftp', 'ns1', 'ns2', 'dns', 'cdn', 'static', 'assets', 'docs', 'help', 'support', 'billing', 'account',
  'accounts', 'burrow', 'inspect', 'inspector', 'localhost', 'root', 'system', 'security', 'internal',
]);

/** Why a chosen subdomain is refused, or null when it is acceptable. */
export function subdomainProblem(name: string): string | null {
  if (name.length < 3 || name.length > 63) return 'a subdomain has 3 to 63 characters';
  if (!LABEL.test(name)) return 'a subdomain uses a-z, 0-9 and "-" only, and does not start or end with "-"';
  if (name.includes('--')) return 'a subdomain may not contain "--"';
  if (RESERVED_NAMES.has(name)) return `"${name}" is reserved by the service`;
  return null;
}

const ADJECTIVES = [
  'quiet', 'brave', 'calm', 'eager', 'fancy', 'gentle', 'happy', 'jolly', 'kind', 'lively', 'merry', 'nice',
  'proud', 'silly', 'witty', 'bold', 'bright', 'clever', 'cool', 'crisp', 'daring', 'fresh', 'golden', 'green',
  'humble', 'keen', 'lucky', 'mellow', 'misty', 'noble', 'plucky', 'rapid', 'rustic', 'shiny', 'sleepy', 'snowy',
  'solar', 'spry', 'steady', 'sunny', 'swift', 'tidy', 'vivid', 'warm', 'wild', 'windy', 'young', 'zesty',
] as const;

const NOUNS = [
  'river', 'forest', 'meadow', 'canyon', 'harbor', 'island', 'lagoon', 'mesa', 'orchard', 'prairie', 'ridge',
  'summit', 'valley', 'willow', 'badger', 'beaver', 'falcon', 'ferret', 'gecko', 'heron', 'otter', 'panda',
  'rabbit', 'raven', 'salmon', 'sparrow', 'tiger', 'walrus', 'comet', 'ember', 'glacier', 'maple', 'pebble',
  'pine', 'breeze', 'cedar', 'delta', 'dune', 'fjord', 'grove', 'brook', 'cliff', 'creek', 'marsh', 'reef',
  'spring', 'stone', 'trail',
] as const;

/** A fresh `<word>-<word>-<number>` name; the caller checks it is free. */
export function generateSubdomain(): string {
  const adjective = ADJECTIVES[randomInt(ADJECTIVES.length)]!;
  const noun = NOUNS[randomInt(NOUNS.length)]!;
  return `${adjective}-${noun}-${randomInt(10, 1000)}`;
}
