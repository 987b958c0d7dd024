/**
 * Rotating the edge's secret key (`burrow admin rotate-secret-key`, docs/policies.md "Rotating the
 * key"): put a new current key first in the key file, re-seal every stored policy's secrets under it,
 * then drop the old keys. Safe while edges run: an edge seals under whatever key is first in its file
 * (it notices the file change), opens values under any key its file holds (re-reading the file when it
 * meets an unknown id), and each re-sealed policy is written only if nobody changed it meanwhile.
 */
import type { StoredPolicy } from '../protocol/policy.js';
import type { AccountStore } from './account-store.js';
import { SecretBox } from './secret-box.js';
import { resealPolicy, sealedSecretsOf } from './stored-policy.js';

/** Attempts per name when the API changes its policy while it is being re-sealed. */
const ATTEMPTS = 5;

export interface ResealReport {
  /** Names whose policy was written again. */
  names: string[];
  /** Secrets sealed again. */
  secrets: number;
}

/** Every stored policy, by name (accounts in e-mail order, then their names). */
async function* storedPolicies(store: AccountStore): AsyncGenerator<{ accountId: string; subdomain: string; policy: StoredPolicy }> {
  for (const account of await store.listAccounts()) {
    for (const reservation of await store.listReservations(account.id)) {
      if (reservation.policy !== undefined) yield { accountId: account.id, subdomain: reservation.subdomain, policy: reservation.policy };
    }
  }
}

function underOldKeys(policy: StoredPolicy, box: SecretBox): number {
  return sealedSecretsOf(policy).filter((sealed) => SecretBox.keyIdOf(sealed) !== box.currentKeyId).length;
}

/**
 * Seals again, under the box's current key, every stored secret sealed under another key. Throws (naming
 * the reservation) when a secret opens with no key of the file: dropping keys would then lose it.
 */
export async function resealStoredPolicies(store: AccountStore, box: SecretBox): Promise<ResealReport> {
  const report: ResealReport = { names: [], secrets: 0 };
  for await (const found of storedPolicies(store)) {
    let { policy } = found;
    for (let attempt = 1; underOldKeys(policy, box) > 0; attempt++) {
      const count = underOldKeys(policy, box);
      const written = await store.setPolicy(found.accountId, found.subdomain, resealPolicy(policy, box, found.subdomain), policy);
      if (written !== undefined) {
        report.names.push(found.subdomain);
        report.secrets += count;
        break;
      }
      // Changed (or released) meanwhile: read it again.
      const current = await store.getReservation(found.subdomain);
      if (current?.policy === undefined || current.accountId !== found.accountId) break;
      if (attempt === ATTEMPTS) throw new Error(`the policy of "${found.subdomain}" kept changing while it was being re-sealed; run the rotation again`);
      policy = current.policy;
    }
  }
  return report;
}

/** Names whose stored policy still has a secret sealed under a key other than the current one. */
export async function namesUnderOldKeys(store: AccountStore, box: SecretBox): Promise<string[]> {
  const names: string[] = [];
  for await (const found of storedPolicies(store)) if (underOldKeys(found.policy, box) > 0) names.push(found.subdomain);
  return names;
}
