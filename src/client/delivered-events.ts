/**
 * Held webhooks this client process delivered lately (cluster mode, docs/offline.md "In cluster mode"):
 * the ids (`Burrow-Event-Id`) of events its local server answered 2xx. An edge that dies after the local
 * server answered and before it told Redis leaves the event for the next edge, which sends it again;
 * when that edge reaches this same client (it is attached to two edges), the repeat is answered from
 * here (`200`, `Burrow-Duplicate-Delivery: 1`) and never reaches the local server.
 *
 * Kept for `ttlMs` (a takeover comes within the lock's 5 s), at most `max` ids; shared by every session
 * of one tunnel. Only a tunnel on several edges of a cluster has one: a single edge's requests are not
 * looked at.
 */
export const EVENT_ID_HEADER = 'burrow-event-id';

export class DeliveredEvents {
  private readonly ids = new Map<string, number>();

  constructor(
    private readonly ttlMs = 60_000,
    private readonly max = 4_096,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  has(id: string): boolean {
    const at = this.ids.get(id);
    if (at === undefined) return false;
    if (this.clock() - at <= this.ttlMs) return true;
    this.ids.delete(id);
    return false;
  }

  add(id: string): void {
    this.ids.delete(id);
    this.ids.set(id, this.clock());
    // Oldest first (insertion order): past the cap, or past their time, they go.
    for (const [old, at] of this.ids) {
      if (this.ids.size <= this.max && this.clock() - at <= this.ttlMs) break;
      this.ids.delete(old);
    }
  }
}

/** The request's `Burrow-Event-Id`, or null. */
export function eventIdOf(fields: readonly string[]): string | null {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === EVENT_ID_HEADER.length && name.toLowerCase() === EVENT_ID_HEADER) return fields[i + 1]!;
  }
  return null;
}
