/** The shared AccountStore suite (account-store.suite.ts) on the embedded LMDB Store, in a temp dir. */
import { Store } from '../../src/store/store.js';
import { tempDirs } from '../helpers.js';
import { accountStoreSuite } from './account-store.suite.js';

const freshDir = tempDirs('burrow-account-store-');

accountStoreSuite('lmdb', {
  async open() {
    const store = Store.open(freshDir());
    return { store, close: () => store.close() };
  },
  // One edge owns a data directory (src/store/data-lock.ts): its counter's in-memory totals are
  // authoritative, so a second counter on the same store would not see the first's counts (nor should it).
  sharedUsageCounters: false,
  // Limiters are in memory per edge, one edge per data directory.
  sharedLimiterWindows: false,
  settle: (store) => (store as Store).root.committed.then(() => undefined),
});
