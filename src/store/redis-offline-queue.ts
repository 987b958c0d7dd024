/**
 * The offline queue of a cluster (docs/offline.md, "In cluster mode"; issue 28, item 4): webhooks held
 * for a reserved subdomain in `queue` mode while no edge holds its tunnel, in one Redis stream per name,
 * so whichever edge holds the tunnel when it comes back delivers them.
 *
 * Keys (under `prefix`, the leases' `burrow:cluster:`):
 *   q:<sub>               stream: one entry per held event, in arrival order (the stream id orders them)
 *   q:<sub>:use           hash: events, bytes held now (undelivered)
 *   q:acct:<accountId>    hash: events, bytes held now over all the account's names
 *   q:<sub>:dup:<sender>  string: the event id a sender's id and body digest were held as (24 h)
 *   q:<sub>:lock          string: the delivering edge's token (PX, renewed while it delivers)
 *   q:<sub>:failed        stream: events parked as failed (capped)
 *
 * Each step is one script: a hold checks the bounds, the duplicate and appends, atomically; an ack
 * removes exactly the event the lock holder delivered, so two edges never both count one delivery, and a
 * delivering edge killed mid-way leaves the event in the stream for the next holder of the lock.
 */
import type { Redis } from 'ioredis';
import { storeUnavailable } from './redis-leases.js';

/** One held request, as stored. */
export interface HeldEvent {
  /** The stream id (arrival order). */
  streamId: string;
  /** `evt_…`, what the sender was answered. */
  id: string;
  accountId: string;
  generation: string;
  method: string;
  path: string;
  /** [name, value, ...] */
  headers: string[];
  clientAddress: string;
  receivedAt: number;
  body: Buffer;
}

export type NewHeldEvent = Omit<HeldEvent, 'streamId'>;

export interface HoldLimits {
  events: number;
  bytes: number;
  accountEvents: number;
  accountBytes: number;
}

export type HoldOutcome = { held: string; duplicate: boolean } | { full: string };

/** How long a sender's id is remembered against duplicates. */
const DUPLICATE_WINDOW_S = 24 * 3600;
/** Failed events kept for a look (the newest). */
const FAILED_KEPT = 1_000;

// KEYS: stream, use, account use, dup key ('' when the sender sent no id).
// ARGV: size, limits (events, bytes, accountEvents, accountBytes), dup ttl, the commands channel, subdomain, then the entry's field/value pairs.
const HOLD = `
if KEYS[4] ~= '' then
  local seen = redis.call('GET', KEYS[4])
  if seen then return {'duplicate', seen} end
end
local size = tonumber(ARGV[1])
local events = tonumber(redis.call('HGET', KEYS[2], 'events') or '0')
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
if events + 1 > tonumber(ARGV[2]) then return {'full', 'it holds its limit of ' .. ARGV[2] .. ' events'} end
if bytes + size > tonumber(ARGV[3]) then return {'full', 'it holds ' .. bytes .. ' of its ' .. ARGV[3] .. ' bytes'} end
local accountEvents = tonumber(redis.call('HGET', KEYS[3], 'events') or '0')
local accountBytes = tonumber(redis.call('HGET', KEYS[3], 'bytes') or '0')
if accountEvents + 1 > tonumber(ARGV[4]) then return {'full', "the account's queues hold their limit of " .. ARGV[4] .. ' events'} end
if accountBytes + size > tonumber(ARGV[5]) then return {'full', "the account's queues hold " .. accountBytes .. ' of their ' .. ARGV[5] .. ' bytes'} end
local entry = {}
for i = 9, #ARGV do entry[#entry + 1] = ARGV[i] end
local streamId = redis.call('XADD', KEYS[1], '*', unpack(entry))
redis.call('HINCRBY', KEYS[2], 'events', 1)
redis.call('HINCRBY', KEYS[2], 'bytes', size)
redis.call('HINCRBY', KEYS[3], 'events', 1)
redis.call('HINCRBY', KEYS[3], 'bytes', size)
local id = ''
for i = 9, #ARGV, 2 do if ARGV[i] == 'id' then id = ARGV[i + 1] end end
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], id, 'EX', tonumber(ARGV[6])) end
redis.call('PUBLISH', ARGV[7], cjson.encode({type = 'queued', subdomain = ARGV[8]}))
return {'held', id}
`;

// KEYS: stream, use, account use, lock, failed stream.
// ARGV: stream id, lock token, size, the commands channel, subdomain, 'failed' or '', the failed entry's pairs.
// Only the lock's holder acks; an event acked already (by an earlier holder) is not counted twice. The
// last one out says so to every edge ('drained'): live requests stop waiting behind the queue.
const ACK = `
if redis.call('GET', KEYS[4]) ~= ARGV[2] then return 'lost' end
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then return 'gone' end
local size = tonumber(ARGV[3])
redis.call('HINCRBY', KEYS[2], 'events', -1)
redis.call('HINCRBY', KEYS[2], 'bytes', -size)
redis.call('HINCRBY', KEYS[3], 'events', -1)
redis.call('HINCRBY', KEYS[3], 'bytes', -size)
if ARGV[6] == 'failed' then
  local entry = {}
  for i = 7, #ARGV do entry[#entry + 1] = ARGV[i] end
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ${FAILED_KEPT}, '*', unpack(entry))
end
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('PUBLISH', ARGV[4], cjson.encode({type = 'drained', subdomain = ARGV[5]})) end
return 'ok'
`;

// KEYS: stream, use, account use. Drops every event of the name and gives the account its share back.
const DROP = `
local events = tonumber(redis.call('HGET', KEYS[2], 'events') or '0')
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
redis.call('HINCRBY', KEYS[3], 'events', -events)
redis.call('HINCRBY', KEYS[3], 'bytes', -bytes)
redis.call('DEL', KEYS[1], KEYS[2])
return events
`;

// KEYS: lock. ARGV: token, ttl ms. Taken when free, extended when ours; 0 when another edge holds it.
const LOCK = `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
`;

// KEYS: lock. ARGV: token.
const UNLOCK = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`;

interface QueueScripts {
  burrowQueueHold(...args: (string | number | Buffer)[]): Promise<[string, string]>;
  burrowQueueAck(...args: (string | number)[]): Promise<string>;
  burrowQueueLock(...args: (string | number)[]): Promise<number>;
  burrowQueueUnlock(...args: (string | number)[]): Promise<number>;
  burrowQueueDrop(...args: string[]): Promise<number>;
}

export class RedisOfflineQueue {
  private readonly redis: Redis & QueueScripts;

  constructor(
    redis: Redis,
    /** Replicas that must acknowledge a held event before its sender is answered (WAIT), as the leases'. */
    readonly replicas: number,
    private readonly channel: string,
    readonly prefix = 'burrow:cluster:',
    private readonly replicaTimeoutMs = 1_000,
  ) {
    this.redis = redis as Redis & QueueScripts;
    redis.defineCommand('burrowQueueHold', { numberOfKeys: 4, lua: HOLD });
    redis.defineCommand('burrowQueueAck', { numberOfKeys: 5, lua: ACK });
    redis.defineCommand('burrowQueueLock', { numberOfKeys: 1, lua: LOCK });
    redis.defineCommand('burrowQueueUnlock', { numberOfKeys: 1, lua: UNLOCK });
    redis.defineCommand('burrowQueueDrop', { numberOfKeys: 3, lua: DROP });
  }

  disconnect(): void {
    this.redis.disconnect();
  }

  private key(subdomain: string, part = ''): string {
    return `${this.prefix}q:${subdomain}${part}`;
  }

  /**
   * Holds an event unless the name's or the account's bounds would be passed, or the same sender id and
   * body were held already (then the earlier event's id). Acknowledged by `replicas` replicas before it
   * resolves; not acknowledged in time: STORE_UNAVAILABLE (the sender retries, and the retry is taken for
   * a duplicate if the write did survive).
   */
  async hold(subdomain: string, event: NewHeldEvent, limits: HoldLimits, duplicateKey: string | null): Promise<HoldOutcome> {
    const size = event.body.byteLength;
    let reply: [string, string];
    try {
      reply = await this.redis.burrowQueueHold(
        this.key(subdomain),
        this.key(subdomain, ':use'),
        `${this.prefix}q:acct:${event.accountId}`,
        duplicateKey === null ? '' : this.key(subdomain, `:dup:${duplicateKey}`),
        size,
        limits.events,
        limits.bytes,
        limits.accountEvents,
        limits.accountBytes,
        DUPLICATE_WINDOW_S,
        this.channel,
        subdomain,
        ...entryFields(event),
      );
    } catch (error) {
      throw storeUnavailable(error);
    }
    if (reply[0] === 'full') return { full: reply[1] };
    if (reply[0] === 'held' && this.replicas > 0) {
      let acknowledged = 0;
      try {
        acknowledged = await this.redis.wait(this.replicas, this.replicaTimeoutMs);
      } catch (error) {
        throw storeUnavailable(error);
      }
      if (acknowledged < this.replicas) throw storeUnavailable(new Error(`the event was not acknowledged by ${this.replicas} replica(s) within ${this.replicaTimeoutMs} ms`));
    }
    return { held: reply[1], duplicate: reply[0] === 'duplicate' };
  }

  /** The oldest events still held on `subdomain`, in order (at most `count`; after the stream id `after` when given). */
  async oldest(subdomain: string, count: number, after?: string): Promise<HeldEvent[]> {
    let entries: [string, Buffer[]][];
    try {
      entries = (await this.redis.xrangeBuffer(this.key(subdomain), after === undefined ? '-' : `(${after}`, '+', 'COUNT', count)) as unknown as [string, Buffer[]][];
    } catch (error) {
      throw storeUnavailable(error);
    }
    return entries.map(([streamId, fields]) => parseEntry(String(streamId), fields));
  }

  /** Drops every event held for `subdomain` (its reservation was released); how many went. */
  async drop(subdomain: string, accountId: string): Promise<number> {
    return this.redis.burrowQueueDrop(this.key(subdomain), this.key(subdomain, ':use'), `${this.prefix}q:acct:${accountId}`);
  }

  /** How many events and bytes `subdomain` holds now. */
  async use(subdomain: string): Promise<{ events: number; bytes: number }> {
    const [events, bytes] = await this.redis.hmget(this.key(subdomain, ':use'), 'events', 'bytes');
    return { events: Number(events ?? 0), bytes: Number(bytes ?? 0) };
  }

  /** Takes (or extends) the delivery lock of `subdomain`: false when another edge holds it. */
  async lock(subdomain: string, token: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.burrowQueueLock(this.key(subdomain, ':lock'), token, ttlMs)) === 1;
  }

  async unlock(subdomain: string, token: string): Promise<void> {
    await this.redis.burrowQueueUnlock(this.key(subdomain, ':lock'), token);
  }

  /**
   * The lock holder's delivery of `event` is over: delivered, or parked as failed (`failure` says why).
   * 'lost': this edge's lock lapsed meanwhile (another edge may deliver it again); 'gone': acked already.
   */
  async ack(subdomain: string, event: HeldEvent, token: string, failure: string | null): Promise<'ok' | 'lost' | 'gone'> {
    const failed = failure === null ? [] : ['failed', 'id', event.id, 'why', failure, 'received_at', String(event.receivedAt), 'method', event.method, 'path', event.path];
    return (await this.redis.burrowQueueAck(
      this.key(subdomain),
      this.key(subdomain, ':use'),
      `${this.prefix}q:acct:${event.accountId}`,
      this.key(subdomain, ':lock'),
      this.key(subdomain, ':failed'),
      event.streamId,
      token,
      event.body.byteLength,
      this.channel,
      subdomain,
      ...(failed.length === 0 ? [''] : failed),
    )) as 'ok' | 'lost' | 'gone';
  }
}

function entryFields(event: NewHeldEvent): (string | Buffer)[] {
  return [
    'id', event.id,
    'account', event.accountId,
    'generation', event.generation,
    'method', event.method,
    'path', event.path,
    'headers', JSON.stringify(event.headers),
    'client', event.clientAddress,
    'received_at', String(event.receivedAt),
    'body', event.body,
  ];
}

function parseEntry(streamId: string, fields: Buffer[]): HeldEvent {
  const values = new Map<string, Buffer>();
  for (let i = 0; i + 1 < fields.length; i += 2) values.set(fields[i]!.toString('latin1'), fields[i + 1]!);
  const text = (name: string): string => values.get(name)?.toString('utf8') ?? '';
  return {
    streamId,
    id: text('id'),
    accountId: text('account'),
    generation: text('generation'),
    method: text('method'),
    path: text('path'),
    headers: JSON.parse(text('headers') || '[]') as string[],
    clientAddress: text('client'),
    receivedAt: Number(text('received_at')),
    body: values.get('body') ?? Buffer.alloc(0),
  };
}
