/**
 * The cluster's tunnel registry in Redis (docs/cluster.md): one lease per subdomain, granted, renewed,
 * held and dropped by Lua scripts, each atomic and each reading Redis's own clock (`TIME`), so no edge's
 * clock decides an expiry.
 *
 * Keys (under `prefix`):
 *   lease:<subdomain>       hash: who holds the name (account, token, edge, boot, fence, ...), `state`
 *                           'live' (a tunnel is connected) or 'held' (its grace period after a drop);
 *                           the key expires with the lease (PEXPIREAT), so a dead edge's names free
 *                           themselves.
 *   account:<id>:live       ZSET of the account's live subdomains scored by lease expiry: the tunnel cap
 *                           across edges; members whose lease expired are dropped by the scripts.
 *   fence                   one INCR counter: every grant of any name gets a larger fence than all
 *                           before it, so a stale holder's renewals and releases fail by comparison.
 *   node:<id>, nodes        heartbeats: where an edge is reached (advertise) and which boot it is.
 *   secret                  the internal hop's secret when none is configured (SET NX by the first edge).
 *   node-numbers, node-number  each node id's number (drawn once with INCR): its span of capture ring ids.
 *   commands                pub/sub channel: close a tunnel, revoke a token (the API); every grant, release
 *                           and renewal round (pushed by the scripts themselves).
 *
 * Timing (the defaults; ClusterRegistry may be given others, tests shrink them):
 *   lease TTL 15 s, renewed every 3 s in one batched script per edge (with the heartbeat), so four
 *   renewals in a row can fail before a lease is at risk. An edge serves a tunnel only while
 *   `now < start of its last successful renewal (or grant) + TTL − 2 s margin`, measured on its
 *   monotonic clock. The renewal reached Redis after it started, so Redis's expiry (renewal time + TTL)
 *   is later than the edge's own stop by at least the margin: the edge stops serving before Redis can
 *   hand the name to anyone else, as long as the two clocks' rates differ by less than 2 s in 15 s
 *   (13 %; real clocks differ by parts per million). Never two owners, even while Redis is unreachable.
 *   Heartbeats last 10 s.
 *
 * Every change is also pushed to every edge by the script that makes it (PUBLISH on the commands
 * channel, in the same atomic step): 'granted' with the whole lease, 'released' with its fence, and one
 * 'renewed' per renewal round of an edge. Each edge keeps from them a map of every name's last-known
 * owner (src/edge/cluster/registry.ts), loaded once from `snapshot()` after each (re)subscription, so a
 * public request never reads Redis to find its owner and still finds it while Redis is down.
 *
 * What this relies on from Redis: that an acknowledged write survives. With AOF and `appendfsync
 * always` (the tests' Redis, and what docs/cluster.md asks for) a restart keeps every lease and the fence
 * counter. Across a failover to a replica (Sentinel) the same holds because a grant and a renewal count
 * only once `replicas` replicas acknowledged them (WAIT, `options.replicas`): an unacknowledged grant is
 * dropped and refused (503), an unacknowledged renewal counts as failed, so the edge never serves on a
 * write the promoted replica may lack. Releases are not waited for: a lost release only keeps the name
 * held longer. Without persistence, or with `appendfsync everysec`, a restart can forget a lease an edge
 * is still serving and grant the name again: two edges serve it until the first one's renewal finds the
 * lease gone or changed (at most one renewal period) and it sends its session GOAWAY. A wall-clock jump
 * on the Redis host (or, across a failover, a replica's clock ahead of the master's by more than the
 * margin) expires keys early, with the same effect. Keys are built inside the scripts from the prefix,
 * so this needs one Redis (or a master with replicas under Sentinel), not Redis Cluster, which
 * RedisStore refuses at start-up.
 */
import type { Redis } from 'ioredis';
import { BurrowError } from '../errors.js';

export const LEASE_TTL_MS = 15_000;
export const RENEW_EVERY_MS = 3_000;
export const VALIDITY_MARGIN_MS = 2_000;
export const HEARTBEAT_TTL_MS = 10_000;
/** Retry-After (seconds) when Redis cannot be reached. */
export const STORE_RETRY_SECONDS = 2;
/** How long a grant or renewal waits for its replicas' acknowledgement (WAIT) before it counts as failed. */
export const REPLICA_ACK_TIMEOUT_MS = 1_000;

export interface RedisLeasesOptions {
  /** Replicas that must acknowledge a grant or renewal (WAIT) before it counts; 0: none (one Redis). */
  replicas?: number;
  replicaTimeoutMs?: number;
}

/**
 * One edge serving a live lease: its client's session on that edge. The edge serves the name while its
 * own attachment is valid (docs/cluster.md, "Never two owners"); a client on several edges has one
 * attachment on each.
 */
export interface Attachment {
  nodeId: string;
  advertise: string;
  boot: string;
  /** From the cluster's fence counter: larger than every grant and attachment before it. */
  fence: number;
  /** When this attachment lapses unless renewed (Redis's clock, ms since the epoch). */
  expiresAt: number;
}

/** Who holds a subdomain, as stored. */
export interface LeaseRecord {
  subdomain: string;
  accountId: string;
  tokenId: string;
  port: number;
  startedAt: number;
  publicUrl: string;
  /** The client process that connected it ('' for a client that sends none) and its address. */
  instance: string;
  clientAddress: string;
  /** The grant's fence: a new owner (another client, another account) gets a larger one. */
  fence: number;
  /** 'live': a tunnel is connected to the edges attached; 'held': the name is its account's for the grace period. */
  state: 'live' | 'held';
  /** The tunnel's one-run policy as JSON (a StoredPolicy: secrets sealed, passwords hashed), '' for none. */
  policy: string;
  /** A pool (`--pool`): members of any client process of the account attach beside each other. */
  pool: boolean;
  /** When Redis drops the lease (Redis's clock, ms since the epoch): its latest attachment's expiry, or the grace's end. */
  expiresAt: number;
  /** The edges serving it now (live attachments, unexpired when read); none while held. */
  attachments: Attachment[];
}

/** The lease's owner without its attachments: what a 'granted' message carries beside the new attachment. */
export type LeaseOwner = Omit<LeaseRecord, 'attachments'>;

/** What a claim asks for: the tunnel being connected and the edge connecting it. */
export interface LeaseClaim {
  subdomain: string;
  accountId: string;
  tokenId: string;
  port: number;
  startedAt: number;
  publicUrl: string;
  nodeId: string;
  advertise: string;
  boot: string;
  /** The connecting client process ('' when it sends none) and its address: see AdmitDetails. */
  instance: string;
  clientAddress: string;
  /** Take the name over from another client of the account that has it live (`--replace`). */
  replace: boolean;
  /** The account's tunnel cap, counted over every edge. */
  cap: number;
  /**
   * Take the name over up to this fence: every edge attached (same account, another client, or one
   * naming no instance) released it or is gone, and none attached since (its fence would be larger).
   */
  fromFence?: number;
  /**
   * The tunnel's one-run policy as JSON ('' for none), kept in the lease for the forwarding edges:
   * bounded by the connect header's size (docs/policies.md), a few KiB at most.
   */
  policy?: string;
  /** Attachments of the same client this connect replaces (its old sessions): removed in the same step. */
  drop?: readonly number[];
  /** This edge's own live attachment of the same client is kept (a lease claimed again for its session) instead of refused. */
  rejoin?: boolean;
  /**
   * `--pool`: a new grant makes the name a pool; a live pool of the account is joined from any client
   * (this edge's attachment shared when it has one), and a live name that is no pool is refused 'online'.
   */
  pool?: boolean;
}

/** An edge attached to a lease: whom a takeover asks to let go, and whom a dropped attachment is told of. */
export interface AttachedEdge {
  nodeId: string;
  boot: string;
  advertise: string;
  fence: number;
}

export type ClaimResult =
  /**
   * This edge is attached: `fence` is its attachment's, `ownerFence` the grant's (equal on a new grant);
   * `dropped` the client's old attachments removed on the way (their edges should end those sessions).
   */
  | {
      granted: true;
      fence: number;
      ownerFence: number;
      expiresAt: number;
      dropped: AttachedEdge[];
      /** A pool member's old sessions named in `drop` on other edges: kept (they may serve other members), each edge ends that client's member. */
      leave?: AttachedEdge[];
    }
  /** The same client already has a live session on this edge (and dropped none of it): ALREADY_ATTACHED. */
  | { granted: false; reason: 'attached'; fence: number }
  | { granted: false; reason: 'taken'; state: 'live' | 'held' }
  | { granted: false; reason: 'cap'; active: number }
  /** Another client of the same account has the name live, and the claim did not ask to replace it. */
  | { granted: false; reason: 'online'; holder: Pick<LeaseRecord, 'instance' | 'clientAddress' | 'port' | 'startedAt' | 'tokenId' | 'pool'> & { nodeId: string } }
  /** The same account holds the name live on other edges: ask each to release, then claim with `fromFence: fence` (the newest). */
  | { granted: false; reason: 'takeover'; holders: AttachedEdge[]; fence: number };

export type RenewOutcome = 'ok' | 'missing' | 'lost';

export interface NodeBeat {
  nodeId: string;
  advertise: string;
  boot: string;
}

export interface PeerRecord extends NodeBeat {
  /** Milliseconds until its heartbeat expires. */
  expiresInMs: number;
}

/**
 * A cluster-wide message, published to every edge: a command from the API ('close', 'revoke'), or a
 * lease change pushed by the script that made it ('granted', 'released', 'renewed').
 */
export type ClusterCommand =
  | { type: 'close'; subdomain: string; fence: number; reason: 'closed-by-api' | 'token-revoked' }
  | { type: 'revoke'; tokenId: string }
  /** An edge was attached to a name (a new grant, or its client attached to one more edge): live for `ttlMs` unless renewed. */
  | { type: 'granted'; lease: LeaseOwner; attachment: Attachment; ttlMs: number }
  /** The attachment `fence` of `nodeId` to `subdomain` ended. */
  | { type: 'released'; subdomain: string; nodeId: string; fence: number }
  /** `nodeId` (that boot) renewed every lease it still holds for `ttlMs` from now. */
  | { type: 'renewed'; nodeId: string; boot: string; advertise: string; ttlMs: number }
  /** The stored policy of `subdomain` changed through the API (docs/policies.md): every edge compiles it again. */
  | { type: 'policy'; subdomain: string }
  /** An event was held for `subdomain` (src/store/redis-offline-queue.ts): the edge holding its tunnel delivers it. */
  | { type: 'queued'; subdomain: string }
  /** The last event held for `subdomain` was delivered (or parked as failed). */
  | { type: 'drained'; subdomain: string };

/** Every live lease at one moment, and Redis's clock then (for their remaining time). */
export interface LeaseSnapshot {
  leases: LeaseRecord[];
  redisNow: number;
}

const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * Lua: the lease at KEYS[1] as stored: its fields (a table by name) and its live attachments (those whose
 * expiry is after `now`), each {nodeId, boot, advertise, fence, expiresAt} with strings as stored and
 * `expires` a number. Expired attachments are removed on the way: their edges stopped serving already.
 */
const READ_LEASE = `
local function read_lease(key, now)
  local flat = redis.call('HGETALL', key)
  local fields = {}
  local live = {}
  for i = 1, #flat, 2 do
    local name = flat[i]
    if string.sub(name, 1, 2) == 'a:' then
      local a = cjson.decode(flat[i + 1])
      a.nodeId = string.sub(name, 3)
      a.expires = tonumber(a.expiresAt)
      if a.expires > now then live[#live + 1] = a else redis.call('HDEL', key, name) end
    else
      fields[name] = flat[i + 1]
    end
  end
  return fields, live
end
local function attachment_json(fence, boot, advertise, expires)
  return cjson.encode({fence = tostring(fence), boot = boot, advertise = advertise, expiresAt = string.format('%d', expires)})
end
`;

// KEYS: lease, account set, fence counter.
// ARGV: subdomain, accountId, tokenId, port, startedAt, publicUrl, nodeId, advertise, boot, ttlMs, cap, fromFence ('' for none),
//       instance ('' for none), clientAddress, replace ('1' or ''), the commands channel, drop (attachment fences, comma-separated),
//       rejoin ('1': this node's live attachment for the same client is adopted, not refused), the one-run policy's JSON ('' for none;
//       a new grant stores it, an attachment beside the same client's others keeps the lease's), pool ('1': `--pool`).
// A live name of the same account goes only to its own client (same instance: attached beside its other
// edges), to a pool member when the lease is a pool (any instance: attached beside the pool's edges, or
// sharing this edge's attachment), to a replace, or to a client that names no instance (registry.ts,
// takeoverRefusal: the same rule on one edge); a replace or a client without instance takes it over from
// every edge attached. A new grant records whether the name is a pool; nothing else changes it.
const CLAIM = `${NOW}${READ_LEASE}
local now = now_ms()
local expires = now + tonumber(ARGV[10])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local cur, live = read_lease(KEYS[1], now)
local function announce(fence, ownerFence)
  redis.call('PUBLISH', ARGV[16], cjson.encode({type = 'granted', ttlMs = ARGV[10], lease = {subdomain = ARGV[1], accountId = cur.accountId or ARGV[2],
    tokenId = cur.tokenId or ARGV[3], port = cur.port or ARGV[4], startedAt = cur.startedAt or ARGV[5], publicUrl = cur.publicUrl or ARGV[6],
    instance = cur.instance or ARGV[13], clientAddress = cur.clientAddress or ARGV[14], policy = cur.policy or ARGV[19] or '', pool = cur.pool or ARGV[20] or '',
    fence = tostring(ownerFence), state = 'live', expiresAt = string.format('%d', expires)}, attachment = {nodeId = ARGV[7], advertise = ARGV[8], boot = ARGV[9], fence = tostring(fence),
    expiresAt = string.format('%d', expires)}}))
end
-- This edge attached to the live lease with \`fence\` (a new one, or the one it has), for the TTL from now.
local function attach(fence)
  redis.call('HSET', KEYS[1], 'a:' .. ARGV[7], attachment_json(fence, ARGV[9], ARGV[8], expires))
  local leaseExpires = math.max(tonumber(cur.expiresAt) or 0, expires)
  redis.call('HSET', KEYS[1], 'expiresAt', string.format('%d', leaseExpires))
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', leaseExpires))
  redis.call('ZADD', KEYS[2], string.format('%d', leaseExpires), ARGV[1])
  announce(fence, cur.fence)
end
if cur.accountId then
  if cur.accountId ~= ARGV[2] then return {'taken', cur.state} end
  if cur.state == 'live' and #live > 0 then
    if cur.pool == '1' and ARGV[20] == '1' then
      -- A pool member: one attachment per edge, shared by the pool's members there (the edge keeps them
      -- apart). Attachments named in \`drop\` stay (they may serve other members too): they are returned,
      -- and the claiming edge asks each of their edges to end this client's member there.
      local drops = {}
      for dropFence in string.gmatch(ARGV[17], '[^,]+') do drops[dropFence] = true end
      local fence = nil
      local out = {'pooled', '', string.format('%d', expires), cur.fence, ''}
      for _, a in ipairs(live) do
        if a.nodeId == ARGV[7] and a.boot == ARGV[9] then
          fence = a.fence
        elseif drops[a.fence] then
          out[#out + 1] = a.nodeId
          out[#out + 1] = a.boot
          out[#out + 1] = a.advertise
          out[#out + 1] = a.fence
        end
      end
      if fence then out[5] = '1' else fence = tostring(redis.call('INCR', KEYS[3])) end
      attach(fence)
      out[2] = fence
      return out
    end
    local same = ARGV[13] ~= '' and cur.instance == ARGV[13]
    if not same and ARGV[15] ~= '1' and ARGV[13] ~= '' then
      return {'online', cur.instance or '', cur.clientAddress or '', cur.port or '0', cur.startedAt or '0', cur.tokenId or '', live[1].nodeId, cur.pool or ''}
    end
    if same then
      local drops = {}
      for fence in string.gmatch(ARGV[17], '[^,]+') do drops[fence] = true end
      local dropped = {}
      local mine = nil
      for _, a in ipairs(live) do
        if drops[a.fence] then
          redis.call('HDEL', KEYS[1], 'a:' .. a.nodeId)
          redis.call('PUBLISH', ARGV[16], cjson.encode({type = 'released', subdomain = ARGV[1], nodeId = a.nodeId, fence = a.fence}))
          dropped[#dropped + 1] = a.nodeId
          dropped[#dropped + 1] = a.boot
          dropped[#dropped + 1] = a.advertise
          dropped[#dropped + 1] = a.fence
        elseif a.nodeId == ARGV[7] and a.boot == ARGV[9] then
          mine = a
        end
      end
      local fence
      if mine ~= nil then
        if ARGV[18] ~= '1' then return {'attached', mine.fence} end
        fence = mine.fence
      else
        fence = tostring(redis.call('INCR', KEYS[3]))
      end
      attach(fence)
      local out = {'granted', fence, string.format('%d', expires), cur.fence}
      for _, item in ipairs(dropped) do out[#out + 1] = item end
      return out
    end
    -- A takeover: every edge attached (but this very process, whose registry replaces its own session)
    -- must have let go, which the claimer asked each of them first; an attachment made since has a larger fence.
    local newest = 0
    local others = {}
    for _, a in ipairs(live) do
      if not (a.nodeId == ARGV[7] and a.boot == ARGV[9]) then
        others[#others + 1] = a
        if tonumber(a.fence) > newest then newest = tonumber(a.fence) end
      end
    end
    if #others > 0 and (ARGV[12] == '' or newest > tonumber(ARGV[12])) then
      local out = {'takeover', string.format('%d', newest)}
      for _, a in ipairs(others) do
        out[#out + 1] = a.nodeId
        out[#out + 1] = a.boot
        out[#out + 1] = a.advertise
        out[#out + 1] = a.fence
      end
      return out
    end
  end
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  local active = redis.call('ZCARD', KEYS[2])
  if active >= tonumber(ARGV[11]) then return {'cap', tostring(active)} end
end
local fence = tostring(redis.call('INCR', KEYS[3]))
redis.call('DEL', KEYS[1])
cur = {}
redis.call('HSET', KEYS[1], 'subdomain', ARGV[1], 'accountId', ARGV[2], 'tokenId', ARGV[3], 'port', ARGV[4],
  'startedAt', ARGV[5], 'publicUrl', ARGV[6], 'instance', ARGV[13], 'clientAddress', ARGV[14], 'policy', ARGV[19] or '', 'pool', ARGV[20] or '',
  'fence', fence, 'state', 'live', 'expiresAt', string.format('%d', expires),
  'a:' .. ARGV[7], attachment_json(fence, ARGV[9], ARGV[8], expires))
redis.call('PEXPIREAT', KEYS[1], string.format('%d', expires))
redis.call('ZADD', KEYS[2], string.format('%d', expires), ARGV[1])
announce(fence, fence)
return {'granted', fence, string.format('%d', expires), fence}
`;

// KEYS: this node's heartbeat, the node set.
// ARGV: prefix, nodeId, boot, advertise, ttlMs, heartbeatTtlMs, then (subdomain, attachment fence, accountId, instance) per lease.
// Per lease: 'ok' (this edge's attachment extended), 'missing' (the lease, or only this edge's attachment
// to it, is gone while the name is still its client's: attach again), 'lost' (another account or another
// client of it has the name; a pool's members are several clients, told apart by the fence alone).
const RENEW = `${NOW}
local now = now_ms()
local expires = now + tonumber(ARGV[5])
redis.call('SET', KEYS[1], cjson.encode({nodeId = ARGV[2], boot = ARGV[3], advertise = ARGV[4]}), 'PX', ARGV[6])
redis.call('SADD', KEYS[2], ARGV[2])
local out = {}
local i = 7
while i + 3 <= #ARGV do
  local key = ARGV[1] .. 'lease:' .. ARGV[i]
  local cur = redis.call('HMGET', key, 'accountId', 'state', 'a:' .. ARGV[2], 'expiresAt', 'instance', 'pool')
  if not cur[1] then
    out[#out + 1] = 'missing'
  elseif cur[1] ~= ARGV[i + 2] or (cur[2] == 'live' and cur[6] ~= '1' and (cur[5] or '') ~= ARGV[i + 3]) then
    out[#out + 1] = 'lost'
  else
    local a = cur[3] and cjson.decode(cur[3])
    if cur[2] == 'live' and a and a.fence == ARGV[i + 1] and a.boot == ARGV[3] and tonumber(a.expiresAt) > now then
      a.expiresAt = string.format('%d', expires)
      local leaseExpires = string.format('%d', math.max(tonumber(cur[4]) or 0, expires))
      redis.call('HSET', key, 'a:' .. ARGV[2], cjson.encode(a), 'expiresAt', leaseExpires)
      redis.call('PEXPIREAT', key, leaseExpires)
      redis.call('ZADD', ARGV[1] .. 'account:' .. ARGV[i + 2] .. ':live', leaseExpires, ARGV[i])
      out[#out + 1] = 'ok'
    else
      out[#out + 1] = 'missing'
    end
  end
  i = i + 4
end
redis.call('PUBLISH', ARGV[1] .. 'commands', cjson.encode({type = 'renewed', nodeId = ARGV[2], boot = ARGV[3], advertise = ARGV[4], ttlMs = ARGV[5]}))
return out
`;

// KEYS: lease, account set. ARGV: subdomain, attachment fence, nodeId, graceMs (0: drop the name), the commands channel.
// Ends one edge's attachment. The name stays live while another edge is attached; after the last one it
// is held for its account's grace period, or dropped.
const RELEASE = `${NOW}${READ_LEASE}
local stored = redis.call('HGET', KEYS[1], 'a:' .. ARGV[3])
if not stored or cjson.decode(stored).fence ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'a:' .. ARGV[3])
redis.call('PUBLISH', ARGV[5], cjson.encode({type = 'released', subdomain = ARGV[1], nodeId = ARGV[3], fence = ARGV[2]}))
local now = now_ms()
local cur, live = read_lease(KEYS[1], now)
if #live > 0 then
  local latest = 0
  for _, a in ipairs(live) do if a.expires > latest then latest = a.expires end end
  redis.call('HSET', KEYS[1], 'expiresAt', string.format('%d', latest))
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', latest))
  redis.call('ZADD', KEYS[2], string.format('%d', latest), ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[2], ARGV[1])
local grace = tonumber(ARGV[4])
if grace <= 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'held', 'expiresAt', string.format('%d', now + grace))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`;

// KEYS: the lease. Redis's clock and the lease's fields, flattened (none when there is no lease).
const OWNER = `${NOW}
return {string.format('%d', now_ms()), redis.call('HGETALL', KEYS[1])}
`;

// KEYS: account set. ARGV: prefix, accountId. Redis's clock, then the account's live leases, flattened field lists.
const LIST_LIVE = `${NOW}
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {string.format('%d', now)}
for _, sub in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local fields = redis.call('HGETALL', ARGV[1] .. 'lease:' .. sub)
  if #fields > 0 then out[#out + 1] = fields end
end
return out
`;

// KEYS: the node set. ARGV: prefix. Every live heartbeat with its remaining time; dead ids are dropped.
const PEERS = `
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. 'node:' .. id
  local beat = redis.call('GET', key)
  if beat then
    out[#out + 1] = {beat, redis.call('PTTL', key)}
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
`;

// KEYS: the node-number hash, its counter. ARGV: nodeId, the largest number.
const NODE_NUMBER = `
local known = redis.call('HGET', KEYS[1], ARGV[1])
if known then return tonumber(known) end
local next = redis.call('INCR', KEYS[2])
if next > tonumber(ARGV[2]) then return redis.error_reply('the cluster has no edge numbers left') end
redis.call('HSET', KEYS[1], ARGV[1], next)
return next
`;

type ScriptRunner = (...args: (string | number)[]) => Promise<unknown>;

/** The Redis replies that mean "not now" rather than "wrong": answered as 503 STORE_UNAVAILABLE. */
const TRANSIENT_REPLY = /^(LOADING|BUSY|MASTERDOWN|READONLY|TRYAGAIN|CLUSTERDOWN)/;

/** Redis could not be reached (or is loading): the error every lease call throws then. */
export function storeUnavailable(cause?: unknown): BurrowError {
  const detail = cause instanceof Error ? ` (${cause.message})` : '';
  const error = new BurrowError(
    'STORE_UNAVAILABLE',
    `The shared store of the cluster is unreachable${detail}. Retry after ${STORE_RETRY_SECONDS} s.`,
    { 'Retry-After': String(STORE_RETRY_SECONDS) },
  );
  return error;
}

function asStoreError(error: unknown): unknown {
  if (error instanceof BurrowError) return error;
  if (error instanceof Error && error.name === 'ReplyError' && !TRANSIENT_REPLY.test(error.message)) return error;
  return storeUnavailable(error);
}

export class RedisLeases {
  private readonly claimScript: ScriptRunner;
  private readonly renewScript: ScriptRunner;
  private readonly releaseScript: ScriptRunner;
  private readonly listScript: ScriptRunner;
  private readonly peersScript: ScriptRunner;
  private readonly nodeNumberScript: ScriptRunner;
  private readonly ownerScript: ScriptRunner;
  readonly channel: string;
  /** Replicas that must acknowledge a grant or renewal (WAIT) before the edge relies on it. */
  readonly replicas: number;
  private readonly replicaTimeoutMs: number;

  /**
   * `redis` should fail fast while disconnected (`enableOfflineQueue: false`, a `commandTimeout`):
   * a lease call must answer 503 at once, not wait in a queue while a tunnel's validity runs out.
   */
  constructor(
    readonly redis: Redis,
    readonly prefix = 'burrow:cluster:',
    options: RedisLeasesOptions = {},
  ) {
    this.replicas = options.replicas ?? 0;
    this.replicaTimeoutMs = options.replicaTimeoutMs ?? REPLICA_ACK_TIMEOUT_MS;
    this.claimScript = this.define('burrowLeaseClaim', 3, CLAIM);
    this.renewScript = this.define('burrowLeaseRenew', 2, RENEW);
    this.releaseScript = this.define('burrowLeaseRelease', 2, RELEASE);
    this.listScript = this.define('burrowLeaseList', 1, LIST_LIVE);
    this.peersScript = this.define('burrowLeasePeers', 1, PEERS);
    this.nodeNumberScript = this.define('burrowNodeNumber', 2, NODE_NUMBER);
    this.ownerScript = this.define('burrowLeaseOwner', 1, OWNER);
    this.channel = `${prefix}commands`;
  }

  private define(name: string, keys: number, lua: string): ScriptRunner {
    // ioredis runs EVALSHA and falls back to EVAL on NOSCRIPT (a restarted Redis has no scripts).
    if (typeof (this.redis as unknown as Record<string, unknown>)[name] !== 'function') this.redis.defineCommand(name, { numberOfKeys: keys, lua });
    const runner = (this.redis as unknown as Record<string, ScriptRunner>)[name]!.bind(this.redis);
    return (...args) => runner(...args).catch((error: unknown) => Promise.reject(asStoreError(error)));
  }

  private leaseKey(subdomain: string): string {
    return `${this.prefix}lease:${subdomain}`;
  }

  private accountKey(accountId: string): string {
    return `${this.prefix}account:${accountId}:live`;
  }

  /**
   * Attaches this edge to `claim.subdomain` for `ttlMs`, granting the name when it is free: refused when
   * another account holds it (live or in its grace hold) or the account's live tunnels over every edge
   * reach its cap (a name of its own does not count twice). A live lease of the same client (instance) is
   * joined: this edge serves it beside the others ('attached' when this edge already does). A live lease
   * of another client of the same account is answered 'online' unless the claim replaces it; a replace
   * (or a client naming no instance) is answered 'takeover' with every edge attached unless `fromFence`
   * covers them all.
   */
  async claim(claim: LeaseClaim, ttlMs = LEASE_TTL_MS): Promise<ClaimResult> {
    const reply = (await this.claimScript(
      this.leaseKey(claim.subdomain),
      this.accountKey(claim.accountId),
      `${this.prefix}fence`,
      claim.subdomain,
      claim.accountId,
      claim.tokenId,
      claim.port,
      claim.startedAt,
      claim.publicUrl,
      claim.nodeId,
      claim.advertise,
      claim.boot,
      ttlMs,
      claim.cap,
      claim.fromFence === undefined ? '' : String(claim.fromFence),
      claim.instance,
      claim.clientAddress,
      claim.replace ? '1' : '',
      this.channel,
      (claim.drop ?? []).join(','),
      claim.rejoin === true ? '1' : '',
      claim.policy ?? '',
      claim.pool === true ? '1' : '',
    )) as string[];
    switch (reply[0]) {
      case 'pooled':
      case 'granted': {
        const fence = Number(reply[1]);
        const pooled = reply[0] === 'pooled';
        if (!(await this.replicated())) {
          // The grant may be missing from the replica a failover promotes: nobody serves on it. An attachment
          // this edge's other pool members already had (reply[4]) stays theirs.
          if (!pooled || reply[4] !== '1') await this.drop(claim.subdomain, claim.accountId, fence, claim.nodeId).catch(() => undefined);
          throw this.notReplicated('grant');
        }
        const edges = attachedEdges(reply, pooled ? 5 : 4);
        return pooled
          ? { granted: true, fence, ownerFence: Number(reply[3]), expiresAt: Number(reply[2]), dropped: [], leave: edges }
          : { granted: true, fence, ownerFence: Number(reply[3]), expiresAt: Number(reply[2]), dropped: edges };
      }
      case 'attached':
        return { granted: false, reason: 'attached', fence: Number(reply[1]) };
      case 'taken':
        return { granted: false, reason: 'taken', state: reply[1] === 'held' ? 'held' : 'live' };
      case 'cap':
        return { granted: false, reason: 'cap', active: Number(reply[1]) };
      case 'online':
        return {
          granted: false,
          reason: 'online',
          holder: { instance: reply[1]!, clientAddress: reply[2]!, port: Number(reply[3]), startedAt: Number(reply[4]), tokenId: reply[5]!, nodeId: reply[6]!, pool: reply[7] === '1' },
        };
      default:
        return { granted: false, reason: 'takeover', holders: attachedEdges(reply, 2), fence: Number(reply[1]) };
    }
  }

  /**
   * Extends this edge's attachment to every lease it holds by `ttlMs` where it still has that fence, and
   * beats this edge's heartbeat, in one script. Per lease: 'ok', 'missing' (the lease or this attachment
   * expired or was removed while the name is still the account's: claim it again) or 'lost' (another
   * account has it).
   */
  async renew(
    node: NodeBeat,
    leases: readonly { subdomain: string; fence: number; accountId: string; instance: string }[],
    ttlMs = LEASE_TTL_MS,
    heartbeatTtlMs = HEARTBEAT_TTL_MS,
  ): Promise<RenewOutcome[]> {
    const args: (string | number)[] = [this.prefix, node.nodeId, node.boot, node.advertise, ttlMs, heartbeatTtlMs];
    for (const lease of leases) args.push(lease.subdomain, String(lease.fence), lease.accountId, lease.instance);
    const outcomes = (await this.renewScript(`${this.prefix}node:${node.nodeId}`, `${this.prefix}nodes`, ...args)) as RenewOutcome[];
    // An extension the promoted replica may lack must not extend what the edge serves (a heartbeat alone extends nothing).
    if (leases.length > 0 && !(await this.replicated())) throw this.notReplicated('renewal');
    return outcomes;
  }

  /**
   * True once `replicas` replicas acknowledged every write this connection made (WAIT; at once when
   * none are asked for). WAIT cannot run inside a script, so it follows the script on the same
   * connection: Redis counts this client's writes up to that point.
   */
  private async replicated(): Promise<boolean> {
    if (this.replicas === 0) return true;
    let acknowledged: number;
    try {
      acknowledged = await this.redis.wait(this.replicas, this.replicaTimeoutMs);
    } catch (error) {
      throw asStoreError(error);
    }
    return acknowledged >= this.replicas;
  }

  private notReplicated(what: 'grant' | 'renewal'): BurrowError {
    const replicas = `${this.replicas} replica${this.replicas === 1 ? '' : 's'}`;
    return new BurrowError(
      'STORE_UNAVAILABLE',
      `The cluster's store could not make the lease ${what} safe: it was not acknowledged by ${replicas} within ${this.replicaTimeoutMs} ms ` +
        `(a replica is down or lagging). Retry after ${STORE_RETRY_SECONDS} s.`,
      { 'Retry-After': String(STORE_RETRY_SECONDS) },
    );
  }

  /**
   * A tunnel's session on this edge ended: its attachment `fence` goes. The last one leaves the name its
   * account's for `graceMs`.
   */
  async hold(subdomain: string, accountId: string, fence: number, nodeId: string, graceMs: number): Promise<boolean> {
    return (await this.releaseScript(this.leaseKey(subdomain), this.accountKey(accountId), subdomain, String(fence), nodeId, graceMs, this.channel)) === 1;
  }

  /** A tunnel closed for good (through the API, token revoked): its attachment goes, and after the last one the name is free at once. */
  drop(subdomain: string, accountId: string, fence: number, nodeId: string): Promise<boolean> {
    return this.hold(subdomain, accountId, fence, nodeId, 0);
  }

  /** Who holds `subdomain` now (live or held, with its live attachments), or null. */
  async owner(subdomain: string): Promise<LeaseRecord | null> {
    const [now, flat] = (await this.ownerScript(this.leaseKey(subdomain))) as [string, string[]];
    const fields = fieldsOf(flat);
    return fields.fence === undefined ? null : leaseFromFields(fields, Number(now));
  }

  /**
   * Every live lease now (SCAN over the lease keys, read in pipelined batches) with Redis's clock: what
   * an edge loads after (re)subscribing, before the pushed changes keep it current. Leases that change
   * while it runs are in the pushed messages too; the fences order the two.
   */
  async snapshot(): Promise<LeaseSnapshot> {
    const leases: LeaseRecord[] = [];
    try {
      const redisNow = await this.now();
      let cursor = '0';
      do {
        const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.leaseKey('')}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length === 0) continue;
        const pipeline = this.redis.pipeline();
        for (const key of keys) pipeline.hgetall(key);
        for (const [error, fields] of (await pipeline.exec()) ?? []) {
          if (error !== null) throw error;
          const record = fields as Record<string, string>;
          if (record.fence === undefined || record.state !== 'live') continue;
          const lease = leaseFromFields(record, redisNow);
          if (lease.attachments.length > 0) leases.push(lease);
        }
      } while (cursor !== '0');
      return { leases, redisNow };
    } catch (error) {
      throw asStoreError(error);
    }
  }

  /** Redis's clock (ms since the epoch): what lease expiries are measured on. */
  async now(): Promise<number> {
    try {
      const [seconds, micros] = await this.redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    } catch (error) {
      throw asStoreError(error);
    }
  }

  /** The account's live leases over every edge, oldest first. */
  async listLive(accountId: string): Promise<LeaseRecord[]> {
    const [now, ...reply] = (await this.listScript(this.accountKey(accountId), this.prefix, accountId)) as [string, ...string[][]];
    const leases: LeaseRecord[] = [];
    for (const flat of reply) {
      const lease = leaseFromFields(fieldsOf(flat), Number(now));
      if (lease.state === 'live' && lease.accountId === accountId) leases.push(lease);
    }
    return leases.sort((a, b) => a.startedAt - b.startedAt);
  }

  /** How many live tunnels the account has over every edge. */
  async liveCount(accountId: string): Promise<number> {
    return (await this.listLive(accountId)).length;
  }

  /** The edges whose heartbeat is alive. */
  async peers(): Promise<PeerRecord[]> {
    const reply = (await this.peersScript(`${this.prefix}nodes`, this.prefix)) as [string, number][];
    const peers: PeerRecord[] = [];
    for (const [beat, ttl] of reply) {
      const parsed = JSON.parse(beat) as NodeBeat;
      peers.push({ nodeId: parsed.nodeId, advertise: parsed.advertise, boot: parsed.boot, expiresInMs: Number(ttl) });
    }
    return peers.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
  }

  /** The heartbeat of `nodeId`, or null when it is not alive. */
  async peer(nodeId: string): Promise<NodeBeat | null> {
    let beat: string | null;
    try {
      beat = await this.redis.get(`${this.prefix}node:${nodeId}`);
    } catch (error) {
      throw asStoreError(error);
    }
    return beat === null ? null : (JSON.parse(beat) as NodeBeat);
  }

  /**
   * The cluster's number for `nodeId` (1, 2, ...), drawn once and kept: it picks the edge's span of capture
   * ring ids, so request ids never repeat across the edges and name the edge that stored them.
   */
  async nodeNumber(nodeId: string, max: number): Promise<number> {
    return Number(await this.nodeNumberScript(`${this.prefix}node-numbers`, `${this.prefix}node-number`, nodeId, max));
  }

  /** Removes this edge's heartbeat (a clean shutdown). */
  async leave(nodeId: string): Promise<void> {
    try {
      await this.redis.multi().del(`${this.prefix}node:${nodeId}`).srem(`${this.prefix}nodes`, nodeId).exec();
    } catch (error) {
      throw asStoreError(error);
    }
  }

  /**
   * The internal hop's secret: `candidate` if no edge stored one before (`stored`: this call stored it),
   * else the stored one.
   */
  async sharedSecret(candidate: string): Promise<{ secret: string; stored: boolean }> {
    try {
      const key = `${this.prefix}secret`;
      const stored = (await this.redis.set(key, candidate, 'NX')) === 'OK';
      const secret = await this.redis.get(key);
      if (secret === null) throw new Error('the cluster secret vanished right after it was set');
      return { secret, stored };
    } catch (error) {
      throw asStoreError(error);
    }
  }

  /** Sends a command to every edge (this one included). */
  async publish(command: ClusterCommand): Promise<void> {
    try {
      await this.redis.publish(this.channel, JSON.stringify(command));
    } catch (error) {
      throw asStoreError(error);
    }
  }

  /**
   * Listens to the commands channel on `subscriber` (a `duplicate()` of the client: a subscribed
   * connection can do nothing else). ioredis subscribes again after a reconnect.
   */
  static async subscribe(subscriber: Redis, channel: string, onCommand: (command: ClusterCommand) => void): Promise<void> {
    subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      let command: ClusterCommand;
      try {
        command = parseCommand(JSON.parse(message));
      } catch {
        return;
      }
      onCommand(command);
    });
    await subscriber.subscribe(channel);
  }
}

/** A message of the commands channel: the scripts send numbers as strings (Lua's cjson would shorten them). */
function parseCommand(raw: { type?: unknown } & Record<string, unknown>): ClusterCommand {
  switch (raw.type) {
    case 'granted': {
      const { attachments: _none, ...lease } = leaseFromFields(raw.lease as Record<string, string>, 0);
      return { type: 'granted', lease, attachment: attachmentOf(String((raw.attachment as Record<string, string>).nodeId), raw.attachment as Record<string, string>), ttlMs: Number(raw.ttlMs) };
    }
    case 'released':
      return { type: 'released', subdomain: String(raw.subdomain), nodeId: String(raw.nodeId), fence: Number(raw.fence) };
    case 'renewed':
      return { type: 'renewed', nodeId: String(raw.nodeId), boot: String(raw.boot), advertise: String(raw.advertise), ttlMs: Number(raw.ttlMs) };
    case 'policy':
      return { type: 'policy', subdomain: String(raw.subdomain) };
    default:
      return raw as ClusterCommand;
  }
}

function fieldsOf(flat: readonly string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return fields;
}

/** A lease as stored: its fields, and its attachments (`a:<node id>` fields) that are live at `now` (Redis's clock). */
function leaseFromFields(fields: Record<string, string>, now: number): LeaseRecord {
  const attachments: Attachment[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (!name.startsWith('a:')) continue;
    let attachment: Attachment;
    try {
      attachment = attachmentOf(name.slice(2), JSON.parse(value) as Record<string, string>);
    } catch {
      continue;
    }
    if (attachment.expiresAt > now) attachments.push(attachment);
  }
  attachments.sort((a, b) => a.fence - b.fence);
  return {
    subdomain: fields.subdomain ?? '',
    accountId: fields.accountId ?? '',
    tokenId: fields.tokenId ?? '',
    port: Number(fields.port),
    startedAt: Number(fields.startedAt),
    publicUrl: fields.publicUrl ?? '',
    instance: fields.instance ?? '',
    clientAddress: fields.clientAddress ?? '',
    fence: Number(fields.fence),
    state: fields.state === 'held' ? 'held' : 'live',
    expiresAt: Number(fields.expiresAt),
    policy: fields.policy ?? '',
    pool: fields.pool === '1',
    attachments,
  };
}

function attachmentOf(nodeId: string, stored: Record<string, string>): Attachment {
  return { nodeId, advertise: String(stored.advertise ?? ''), boot: String(stored.boot ?? ''), fence: Number(stored.fence), expiresAt: Number(stored.expiresAt) };
}

/** The (node id, boot, advertise, fence) quadruples of a script's reply from `from` on. */
function attachedEdges(reply: readonly string[], from: number): AttachedEdge[] {
  const edges: AttachedEdge[] = [];
  for (let i = from; i + 3 < reply.length; i += 4) edges.push({ nodeId: reply[i]!, boot: reply[i + 1]!, advertise: reply[i + 2]!, fence: Number(reply[i + 3]) });
  return edges;
}
