/**
 * The Lua scripts of src/store/redis-store.ts: each write that must hold together runs as one script, so
 * Redis executes its check and its writes with nothing of another client in between (a cap counted and
 * the record written, a record and its account's index). Every key a script touches arrives in KEYS
 * (nothing is built inside a script), records are the JSON documented in redis-store.ts, decoded and
 * re-encoded with Redis's cjson. Scripts return a status word first: JavaScript turns it into the same
 * BurrowError the LMDB Store throws.
 */

export interface ScriptDefinition {
  numberOfKeys: number;
  lua: string;
}

/**
 * KEYS: accounts-by-email, account:<id>, token:<seg>, account-tokens:<id>.
 * ARGV: e-mail, account JSON, token JSON, token id segment, account id.
 */
const createAccount: ScriptDefinition = {
  numberOfKeys: 4,
  lua: `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'email-taken' end
if redis.call('EXISTS', KEYS[3]) == 1 then return 'id-collision' end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SADD', KEYS[4], ARGV[4])
return 'ok'`,
};

/** KEYS: account-tokens:<id>, token:<seg>. ARGV: cap (-1: none), token JSON, token id segment. */
const createToken: ScriptDefinition = {
  numberOfKeys: 2,
  lua: `
local cap = tonumber(ARGV[1])
if cap >= 0 and redis.call('SCARD', KEYS[1]) >= cap then return 'cap' end
if redis.call('EXISTS', KEYS[2]) == 1 then return 'id-collision' end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[1], ARGV[3])
return 'ok'`,
};

/** KEYS: token:<seg>, account-tokens:<id>. ARGV: account id, now, token id segment. 1 when revoked. */
const revokeToken: ScriptDefinition = {
  numberOfKeys: 2,
  lua: `
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
local record = cjson.decode(stored)
if record.accountId ~= ARGV[1] or record.revokedAt ~= cjson.null then return 0 end
record.revokedAt = tonumber(ARGV[2])
redis.call('SET', KEYS[1], cjson.encode(record))
redis.call('SREM', KEYS[2], ARGV[3])
return 1`,
};

/**
 * KEYS: reservation:<name>, account-reservations:<id>.
 * ARGV: account id, new record JSON, cap (-1: none), offline mode ('' when not given), subdomain.
 * Returns {status, record JSON}: 'ok' (the account's reservation), 'taken' (another account's), 'cap'.
 */
const reserve: ScriptDefinition = {
  numberOfKeys: 2,
  lua: `
local stored = redis.call('GET', KEYS[1])
if stored then
  local existing = cjson.decode(stored)
  if existing.accountId ~= ARGV[1] then return {'taken', stored} end
  if ARGV[4] == '' or (existing.offline or 'off') == ARGV[4] then return {'ok', stored} end
  existing.offline = ARGV[4]
  local changed = cjson.encode(existing)
  redis.call('SET', KEYS[1], changed)
  return {'ok', changed}
end
local cap = tonumber(ARGV[3])
if cap >= 0 and redis.call('SCARD', KEYS[2]) >= cap then return {'cap', ''} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[5])
return {'ok', ARGV[2]}`,
};

/** KEYS: reservation:<name>. ARGV: account id, offline mode. The changed record JSON, or false. */
const setOfflineMode: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `
local stored = redis.call('GET', KEYS[1])
if not stored then return false end
local existing = cjson.decode(stored)
if existing.accountId ~= ARGV[1] then return false end
existing.offline = ARGV[2]
local changed = cjson.encode(existing)
redis.call('SET', KEYS[1], changed)
return changed`,
};

/**
 * KEYS: reservation:<name>. ARGV: account id, the policy's JSON ('' removes it), and optionally the policy
 * JSON that must still be stored (compare-and-set). The changed record JSON, or false. The policy stays a
 * JSON string inside the record: cjson would turn its empty arrays into objects if it decoded them, here
 * and in every other script that rewrites the record.
 */
const setPolicy: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `
local stored = redis.call('GET', KEYS[1])
if not stored then return false end
local existing = cjson.decode(stored)
if existing.accountId ~= ARGV[1] then return false end
if ARGV[3] ~= nil and existing.policy ~= ARGV[3] then return false end
if ARGV[2] == '' then existing.policy = nil else existing.policy = ARGV[2] end
local changed = cjson.encode(existing)
redis.call('SET', KEYS[1], changed)
return changed`,
};

/** KEYS: reservation:<name>, account-reservations:<id>. ARGV: account id, subdomain. 1 when released. */
const releaseReservation: ScriptDefinition = {
  numberOfKeys: 2,
  lua: `
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
if cjson.decode(stored).accountId ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1`,
};

/** KEYS: account:<id>. ARGV: plan. The changed account JSON, or false when there is no such account. */
const setPlan: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `
local stored = redis.call('GET', KEYS[1])
if not stored then return false end
local account = cjson.decode(stored)
account.plan = ARGV[1]
local changed = cjson.encode(account)
redis.call('SET', KEYS[1], changed)
return changed`,
};

/**
 * A usage flush, applied at most once however often it is sent (a reply lost to a dropped connection is
 * sent again with the same batch id). KEYS: usage-flush:<batch id>, then one usage:<account>:<period>
 * hash per entry. ARGV: the marker's lifetime in ms, then requests, bytesIn, bytesOut per entry.
 */
const flushUsage: ScriptDefinition = {
  numberOfKeys: -1,
  lua: `
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
for i = 2, #KEYS do
  local at = (i - 2) * 3 + 2
  redis.call('HINCRBY', KEYS[i], 'requests', ARGV[at])
  redis.call('HINCRBY', KEYS[i], 'bytesIn', ARGV[at + 1])
  redis.call('HINCRBY', KEYS[i], 'bytesOut', ARGV[at + 2])
end
return 1`,
};

/**
 * One fixed window per key for the cluster, started by the key's first hit (SET NX PX), like
 * FixedWindowLimiter. KEYS: limit:<name>:<key>. ARGV: window in ms. Returns {count, ms left}.
 */
const limiterHit: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `
redis.call('SET', KEYS[1], '0', 'NX', 'PX', ARGV[1])
local count = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {count, left}`,
};

/**
 * The reads of a token check in one round trip: the id's record, or the decoy when there is none (an
 * unknown id costs what a known one does), then that record's account and last use. One of the two scripts
 * that derive a key (the account's, from the record) instead of receiving it (openSession is the other).
 * KEYS: token:<seg>, token:~decoy, token-last-used. ARGV: the account key's prefix (`<prefix>account:`),
 * the id segment. Returns {token JSON or false, decoy JSON or false, account JSON or false, last use or false}.
 */
const verifyRead: ScriptDefinition = {
  numberOfKeys: 3,
  lua: `
local token = redis.call('GET', KEYS[1])
local decoy = false
local compared = token
if not token then
  decoy = redis.call('GET', KEYS[2])
  compared = decoy
end
local account = false
if compared then account = redis.call('GET', ARGV[1] .. cjson.decode(compared).accountId) end
return {token, decoy, account, redis.call('HGET', KEYS[3], ARGV[2])}`,
};

/** Lua: `now` (ms) and `micros` on Redis's own clock, the one every session time is read from. */
const REDIS_NOW = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local micros = tonumber(time[1]) * 1000000 + tonumber(time[2])`;

/**
 * Opens a dashboard session on Redis's own clock (TIME), never an edge's: the record's times, its PX
 * (the idle time, at most the max age) and its place in the token's sessions. Then the token keeps at
 * most `perToken` sessions: members whose session has already ended (expired by Redis) go first, then the
 * oldest live ones, whose records are deleted. Like verifyRead it derives keys (the evicted sessions',
 * from the session key prefix), bounded by the cap: the token's set holds at most perToken + 1 members.
 * KEYS: session:<hash>, token-sessions:<seg>. ARGV: record JSON without its times, idle ms, max age ms,
 * perToken, the session's hash, the session key prefix (`<prefix>session:`).
 * Returns {created at ms, number of sessions ended}.
 */
const openSession: ScriptDefinition = {
  numberOfKeys: 2,
  lua: `${REDIS_NOW}
local maxAge = tonumber(ARGV[3])
local record = cjson.decode(ARGV[1])
record.createdAt = now
record.lastSeenAt = now
redis.call('SET', KEYS[1], cjson.encode(record), 'PX', math.min(tonumber(ARGV[2]), maxAge))
local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local score = micros
if newest[2] and tonumber(newest[2]) >= score then score = tonumber(newest[2]) + 1 end
redis.call('ZADD', KEYS[2], score, ARGV[5])
redis.call('PEXPIRE', KEYS[2], maxAge)
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
local ended = 0
if excess > 0 then
  for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -2)) do
    if excess == 0 then break end
    if redis.call('EXISTS', ARGV[6] .. member) == 0 then
      redis.call('ZREM', KEYS[2], member)
      excess = excess - 1
    end
  end
  if excess > 0 then
    for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, excess - 1)) do
      redis.call('ZREM', KEYS[2], member)
      ended = ended + redis.call('DEL', ARGV[6] .. member)
    end
  end
end
return {now, ended}`,
};

/**
 * A session's use, judged by Redis alone: the record exists until its PX runs out. A use more than
 * `touch every` after the last moves the idle deadline (PX = the idle time, at most what is left of the
 * max age), on Redis's clock. KEYS: session:<hash>. ARGV: idle ms, max age ms, touch every ms.
 * Returns {record JSON, ms left}, or false when there is no such session.
 */
const useSession: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `
local stored = redis.call('GET', KEYS[1])
if not stored then return false end
local record = cjson.decode(stored)${REDIS_NOW}
if now - record.lastSeenAt > tonumber(ARGV[3]) then
  local left = math.min(tonumber(ARGV[1]), record.createdAt + tonumber(ARGV[2]) - now)
  if left <= 0 then
    redis.call('DEL', KEYS[1])
    return false
  end
  record.lastSeenAt = now
  stored = cjson.encode(record)
  redis.call('SET', KEYS[1], stored, 'PX', left)
end
return {stored, redis.call('PTTL', KEYS[1])}`,
};

export const REDIS_SCRIPTS = {
  burrowVerifyRead: verifyRead,
  burrowCreateAccount: createAccount,
  burrowCreateToken: createToken,
  burrowRevokeToken: revokeToken,
  burrowReserve: reserve,
  burrowSetOfflineMode: setOfflineMode,
  burrowSetPolicy: setPolicy,
  burrowReleaseReservation: releaseReservation,
  burrowSetPlan: setPlan,
  burrowFlushUsage: flushUsage,
  burrowLimiterHit: limiterHit,
  burrowOpenSession: openSession,
  burrowUseSession: useSession,
} as const;

export type ScriptName = keyof typeof REDIS_SCRIPTS;
