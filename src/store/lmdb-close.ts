/**
 * Closing an LMDB environment without a read on a dead transaction.
 *
 * lmdb-js 3.5.6's `close()` aborts the environment's read transaction at once, then waits for the writes
 * still queued before it shuts the environment. A read made while it waits, by the continuation of one
 * of those writes, gets the aborted transaction: the native read fails ("No current read transaction
 * available"), and the timer lmdb-js set to reset that transaction throws "Attempt to reset an invalid
 * read txn" from `setTimeout`, an uncaught exception that ends the process. CI met it once in an edge's
 * shutdown (test/edge/offline-modes.test.ts). So the queued writes commit first, their continuations
 * run while reads still work, and only then does `close()` start; a read after that fails cleanly
 * ("Can not renew a transaction from a closed database"). test/store/lmdb-close.test.ts reproduces both.
 */
import type { RootDatabase } from 'lmdb';

/** Continuations may queue more writes: wait for those too, a bounded number of times. */
const SETTLE_ROUNDS = 4;

export async function closeAfterWrites(root: RootDatabase): Promise<void> {
  for (let round = 0; round < SETTLE_ROUNDS; round++) {
    // A failed commit is its writer's to report; the close goes on.
    await Promise.resolve(root.committed).catch(() => undefined);
    // What is chained on those commits (promise continuations, however long the chain) runs before the
    // next check; work that waits on I/O or a timer is its owner's to stop before the store closes.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await root.close();
}
