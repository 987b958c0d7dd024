/**
 * A hash table for the tables the traffic sets and deletes an entry in for every request: the streams of
 * a tunnel connection by id (edge and client), the inspector's exchanges by request id.
 *
 * Why not a `Map`: V8 rebuilds a Map's hash table every few hundred deletions, and the table it leaves
 * keeps a pointer to its successor and the entries it held. Once a full GC has moved a table to the old
 * generation, the dead table keeps its successor and those entries alive through every scavenge until
 * the next full GC: they are promoted, and so is whatever they point to, the next table included. Under
 * load that chain promoted ~40% of what each request allocated, and V8 then ran a full GC every ~0.7 s:
 * the edge spent 19.7 µs a request before the first full GC and 26.8 after it, capture off (bench/RESULTS.md,
 * tuning log, "the promotion chain"). This table is open addressing with linear probing and
 * backward-shift deletion: its arrays are replaced only when they grow, and a deletion clears its slot,
 * so nothing dead ever points at what the table holds.
 *
 * `values()` gives a copy: callers may delete (fail a stream) while they walk it.
 */

const MIN_CAPACITY = 16;

/** FNV-1a over the UTF-16 code units: request ids are short ASCII strings. */
function hashString(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return hash;
}

/** A key's hash as an int32: a number key is its own (ids are sequential, so they spread by themselves). */
function hashOf(key: number | string): number {
  return typeof key === 'number' ? key | 0 : hashString(key);
}

export class KeyTable<K extends number | string, V> {
  private keys: (K | undefined)[];
  private slots: (V | undefined)[];
  /**
   * Each occupied slot's hash (a number key is its own): a deletion's backward shift reads where each
   * moved entry belongs from here instead of hashing its string again, and a probe compares hashes
   * before strings. With the ring's entries keeping their id's hash (`...Hashed`), an add to the
   * inspector's ring (1,000 request ids), eviction included, went from ~485 to ~255 ns in a loop
   * (bench/RESULTS.md, tuning log of 2026-11-28 09:46).
   */
  private hashes: Int32Array;
  private mask: number;
  private count = 0;

  constructor(capacity = MIN_CAPACITY) {
    let size = MIN_CAPACITY;
    while (size < capacity * 2) size *= 2;
    this.keys = new Array<K | undefined>(size).fill(undefined);
    this.slots = new Array<V | undefined>(size).fill(undefined);
    this.hashes = new Int32Array(size);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count;
  }

  /**
   * `key`'s hash as the table computes it. A caller that keeps it beside the key (the inspector's ring,
   * in each entry) passes it to the `...Hashed` methods, so a string is hashed once, not at each use.
   */
  static hash(key: number | string): number {
    return hashOf(key);
  }

  get(key: K): V | undefined {
    return this.getHashed(key, hashOf(key));
  }

  /** `get` with `hash` = KeyTable.hash(key). */
  getHashed(key: K, hash: number): V | undefined {
    const at = this.find(key, hash);
    return at < 0 ? undefined : this.slots[at];
  }

  has(key: K): boolean {
    return this.find(key, hashOf(key)) >= 0;
  }

  /** Sets the entry for `key`, replacing any. A number key is a whole number from 0 to 2^32 - 1 (a stream id). */
  set(key: K, value: V): this {
    return this.setHashed(key, hashOf(key), value);
  }

  /** `set` with `hash` = KeyTable.hash(key). */
  setHashed(key: K, hash: number, value: V): this {
    if (typeof key === 'number' && !(Number.isInteger(key) && key >= 0 && key <= 0xffffffff)) throw new RangeError(`KeyTable: ${key} is not a whole number from 0 to 2^32 - 1`);
    if ((this.count + 1) * 2 > this.keys.length) this.grow();
    this.place(key, hash, value);
    return this;
  }

  delete(key: K): boolean {
    const at = this.find(key, hashOf(key));
    if (at < 0) return false;
    this.removeAt(at);
    return true;
  }

  /**
   * Deletes the entry for `key` only when it holds this very `value` (one probe where get-then-delete
   * takes two). `value` may be typed as anything the caller holds (an interface the entries implement).
   */
  deleteIf(key: K, value: unknown): boolean {
    return this.deleteIfHashed(key, hashOf(key), value);
  }

  /** `deleteIf` with `hash` = KeyTable.hash(key). */
  deleteIfHashed(key: K, hash: number, value: unknown): boolean {
    const at = this.find(key, hash);
    if (at < 0 || this.slots[at] !== value) return false;
    this.removeAt(at);
    return true;
  }

  /** The values held now, in no particular order (a copy). */
  values(): V[] {
    const values: V[] = [];
    const keys = this.keys;
    for (let at = 0; at < keys.length; at++) if (keys[at] !== undefined) values.push(this.slots[at]!);
    return values;
  }

  clear(): void {
    this.keys.fill(undefined);
    this.slots.fill(undefined);
    this.count = 0;
  }

  private place(key: K, hash: number, value: V): void {
    const keys = this.keys;
    const hashes = this.hashes;
    const mask = this.mask;
    for (let at = hash & mask; ; at = (at + 1) & mask) {
      const held = keys[at];
      if (held === undefined) {
        keys[at] = key;
        hashes[at] = hash;
        this.slots[at] = value;
        this.count++;
        return;
      }
      if (hashes[at] === hash && held === key) {
        this.slots[at] = value;
        return;
      }
    }
  }

  /** Empties slot `at`. Backward shift: an entry after the hole that may move into it does, so a probe never meets a gap before its entry (no tombstones, hence no rebuilds). */
  private removeAt(at: number): void {
    const keys = this.keys;
    const slots = this.slots;
    const hashes = this.hashes;
    const mask = this.mask;
    let hole = at;
    for (let next = (hole + 1) & mask; keys[next] !== undefined; next = (next + 1) & mask) {
      const home = hashes[next]! & mask;
      // The entry at `next` stays when its home lies in the cyclic range (hole, next].
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      keys[hole] = keys[next];
      slots[hole] = slots[next];
      hashes[hole] = hashes[next]!;
      hole = next;
    }
    keys[hole] = undefined;
    slots[hole] = undefined;
    this.count--;
  }

  /** The slot holding `key`, or -1. */
  private find(key: K, hash: number): number {
    const keys = this.keys;
    const hashes = this.hashes;
    const mask = this.mask;
    for (let at = hash & mask; ; at = (at + 1) & mask) {
      const held = keys[at];
      if (held === undefined) return -1;
      if (hashes[at] === hash && held === key) return at;
    }
  }

  private grow(): void {
    const keys = this.keys;
    const slots = this.slots;
    const hashes = this.hashes;
    const size = keys.length * 2;
    this.keys = new Array<K | undefined>(size).fill(undefined);
    this.slots = new Array<V | undefined>(size).fill(undefined);
    this.hashes = new Int32Array(size);
    this.mask = size - 1;
    this.count = 0;
    for (let at = 0; at < keys.length; at++) if (keys[at] !== undefined) this.place(keys[at]!, hashes[at]!, slots[at]!);
    // The old arrays are emptied: in the old generation they would otherwise keep what they held alive
    // through scavenges, the very chain this table avoids.
    keys.fill(undefined);
    slots.fill(undefined);
  }
}

/** What readers of a table may use. */
export type ReadonlyKeyTable<K extends number | string, V> = Pick<KeyTable<K, V>, 'size' | 'get' | 'has' | 'values'>;
