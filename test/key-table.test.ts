import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KeyTable } from '../src/key-table.js';

/** A small deterministic generator, so a failure replays. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** The table holds exactly what the Map holds: the same value (the very one) under every key, and no other. */
function sameAsMap<K extends number | string, V>(table: KeyTable<K, V>, map: Map<K, V>): void {
  assert.equal(table.size, map.size);
  const values = table.values();
  assert.equal(values.length, map.size);
  const held = new Set(map.values());
  for (const value of values) assert.ok(held.has(value), 'values() lists only what is held');
  for (const [key, value] of map) assert.equal(table.get(key), value);
}

test('number keys: every operation agrees with a Map, through growth, collisions and long-lived entries', () => {
  const next = random(7);
  const table = new KeyTable<number, string>();
  const map = new Map<number, string>();
  let id = 1;
  for (let step = 0; step < 40_000; step++) {
    const roll = next();
    if (roll < 0.5 || map.size === 0) {
      // Sequential ids as a connection allocates them, and now and then one far away that lands on the
      // same home slot as a live one (ids that differ by a multiple of the capacity).
      const key = next() < 0.9 ? id++ : id + 1024 * Math.floor(next() * 8);
      table.set(key, `v${key}`);
      map.set(key, `v${key}`);
    } else {
      // Mostly the oldest entries end (requests finish in order), sometimes any of them.
      const keys = [...map.keys()];
      const key = next() < 0.7 ? keys[0]! : keys[Math.floor(next() * keys.length)]!;
      assert.equal(table.delete(key), true);
      map.delete(key);
      assert.equal(table.has(key), false);
      assert.equal(table.delete(key), false);
    }
    if (step % 997 === 0) sameAsMap(table, map);
  }
  sameAsMap(table, map);
});

test('string keys: every operation agrees with a Map', () => {
  const next = random(11);
  const table = new KeyTable<string, string>();
  const map = new Map<string, string>();
  for (let step = 0; step < 20_000; step++) {
    const key = `req_${Math.floor(next() * 3_000).toString(16).padStart(8, '0')}`;
    if (next() < 0.55) {
      table.set(key, `${key}:${step}`);
      map.set(key, `${key}:${step}`);
    } else {
      assert.equal(table.delete(key), map.delete(key));
    }
    if (step % 499 === 0) sameAsMap(table, map);
  }
  sameAsMap(table, map);
});

test('a deletion inside a cluster that wraps past the end of the array leaves every other key findable', () => {
  const table = new KeyTable<number, string>();
  // Capacity 16 (mask 15): homes 14 and 15 and then keys that wrap to slots 0, 1, 2.
  const keys = [14, 15, 30, 31, 46, 2];
  for (const key of keys) table.set(key, `v${key}`);
  for (const gone of keys) {
    const copy = new KeyTable<number, string>();
    for (const key of keys) copy.set(key, `v${key}`);
    assert.equal(copy.delete(gone), true);
    for (const key of keys) assert.equal(copy.get(key), key === gone ? undefined : `v${key}`, `after deleting ${gone}, key ${key}`);
    assert.equal(copy.size, keys.length - 1);
  }
});

test('values() is a copy: deleting while walking it visits every entry once', () => {
  const table = new KeyTable<number, string>();
  for (let key = 1; key <= 100; key++) table.set(key, `v${key}`);
  const seen: string[] = [];
  for (const value of table.values()) {
    seen.push(value);
    table.delete(Number(value.slice(1)));
  }
  assert.equal(seen.length, 100);
  assert.equal(new Set(seen).size, 100);
  assert.equal(table.size, 0);
});

test('number keys outside a stream id are refused; 0 and 2^32 - 1 are kept', () => {
  const table = new KeyTable<number, string>();
  for (const bad of [-1, 1.5, 2 ** 32, Number.NaN]) assert.throws(() => table.set(bad, 'x'), RangeError);
  table.set(0, 'zero');
  table.set(2 ** 32 - 1, 'top');
  assert.equal(table.get(0), 'zero');
  assert.equal(table.get(2 ** 32 - 1), 'top');
  table.clear();
  assert.equal(table.size, 0);
  assert.equal(table.get(0), undefined);
});

test('churn at a steady size keeps the same arrays (no rebuild leaves a dead table behind)', () => {
  const table = new KeyTable<number, { id: number }>();
  let id = 1;
  for (; id <= 100; id++) table.set(id, { id });
  const arrays = table as unknown as { keys: unknown[]; slots: unknown[] };
  const keys = arrays.keys;
  const slots = arrays.slots;
  // 100,000 requests through a connection holding ~100 at a time: a Map rebuilt its table hundreds of times.
  for (let step = 0; step < 100_000; step++, id++) {
    table.delete(id - 100);
    table.set(id, { id });
  }
  assert.equal(table.size, 100);
  assert.equal(arrays.keys, keys);
  assert.equal(arrays.slots, slots);
  // What a deletion removed is not kept anywhere in the arrays.
  assert.equal(slots.filter((slot) => slot !== undefined).length, 100);
});

test('deleteIf deletes only the entry that holds the given value, in one probe, and the rest stay findable', () => {
  const next = random(23);
  const table = new KeyTable<string, { key: string }>();
  const map = new Map<string, { key: string }>();
  for (let step = 0; step < 20_000; step++) {
    const key = `req_${Math.floor(next() * 2_000).toString(36)}`;
    const roll = next();
    if (roll < 0.5) {
      const value = { key };
      table.set(key, value);
      map.set(key, value);
    } else {
      // Half the time with the value held, half with an equal-looking other object.
      const held = map.get(key);
      const offered = held !== undefined && roll < 0.75 ? held : { key };
      const deleted = table.deleteIf(key, offered);
      assert.equal(deleted, held !== undefined && offered === held);
      if (deleted) map.delete(key);
    }
    if (step % 997 === 0) sameAsMap(table, map);
  }
  sameAsMap(table, map);
});

test('number keys on both sides of 2^31 (hashed as int32) agree with a Map', () => {
  const table = new KeyTable<number, string>();
  const map = new Map<number, string>();
  const keys: number[] = [];
  for (let i = 0; i < 40; i++) keys.push(2 ** 31 - 20 + i, 2 ** 32 - 1 - i, i);
  for (const key of keys) {
    table.set(key, `v${key}`);
    map.set(key, `v${key}`);
  }
  for (let i = 0; i < keys.length; i += 3) {
    assert.equal(table.delete(keys[i]!), true);
    map.delete(keys[i]!);
  }
  sameAsMap(table, map);
  for (const key of keys) assert.equal(table.get(key), map.get(key), `key ${key}`);
});

test('the ...Hashed methods, given KeyTable.hash(key), act as their plain forms', () => {
  const next = random(31);
  const table = new KeyTable<string, { key: string }>();
  const map = new Map<string, { key: string }>();
  for (let step = 0; step < 20_000; step++) {
    const key = `req_${Math.floor(next() * 1_500).toString(36)}`;
    const hash = KeyTable.hash(key);
    assert.equal(hash, KeyTable.hash(`${key}`), 'the same text hashes the same');
    if (next() < 0.5) {
      const value = { key };
      table.setHashed(key, hash, value);
      map.set(key, value);
    } else {
      const held = map.get(key);
      assert.equal(table.getHashed(key, hash), held);
      if (held !== undefined) assert.equal(table.deleteIfHashed(key, hash, held), true);
      map.delete(key);
      assert.equal(table.get(key), undefined);
    }
    if (step % 997 === 0) sameAsMap(table, map);
  }
  sameAsMap(table, map);
  assert.equal(KeyTable.hash(7), 7, 'a number key is its own hash');
});
