/**
 * Plans and their quotas (DESIGN.md section 4). The spec names FREE; PRO is Burrow's second plan.
 */

export interface PlanLimits {
  /** Active personal access tokens an account may hold. */
  activeTokens: number;
  /** Tunnels an account may have connected at once. */
  activeTunnels: number;
  /** Captured requests kept per tunnel subdomain: the size of its ring buffer. */
  capturedRequests: number;
  /** How long a captured request stays listable, in milliseconds. */
  retentionMs: number;
  /**
   * Bytes of captures (as stored: heads and kept bodies) an account may hold on an edge, across all its
   * tunnels' rings; past it new captures are skipped, the requests still forwarded (issue 23).
   */
  captureBytes: number;
  /** Subdomains an account may reserve permanently. */
  reservedSubdomains: number;
  /** Webhooks held per reserved subdomain while its tunnel is offline (docs/offline.md). */
  queuedEvents: number;
  /** Bytes (bodies and headers) held per reserved subdomain while its tunnel is offline. */
  queuedBytes: number;
  /** How long a held webhook waits for its tunnel before it is dropped, in milliseconds. */
  queueMaxAgeMs: number;
  /** Webhooks held across all of an account's reserved subdomains (issue 23). */
  accountQueuedEvents: number;
  /** Bytes held across all of an account's reserved subdomains (issue 23). */
  accountQueuedBytes: number;
}

export const PLAN_NAMES = ['FREE', 'PRO'] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

const HOUR = 60 * 60 * 1000;
const MIB = 1024 * 1024;

export const DEFAULT_PLANS: Readonly<Record<PlanName, PlanLimits>> = {
  FREE: { activeTokens: 5, activeTunnels: 3, capturedRequests: 1_000, retentionMs: 24 * HOUR, captureBytes: 100 * MIB, reservedSubdomains: 3, queuedEvents: 1_000, queuedBytes: 100 * MIB, queueMaxAgeMs: 72 * HOUR, accountQueuedEvents: 2_000, accountQueuedBytes: 200 * MIB },
  PRO: { activeTokens: 50, activeTunnels: 25, capturedRequests: 10_000, retentionMs: 7 * 24 * HOUR, captureBytes: 2048 * MIB, reservedSubdomains: 50, queuedEvents: 10_000, queuedBytes: 1024 * MIB, queueMaxAgeMs: 7 * 24 * HOUR, accountQueuedEvents: 20_000, accountQueuedBytes: 2048 * MIB },
};

export function isPlanName(value: unknown): value is PlanName {
  return typeof value === 'string' && (PLAN_NAMES as readonly string[]).includes(value);
}
