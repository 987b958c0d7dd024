/**
 * The cluster store's address (`--cluster`, docs/cluster.md): one Redis, or a master found through Redis
 * Sentinel, as the connection options ioredis takes.
 *
 *   redis://[[USER]:PASSWORD@]HOST:PORT[/DB][?replicas=N]            (rediss:// for TLS)
 *   redis-sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB][?replicas=N&sentinel-password=P]
 *
 * With Sentinel, ioredis asks the sentinels (in the order given, the first that answers) where the
 * master named MASTER is, connects there, checks that it is a master, and asks again after a failover;
 * the password is the master's and replicas' (`requirepass`), `sentinel-password` the sentinels' own.
 *
 * `replicas` is how many replicas must acknowledge a lease grant or renewal (Redis `WAIT`) before the
 * edge relies on it (src/store/redis-leases.ts): 1 by default with Sentinel (a grant survives the
 * promotion of a replica), 0 by default for one Redis (its append-only file keeps grants across a
 * restart).
 */
import type { RedisOptions } from 'ioredis';

/** Where the cluster's Redis is, as ioredis wants it, and how many replicas vouch for a lease. */
export interface RedisTarget {
  /** A redis:// URL for ioredis to parse, or null with Sentinel (then `options` says everything). */
  url: string | null;
  options: RedisOptions;
  /** For messages: the URL without passwords. */
  display: string;
  sentinel: boolean;
  /** Replicas that must acknowledge a lease write (WAIT) before the edge serves on it. */
  replicas: number;
}

export const SENTINEL_SCHEME = 'redis-sentinel:';
const DEFAULT_SENTINEL_PORT = 26379;
const MAX_REPLICAS = 16;

/** A bad --cluster URL: its message says what is wrong and what the right shape is. */
export class RedisUrlError extends Error {}

/** Reads `url`; throws RedisUrlError with a message for the user when it is not one of the shapes above. */
export function redisTarget(url: string): RedisTarget {
  const scheme = /^([a-z][a-z0-9+.-]*:)\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === SENTINEL_SCHEME) return sentinelTarget(url);
  if (scheme !== 'redis:' && scheme !== 'rediss:') {
    throw new RedisUrlError(`"${redacted(url)}" is not a Redis URL; use redis://HOST:PORT[/DB] or redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RedisUrlError(`"${redacted(url)}" is not a URL; use redis://HOST:PORT[/DB]`);
  }
  if (parsed.hostname === '') throw new RedisUrlError(`"${redacted(url)}" names no host; use redis://HOST:PORT[/DB]`);
  const replicas = replicasOf(parsed.searchParams, 0);
  // The rest of the query is ioredis's own (family=6, ...), as before.
  parsed.searchParams.delete('replicas');
  return { url: parsed.toString(), options: {}, display: redacted(parsed.toString()), sentinel: false, replicas };
}

function sentinelTarget(url: string): RedisTarget {
  const shape = 'redis-sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]';
  const match = /^redis-sentinel:\/\/(?:([^@/]*)@)?([^/?#]+)\/([^/?#]+)(?:\/([^/?#]*))?(?:\?([^#]*))?$/i.exec(url);
  if (match === null) throw new RedisUrlError(`"${redacted(url)}" is not a Sentinel URL; use ${shape}`);
  const [, userInfo, hostList, masterName, db, query] = match;
  const sentinels = hostList!.split(',').map((item) => sentinelAddress(item.trim(), shape));
  const options: RedisOptions = { sentinels, name: decodeURIComponent(masterName!) };
  if (userInfo !== undefined) {
    const colon = userInfo.indexOf(':');
    const user = decodeURIComponent(colon < 0 ? userInfo : userInfo.slice(0, colon));
    if (user !== '') options.username = user;
    if (colon >= 0) options.password = decodeURIComponent(userInfo.slice(colon + 1));
  }
  if (db !== undefined && db !== '') {
    if (!/^\d{1,2}$/.test(db)) throw new RedisUrlError(`the database in "${redacted(url)}" must be a number; use ${shape}`);
    options.db = Number(db);
  }
  const params = new URLSearchParams(query ?? '');
  const replicas = replicasOf(params, 1);
  const sentinelPassword = params.get('sentinel-password');
  if (sentinelPassword !== null) options.sentinelPassword = sentinelPassword;
  for (const name of params.keys()) {
    if (name !== 'replicas' && name !== 'sentinel-password') throw new RedisUrlError(`--cluster: unknown option "${name}" in the Sentinel URL (known: replicas, sentinel-password)`);
  }
  const display = `redis-sentinel://${sentinels.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`).join(',')}/${options.name}${db ? `/${db}` : ''}`;
  return { url: null, options, display, sentinel: true, replicas };
}

function sentinelAddress(item: string, shape: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-f:.]+)\]|([^:[\]\s]+))(?::(\d{1,5}))?$/i.exec(item);
  const port = match?.[3] === undefined ? DEFAULT_SENTINEL_PORT : Number(match[3]);
  if (match === null || port < 1 || port > 65535) throw new RedisUrlError(`"${item}" is not a sentinel's HOST:PORT; use ${shape}`);
  return { host: match[1] ?? match[2]!, port };
}

function replicasOf(params: URLSearchParams, fallback: number): number {
  const value = params.get('replicas');
  if (value === null) return fallback;
  if (!/^\d{1,2}$/.test(value) || Number(value) > MAX_REPLICAS) throw new RedisUrlError(`--cluster: replicas must be a number from 0 to ${MAX_REPLICAS}, not "${value}"`);
  return Number(value);
}

/** The URL as messages may show it: no password reaches a log or an error body. */
export function redacted(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^@/]*)@/i, (_all, scheme: string, userInfo: string) => {
    const colon = userInfo.indexOf(':');
    return colon < 0 ? `${scheme}${userInfo}@` : `${scheme}${userInfo.slice(0, colon)}:***@`;
  }).replace(/([?&]sentinel-password=)[^&#]*/i, '$1***');
}
