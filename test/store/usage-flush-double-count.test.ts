/**
 * The billing summary counted a flush twice: `current()` added the counts being flushed to what LMDB
 * held, and in the moment between the flush's commit and the resolution of its promise LMDB already
 * held them too (seen as 29 requests instead of 15 under load).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Store } from '../../src/store/store.js';
import { UsageMeter } from '../../src/store/usage.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-usage-');

test('usage counts stay exact while a flush commits', async () => {
  const store = Store.open(freshDir());
  try {
    const meter = new UsageMeter(store.root);
    for (let round = 1; round <= 20; round++) {
      meter.count('usr_a', 10, 20);
      let settled = false;
      const flushing = meter.flush().then(() => {
        settled = true;
      });
      while (!settled) {
        assert.deepEqual(meter.current('usr_a'), { requests: round, bytesIn: round * 10, bytesOut: round * 20 });
        await new Promise((resolve) => setImmediate(resolve));
      }
      await flushing;
    }
    const reopened = new UsageMeter(store.root);
    assert.deepEqual(reopened.current('usr_a'), { requests: 20, bytesIn: 200, bytesOut: 400 });
  } finally {
    await store.close();
  }
});
