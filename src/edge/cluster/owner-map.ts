/**
 * Every edge's last-known owner of every name (docs/cluster.md, "The owner map"), so a public request on
 * an edge that does not hold the tunnel finds an edge that does without asking Redis, and still finds one
 * while Redis is down. Kept current by what Redis pushes (the lease scripts publish each attachment,
 * release and renewal round: src/store/redis-leases.ts) and by a snapshot after each (re)subscription.
 *
 * A name has an owner (the client that holds it, ordered by the grant's fence: a new owner outranks every
 * fact about an older one) and the edges attached for it (one per edge, each ordered by its own fence:
 * a release beats the attachment of the same fence, so a late message or a snapshot read before a change
 * never undoes a newer fact). A client on several edges has several attachments; a lookup picks one of
 * them, in turn, and avoids an edge that lately refused the hop's connection.
 *
 * This is a routing hint, not a right to serve: the edge it names decides for itself, by its own lease
 * validity (registry.ts), and answers "not mine" or "unavailable" when it cannot serve. So the map may
 * keep pointing at an edge past its validity while Redis cannot say otherwise.
 */
import type { StoredPolicy } from '../../protocol/policy.js';
import type { Attachment, LeaseOwner } from '../../store/redis-leases.js';
import type { ClusterPeer, TunnelLease } from './types.js';

interface KnownAttachment {
  peer: ClusterPeer;
  fence: number;
  /** Valid until then (monotonic ms) by its grant or the snapshot; its edge's renewals extend it. */
  validUntil: number;
  /** Released at `fence`: kept until `validUntil`, long enough to outrank a snapshot read before the release. */
  released: boolean;
  /** When this map learnt it (`OwnerMap.factCount` then): a Redis answer read before then cannot undo it. */
  learnt: number;
}

interface KnownName {
  /** The owner's tunnel, null while only releases of the name are known. */
  owner: LeaseOwner | null;
  /** The owner's one-run policy, parsed once from the lease (a forwarding edge applies it before its hop). */
  policy: StoredPolicy | undefined;
  /** The grant's fence (0 while the owner is unknown). */
  ownerFence: number;
  /** By node id. */
  attachments: Map<string, KnownAttachment>;
  /** An edge named was found wrong (it answered "not mine"): ask Redis again. */
  doubted: boolean;
  /** When Redis was last asked about this name because of a doubt (monotonic ms), 0 if never. */
  checkedAt: number;
}

interface KnownNode extends ClusterPeer {
  /** Its attachments are valid until then (monotonic ms) by its last renewal round. */
  validUntil: number;
}

/** A doubted owner is asked of Redis at most this often per name. */
const RECHECK_EVERY_MS = 1_000;
/** An edge whose hop connection was refused is tried last for this long. */
export const SUSPECT_MS = 2_000;

export class OwnerMap {
  private readonly names = new Map<string, KnownName>();
  private readonly nodes = new Map<string, KnownNode>();
  /** Edges that lately refused a hop connection: until when (monotonic ms). */
  private readonly suspects = new Map<string, number>();
  /** Turns the choice among several attachments, so forwarded requests spread over them. */
  private turn = 0;
  /** Attachments and releases learnt so far: a mark of when, for `checked`. */
  private facts = 0;

  constructor(
    private readonly leaseTtlMs: number,
    private readonly clock: () => number,
  ) {}

  get size(): number {
    return this.names.size;
  }

  /** A mark of what the map knows now: take it before reading Redis, and give it to `checked` with the answer. */
  get factCount(): number {
    return this.facts;
  }

  /** `attachment` of the lease `owner` was made (pushed, or read from Redis): valid for `remainingMs` from now. */
  granted(owner: LeaseOwner, attachment: Pick<Attachment, 'nodeId' | 'advertise' | 'boot' | 'fence'>, remainingMs: number): void {
    let known = this.names.get(owner.subdomain);
    if (known !== undefined && known.ownerFence > owner.fence) return;
    if (known === undefined || owner.fence > known.ownerFence) {
      // A new owner: what was known of older ones goes, but releases that may be of this owner's attachments stay.
      const attachments = new Map<string, KnownAttachment>();
      if (known !== undefined) for (const [nodeId, old] of known.attachments) if (old.released && old.fence >= owner.fence) attachments.set(nodeId, old);
      known = { owner, policy: storedPolicyOf(owner.policy).policy, ownerFence: owner.fence, attachments, doubted: false, checkedAt: known?.checkedAt ?? 0 };
      this.names.set(owner.subdomain, known);
    } else if (known.owner === null) {
      known.owner = owner;
      known.policy = storedPolicyOf(owner.policy).policy;
    }
    const now = this.clock();
    const old = known.attachments.get(attachment.nodeId);
    if (old !== undefined && (old.fence > attachment.fence || (old.fence === attachment.fence && old.released))) return;
    known.doubted = false;
    if (old !== undefined && old.fence === attachment.fence) {
      old.validUntil = Math.max(old.validUntil, now + remainingMs);
      return;
    }
    known.attachments.set(attachment.nodeId, {
      peer: { nodeId: attachment.nodeId, advertise: attachment.advertise, boot: attachment.boot },
      fence: attachment.fence,
      validUntil: now + remainingMs,
      released: false,
      learnt: ++this.facts,
    });
  }

  /** The attachment `fence` of `nodeId` to `subdomain` ended. */
  released(subdomain: string, nodeId: string, fence: number): void {
    let known = this.names.get(subdomain);
    if (known === undefined) {
      known = { owner: null, policy: undefined, ownerFence: 0, attachments: new Map(), doubted: false, checkedAt: 0 };
      this.names.set(subdomain, known);
    }
    const old = known.attachments.get(nodeId);
    if (old !== undefined && old.fence > fence) return;
    known.attachments.set(nodeId, { peer: old?.peer ?? { nodeId, advertise: '', boot: '' }, fence, validUntil: this.clock() + this.leaseTtlMs, released: true, learnt: ++this.facts });
  }

  /** `node` renewed every attachment it still has: they are valid `ttlMs` from now. */
  renewed(node: ClusterPeer, ttlMs: number): void {
    this.nodes.set(node.nodeId, { nodeId: node.nodeId, advertise: node.advertise, boot: node.boot, validUntil: this.clock() + ttlMs });
  }

  /** The hop could not connect to `nodeId`: other attachments are preferred for a while. */
  suspect(nodeId: string): void {
    this.suspects.set(nodeId, this.clock() + SUSPECT_MS);
  }

  /**
   * An edge serving `subdomain`: one of its attachments, not `selfNodeId`'s when there is another, taken
   * in turn, the ones that lately refused a connection last; null when it has none (released, never
   * granted, or lapsed while this edge was in step with Redis for a whole lease period: Redis let it go
   * too), or undefined when this edge cannot know (released or unknown while out of step with Redis).
   * `inStepFor` is how long the map has been in step with Redis, -1 while it is not.
   */
  lookup(subdomain: string, inStepFor: number, selfNodeId = ''): TunnelLease | null | undefined {
    const known = this.names.get(subdomain);
    const inStep = inStepFor >= 0;
    if (known === undefined || known.owner === null) return inStep ? null : undefined;
    const now = this.clock();
    let candidates: KnownAttachment[] = [];
    let lapsed: KnownAttachment[] = [];
    for (const attachment of known.attachments.values()) {
      if (attachment.released) continue;
      if (this.validUntil(attachment) > now) candidates.push(attachment);
      else lapsed.push(attachment);
    }
    if (candidates.length === 0) {
      if (lapsed.length === 0) return inStep ? null : undefined;
      // Lapsed: while Redis is away (or just back, its edges renewing or claiming again) they decide.
      if (inStep && inStepFor >= this.leaseTtlMs) {
        this.names.delete(subdomain);
        return null;
      }
      candidates = lapsed;
      lapsed = [];
    }
    const chosen = this.choose(candidates, selfNodeId, now);
    const lease: TunnelLease = { ...tunnelInfo(known.owner), ...chosen.peer, fence: chosen.fence };
    if (known.policy !== undefined) lease.policy = known.policy;
    return lease;
  }

  private choose(candidates: KnownAttachment[], selfNodeId: string, now: number): KnownAttachment {
    if (candidates.length === 1) return candidates[0]!;
    const others = candidates.filter((attachment) => attachment.peer.nodeId !== selfNodeId);
    if (others.length === 0) return candidates[0]!;
    const trusted = others.filter((attachment) => (this.suspects.get(attachment.peer.nodeId) ?? 0) <= now);
    const pool = trusted.length > 0 ? trusted : others;
    this.turn = (this.turn + 1) % 0x40000000;
    return pool[this.turn % pool.length]!;
  }

  /** The edges named for `subdomain` were found wrong: Redis is asked again (see `needsCheck`). */
  doubt(subdomain: string): void {
    const known = this.names.get(subdomain);
    if (known !== undefined) known.doubted = true;
  }

  /** True when `subdomain`'s owner is doubted and Redis may be asked about it now (marks it asked). */
  needsCheck(subdomain: string): boolean {
    const known = this.names.get(subdomain);
    if (known === undefined || !known.doubted) return false;
    const now = this.clock();
    if (known.checkedAt !== 0 && now - known.checkedAt < RECHECK_EVERY_MS) return false;
    known.checkedAt = now;
    return true;
  }

  /**
   * What Redis answered about a doubted name: its live owner with each attachment's remaining time, or
   * none (null). Attachments it no longer has are taken as released, unless this map learnt them after
   * `readFrom` (its `factCount` when the read began): an answer read before a grant cannot undo it (an
   * edge that granted a name while a read of it was on its way took its own attachment as released).
   */
  checked(subdomain: string, live: { owner: LeaseOwner; attachments: { attachment: Attachment; remainingMs: number }[] } | null, readFrom: number): void {
    const known = this.names.get(subdomain);
    if (known !== undefined) known.doubted = false;
    if (live === null) {
      if (known !== undefined) {
        for (const [nodeId, attachment] of known.attachments) if (!attachment.released && attachment.learnt <= readFrom) this.released(subdomain, nodeId, attachment.fence);
      }
      return;
    }
    for (const { attachment, remainingMs } of live.attachments) this.granted(live.owner, attachment, remainingMs);
    const now = this.names.get(subdomain);
    if (now === undefined || now.ownerFence !== live.owner.fence) return;
    const present = new Set(live.attachments.map(({ attachment }) => attachment.nodeId));
    for (const [nodeId, attachment] of now.attachments) {
      if (!attachment.released && !present.has(nodeId) && attachment.learnt <= readFrom) this.released(subdomain, nodeId, attachment.fence);
    }
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

  /** Drops releases kept long enough and attachments lapsed for a lease period while in step with Redis. */
  sweep(inStepFor: number): void {
    const now = this.clock();
    const settled = inStepFor >= this.leaseTtlMs;
    for (const [subdomain, known] of this.names) {
      for (const [nodeId, attachment] of known.attachments) {
        if (attachment.released ? attachment.validUntil <= now : settled && this.validUntil(attachment) + this.leaseTtlMs <= now) known.attachments.delete(nodeId);
      }
      if (known.attachments.size === 0) this.names.delete(subdomain);
    }
    for (const [nodeId, node] of this.nodes) if (node.validUntil + 2 * this.leaseTtlMs <= now) this.nodes.delete(nodeId);
    for (const [nodeId, until] of this.suspects) if (until <= now) this.suspects.delete(nodeId);
  }

  private validUntil(attachment: KnownAttachment): number {
    const node = this.nodes.get(attachment.peer.nodeId);
    return node !== undefined && node.boot === attachment.peer.boot ? Math.max(attachment.validUntil, node.validUntil) : attachment.validUntil;
  }
}

function tunnelInfo(owner: LeaseOwner): Omit<TunnelLease, 'nodeId' | 'advertise' | 'boot' | 'fence'> {
  return { subdomain: owner.subdomain, accountId: owner.accountId, tokenId: owner.tokenId, port: owner.port, startedAt: owner.startedAt, publicUrl: owner.publicUrl };
}

/** A lease's one-run policy: its JSON parsed (written by an edge's claim), nothing when there is none or it does not parse. */
export function storedPolicyOf(json: string | undefined): { policy?: StoredPolicy } {
  if (json === undefined || json === '') return {};
  try {
    return { policy: JSON.parse(json) as StoredPolicy };
  } catch {
    return {};
  }
}
