/**
 * The webhook verifiers of reserved names' stored policies (`verify_webhook`), opened and built once per
 * policy version, for the offline queue: in `queue` mode only verified events are held (issue 26), so
 * the queue verifies by itself while no tunnel is connected. The public listener compiles whole
 * policies (decide.ts) once it calls them; this covers only what the queue needs.
 */
import type { StoredPolicy } from '../../protocol/policy.js';
import type { SecretBox } from '../../store/secret-box.js';
import { webhookVerifier, type WebhookVerifier } from './webhooks.js';

/** Names whose verifiers are kept; past it the cache starts again (names are few; released ones linger until then). */
const CACHED_NAMES = 4096;

/** Why a stored policy's verifiers cannot be built on this edge: the tunnel then fails closed (503 POLICY_UNAVAILABLE). */
export class VerifiersUnavailable {
  constructor(readonly reason: string) {}
}

interface Entry {
  /** The stored entries as JSON: a changed secret is sealed afresh, so any change changes it. */
  version: string;
  verifiers: readonly WebhookVerifier[] | VerifiersUnavailable;
}

export class ReservationVerifiers {
  private readonly cache = new Map<string, Entry>();

  /** `box` opens the sealed secrets; without one, a name with verify_webhook fails closed. */
  constructor(private readonly box: SecretBox | null) {}

  /** The verifiers of a reservation's policy; null when it verifies nothing. */
  of(subdomain: string, policy: StoredPolicy | undefined): readonly WebhookVerifier[] | VerifiersUnavailable | null {
    const hooks = policy?.webhooks;
    if (hooks === undefined || hooks.length === 0) {
      this.cache.delete(subdomain);
      return null;
    }
    const version = JSON.stringify(hooks);
    const cached = this.cache.get(subdomain);
    if (cached !== undefined && cached.version === version) return cached.verifiers;
    const verifiers = this.build(hooks);
    // Not kept: the key file may gain the key (a rotation copied to this edge), and the box re-reads it
    // at most once a second.
    if (verifiers instanceof VerifiersUnavailable) return verifiers;
    if (this.cache.size >= CACHED_NAMES) this.cache.clear();
    this.cache.set(subdomain, { version, verifiers });
    return verifiers;
  }

  private build(hooks: NonNullable<StoredPolicy['webhooks']>): readonly WebhookVerifier[] | VerifiersUnavailable {
    if (this.box === null) return new VerifiersUnavailable('this edge has no secret key');
    const verifiers: WebhookVerifier[] = [];
    for (const hook of hooks) {
      const secret = this.box.open(hook.secret);
      if (secret === null) return new VerifiersUnavailable(`a secret was sealed with a key that ${this.box.path} does not hold`);
      verifiers.push(webhookVerifier(hook.provider, secret, hook.header));
    }
    return verifiers;
  }
}
