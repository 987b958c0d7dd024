/**
 * The compiled policies of the edge's tunnels (docs/policies.md, "Where each rule runs"): each name's
 * policy is compiled once per version of it and kept, so a reconnect, the offline path and a forwarding
 * edge of a cluster use one compiled object per name (its rate windows and verified-password cache
 * survive a reconnect). A version is the policy's stored JSON: a changed policy (a sealed secret is
 * sealed afresh, a password hashed afresh) never compares equal to the old one.
 *
 * Where a policy comes from: a live session holds its own (`TunnelSession.policy`, compiled at connect
 * and again when the reservation's policy changes); a name without a session here reads its reservation
 * (one edge: the offline path, from LMDB), or, on a forwarding edge of a cluster, its owner's lease
 * (a one-run policy travels in it) and the shared reservation, cached per name until a change is
 * pushed through Redis (`forgetRemote`) or `REMOTE_TTL_MS` passes.
 */
import type { StoredPolicy } from '../../protocol/policy.js';
import type { SecretBox } from '../../store/secret-box.js';
import { CompiledPolicy, UnavailablePolicy, type CompileOptions, type TunnelPolicy } from './decide.js';

/** Names whose compiled policy is kept; past it the cache starts again (live sessions keep theirs). */
const CACHED_NAMES = 4096;
/** How long a forwarding edge trusts what it read about a name it does not hold, without a pushed change. */
export const REMOTE_TTL_MS = 60_000;

interface Compiled {
  version: string;
  policy: TunnelPolicy;
}

interface Remote {
  policy: TunnelPolicy | null;
  until: number;
}

export class TunnelPolicies {
  private readonly compiled = new Map<string, Compiled>();
  private readonly remote = new Map<string, Remote>();
  private readonly loading = new Map<string, Promise<TunnelPolicy | null>>();

  constructor(
    private readonly box: SecretBox,
    private readonly options: Omit<CompileOptions, 'realm'> = {},
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * The compiled form of `stored` (null: no policy). A policy that cannot be compiled here (a secret
   * sealed under a key this edge lacks) is not kept: the key file may gain the key (a rotation copied
   * to this edge), and every request meanwhile is refused 503.
   */
  of(subdomain: string, stored: StoredPolicy | undefined): TunnelPolicy | null {
    if (stored === undefined) return null;
    const version = JSON.stringify(stored);
    const known = this.compiled.get(subdomain);
    if (known !== undefined && known.version === version) return known.policy;
    const policy = CompiledPolicy.compile(stored, this.box, { ...this.options, realm: subdomain });
    if (policy instanceof UnavailablePolicy) return policy;
    if (this.compiled.size >= CACHED_NAMES) this.compiled.clear();
    this.compiled.set(subdomain, { version, policy });
    return policy;
  }

  /**
   * A forwarding edge's policy for a name held by another edge: known (cached), or loaded by `load`
   * (which reads the owner's lease and the reservation) once for all requests waiting for it.
   */
  ofRemote(subdomain: string, load: () => Promise<StoredPolicy | undefined | null>): TunnelPolicy | null | Promise<TunnelPolicy | null> {
    const known = this.remote.get(subdomain);
    if (known !== undefined && known.until > this.clock()) return known.policy;
    let loading = this.loading.get(subdomain);
    if (loading === undefined) {
      loading = load()
        .then((stored) => {
          // null: no edge holds the name (the request is answered 404 by the hop): nothing to keep.
          if (stored === null) return null;
          const policy = this.of(subdomain, stored);
          if (!(policy instanceof UnavailablePolicy)) {
            if (this.remote.size >= CACHED_NAMES) this.remote.clear();
            this.remote.set(subdomain, { policy, until: this.clock() + REMOTE_TTL_MS });
          }
          return policy;
        })
        .finally(() => this.loading.delete(subdomain));
      this.loading.set(subdomain, loading);
    }
    return loading;
  }

  /** A name's policy or owner changed (pushed through Redis): what a forwarding edge read is read again. */
  forgetRemote(subdomain: string | null): void {
    if (subdomain === null) this.remote.clear();
    else this.remote.delete(subdomain);
  }

  /** Drops finished rate-limit windows of every kept policy (the edge's coarse timer). */
  sweep(): void {
    for (const { policy } of this.compiled.values()) policy.sweep();
  }
}
