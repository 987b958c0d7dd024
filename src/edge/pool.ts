/**
 * An endpoint pool (README.md, "Pools"; docs/protocol.md section 1, `pool=1`): several clients of one account serving one name, each a
 * tunnel (TunnelSession) connected with `--pool`. Each new stream goes to the member with the fewest
 * open streams; among members with equally few the choice rotates, so an idle pool is served round robin
 * and a member slowed down (its streams pile up) gets fewer new ones. A member that leaves (its client's
 * GOAWAY) is out of the choice at once while its own streams finish; the pool lives until its last
 * member has left.
 */
import type { TunnelSession } from './session.js';

/** Members a pool takes at most: the choice scans them all for every stream. */
export const MAX_POOL_MEMBERS = 32;

export class TunnelPool {
  readonly members: TunnelSession[] = [];
  /** Where the next scan starts: moves one member on with every choice. */
  private start = 0;

  constructor(readonly name: string) {}

  get size(): number {
    return this.members.length;
  }

  add(member: TunnelSession): void {
    if (this.members.includes(member)) return;
    this.members.push(member);
    member.pool = this;
    member.fastHttp = false;
  }

  /** Takes `member` out of the choice; true when none is left. */
  remove(member: TunnelSession): boolean {
    const at = this.members.indexOf(member);
    if (at !== -1) this.members.splice(at, 1);
    if (member.pool === this) leavePool(member);
    return this.members.length === 0;
  }

  /** The member a new stream goes to: the fewest open streams, ties taken in turn. */
  pick(): TunnelSession | undefined {
    const members = this.members;
    const count = members.length;
    if (count === 0) return undefined;
    const start = this.start < count ? this.start : 0;
    this.start = start + 1;
    let best = members[start]!;
    for (let i = 1; i < count; i++) {
      const member = members[(start + i) % count]!;
      if (member.openStreams < best.openStreams) best = member;
    }
    return best;
  }
}

/** `member` serves alone again (its pool dissolved, or it was taken out of it). */
export function leavePool(member: TunnelSession): void {
  member.pool = null;
  member.fastHttp = member.kind === 'http';
}
