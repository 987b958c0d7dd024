/**
 * Every edge's last-known owner of every name (docs/cluster.md, "Redis down"), so a public request on an
 * edge that does not hold the tunnel finds its owner without asking Redis, and still finds it while
 * Redis is down. Kept current by what Redis pushes (the lease scripts publish each grant, release and
 * renewal round: src/store/redis-leases.ts) and by a snapshot after each (re)subscription; a name's
 * fence orders everything it learns, so a late message or a snapshot read before a change never
 * undoes a newer fact (a release beats the grant of the same fence).
 *
 * This is a routing hint, not a right to serve: the edge it names decides for itself, by its own lease
 * validity (registry.ts), and answers "not mine" or "unavailable" when it cannot serve. So the map may
 * keep pointing at an owner past its validity while Redis cannot say otherwise.
 */
import type { ClusterPeer, TunnelLease } from './types.js';

interface KnownOwner {
  /** null: released (held for its account's grace period, or dropped) at `fence`. */
  lease: TunnelLease | null;
  fence: number;
  /** Valid until then (monotonic ms) by its grant or the snapshot; the owner's renewals extend it. */
  validUntil: number;
  /** The owner was found wrong (it answered "not mine", or could not be reached): ask Redis again. */
  doubted: boolean;
  /** When Redis was last asked about this name because of a doubt (monotonic ms), 0 if never. */
  checkedAt: number;
}

interface KnownNode extends ClusterPeer {
  /** Its leases are valid until then (monotonic ms) by its last renewal round. */
  validUntil: number;
}

/** A doubted owner is asked of Redis at most this often per name. */
const RECHECK_EVERY_MS = 1_000;

export class OwnerMap {
  private readonly owners = new Map<string, KnownOwner>();
  private readonly nodes = new Map<string, KnownNode>();

  constructor(
    private readonly leaseTtlMs: number,
    private readonly clock: () => number,
  ) {}

  get size(): number {
    return this.owners.size;
  }

  /** `lease` was granted (pushed, or read from Redis): valid for `remainingMs` from now. */
  granted(lease: TunnelLease, remainingMs: number): void {
    const known = this.owners.get(lease.subdomain);
    if (known !== undefined && (known.fence > lease.fence || (known.fence === lease.fence && known.lease === null))) return;
    const validUntil = this.clock() + remainingMs;
    if (known !== undefined && known.fence === lease.fence && known.lease !== null) {
      known.validUntil = Math.max(known.validUntil, validUntil);
      known.doubted = false;
      return;
    }
    this.owners.set(lease.subdomain, { lease, fence: lease.fence, validUntil, doubted: false, checkedAt: known?.checkedAt ?? 0 });
  }

  /** The grant `fence` of `subdomain` ended. */
  released(subdomain: string, fence: number): void {
    const known = this.owners.get(subdomain);
    if (known !== undefined && known.fence > fence) return;
    // Kept a lease period, long enough to outrank a snapshot read before the release.
    this.owners.set(subdomain, { lease: null, fence, validUntil: this.clock() + this.leaseTtlMs, doubted: false, checkedAt: known?.checkedAt ?? 0 });
  }

  /** `node` renewed every lease it still holds: they are valid `ttlMs` from now. */
  renewed(node: ClusterPeer, ttlMs: number): void {
    this.nodes.set(node.nodeId, { nodeId: node.nodeId, advertise: node.advertise, boot: node.boot, validUntil: this.clock() + ttlMs });
  }

  /**
   * The last-known owner of `subdomain`: its lease, null when it has none (released, never granted, or
   * lapsed while this edge was in step with Redis for a whole lease period: Redis let it go too), or
   * undefined when this edge cannot know (released or unknown while out of step with Redis).
   * `inStepFor` is how long the map has been in step with Redis, -1 while it is not.
   */
  lookup(subdomain: string, inStepFor: number): TunnelLease | null | undefined {
    const known = this.owners.get(subdomain);
    const inStep = inStepFor >= 0;
    if (known === undefined || known.lease === null) return inStep ? null : undefined;
    if (this.validUntil(known) > this.clock()) return known.lease;
    // Lapsed: while Redis is away (or just back, its owner renewing or claiming again) the owner decides.
    if (!inStep || inStepFor < this.leaseTtlMs) return known.lease;
    this.owners.delete(subdomain);
    return null;
  }

  /** The owner of `subdomain` was found wrong: Redis is asked again (see `needsCheck`). */
  doubt(subdomain: string): void {
    const known = this.owners.get(subdomain);
    if (known !== undefined) known.doubted = true;
  }

  /** True when `subdomain`'s owner is doubted and Redis may be asked about it now (marks it asked). */
  needsCheck(subdomain: string): boolean {
    const known = this.owners.get(subdomain);
    if (known === undefined || !known.doubted) return false;
    const now = this.clock();
    if (known.checkedAt !== 0 && now - known.checkedAt < RECHECK_EVERY_MS) return false;
    known.checkedAt = now;
    return true;
  }

  /** What Redis answered about a doubted name: its live lease and remaining time, or none (null). */
  checked(subdomain: string, live: { lease: TunnelLease; remainingMs: number } | null): void {
    const known = this.owners.get(subdomain);
    if (live !== null) {
      if (known !== undefined && known.fence <= live.lease.fence) known.doubted = false;
      this.granted(live.lease, live.remainingMs);
      return;
    }
    if (known !== undefined) this.released(subdomain, known.fence);
  }

  /** The other edges that renewed within the last lease period: whom to ask when this edge loses Redis. */
  peers(selfNodeId: string): ClusterPeer[] {
    const since = this.clock() - this.leaseTtlMs;
    const peers: ClusterPeer[] = [];
    for (const node of this.nodes.values()) {
      if (node.nodeId !== selfNodeId && node.validUntil > since) peers.push({ nodeId: node.nodeId, advertise: node.advertise, boot: node.boot });
    }
    return peers;
  }

  /** Drops releases kept long enough and owners lapsed for a lease period while in step with Redis. */
  sweep(inStepFor: number): void {
    const now = this.clock();
    const settled = inStepFor >= this.leaseTtlMs;
    for (const [subdomain, known] of this.owners) {
      if (known.lease === null ? known.validUntil <= now : settled && this.validUntil(known) + this.leaseTtlMs <= now) this.owners.delete(subdomain);
    }
    for (const [nodeId, node] of this.nodes) if (node.validUntil + 2 * this.leaseTtlMs <= now) this.nodes.delete(nodeId);
  }

  private validUntil(known: KnownOwner): number {
    const lease = known.lease!;
    const node = this.nodes.get(lease.nodeId);
    return node !== undefined && node.boot === lease.boot ? Math.max(known.validUntil, node.validUntil) : known.validUntil;
  }
}
