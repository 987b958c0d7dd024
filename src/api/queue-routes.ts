/**
 * `/api/v1/queue`: the webhooks held for a reserved subdomain while its tunnel is offline (a documented
 * extension, docs/api.md and docs/offline.md). Listing, redelivery, discarding (one or in bulk), pause
 * and resume.
 */
import { BurrowError } from '../errors.js';
import { nowIso } from '../ids.js';
import type { AccountStore, Principal } from '../store/account-store.js';
import { DISCARD_STATES, generationOf, isDiscardState, type OfflineQueueStore, type QueuedEvent } from '../store/offline-queue.js';
import { json, NO_CONTENT, queryParams } from './http.js';
import type { ApiRequest, ApiResponse, ClusterQueueView, QueueDriver } from './types.js';

type Add = (
  method: string,
  path: string,
  handler: (ctx: { req: ApiRequest; params: Record<string, string>; principal: Principal }) => ApiResponse | Promise<ApiResponse>,
) => void;

export function eventJson(event: QueuedEvent): Record<string, unknown> {
  return {
    id: event.id,
    subdomain: event.subdomain,
    state: event.state,
    attempts: event.attempts,
    received_at: nowIso(event.receivedAt),
    method: event.method,
    path: event.path,
    size: event.bodySize,
    last_status: event.lastStatus,
    last_error: event.lastError,
    last_request_id: event.lastCaptureId,
    sender_id: event.senderId ?? null,
    next_attempt_at: event.retryAt == null || event.state === 'failed' || event.state === 'delivered' ? null : nowIso(event.retryAt),
  };
}

/**
 * `held` is the edge's own LMDB queue: with the embedded store the reservations and the events they hold
 * live in one environment (a release clears both in one transaction).
 */
export function defineQueueRoutes(add: Add, store: AccountStore, held: OfflineQueueStore, driver: QueueDriver | undefined, cluster?: ClusterQueueView): void {
  /** The reserved subdomain named by ?subdomain=, if it is the caller's. */
  const ownSubdomain = async (req: ApiRequest, principal: Principal): Promise<string> => {
    const name = queryParams(req).get('subdomain');
    if (name === null || name === '') throw new BurrowError('INVALID_REQUEST', 'The "subdomain" query parameter is required.');
    const subdomain = name.toLowerCase();
    if ((await store.getReservation(subdomain))?.accountId !== principal.account.id) {
      throw new BurrowError('NOT_FOUND', `No reserved subdomain ${subdomain.slice(0, 200)} on this account.`);
    }
    return subdomain;
  };
  const ownEvent = (id: string, principal: Principal): QueuedEvent => {
    const event = held.get(id);
    if (event === undefined || event.accountId !== principal.account.id) {
      throw new BurrowError('NOT_FOUND', `No held event ${id.slice(0, 200)} on this account.`);
    }
    return event;
  };
  const summary = async (subdomain: string): Promise<Record<string, unknown>> => {
    const meta = held.metaOf(subdomain);
    const reservation = await store.getReservation(subdomain);
    return { subdomain, offline: reservation?.offline ?? 'off', paused: meta.paused, events: meta.events, bytes: meta.bytes, expired: meta.expired };
  };

  /** Cluster mode: only the listing reaches the cluster's queue for now (docs/offline.md, "In cluster mode"). */
  const notInCluster = (): void => {
    if (cluster !== undefined) throw new BurrowError('INVALID_REQUEST', 'Redelivering, discarding, pausing and resuming held events are not available in cluster mode yet (docs/offline.md); GET /api/v1/queue lists them.');
  };

  add('GET', '/api/v1/queue', async ({ req, principal }) => {
    const subdomain = await ownSubdomain(req, principal);
    // Only this reservation's events: anything of an earlier owner of the name is not theirs to see.
    const reservation = await store.getReservation(subdomain);
    const generation = generationOf(reservation);
    if (cluster !== undefined) {
      const view = await cluster.list(subdomain, principal.account.id, generation);
      return json(200, { subdomain, offline: reservation?.offline ?? 'off', paused: false, events: view.events, bytes: view.bytes, expired: 0, queue: view.queue });
    }
    const events = held.list(subdomain).filter((event) => event.accountId === principal.account.id && generationOf(event) === generation);
    return json(200, { ...(await summary(subdomain)), queue: events.map(eventJson) });
  });

  add('DELETE', '/api/v1/queue', async ({ req, principal }) => {
    notInCluster();
    const subdomain = await ownSubdomain(req, principal);
    const state = queryParams(req).get('state');
    if (!isDiscardState(state)) {
      throw new BurrowError('INVALID_REQUEST', `The "state" query parameter is required: ${DISCARD_STATES.map((name) => `"${name}"`).join(', ')}.`);
    }
    const discarded = await held.discard(subdomain, state);
    driver?.changed(subdomain);
    return json(200, { ...(await summary(subdomain)), discarded });
  });

  add('POST', '/api/v1/queue/pause', async ({ req, principal }) => {
    notInCluster();
    const subdomain = await ownSubdomain(req, principal);
    await held.setPaused(subdomain, true);
    driver?.changed(subdomain);
    return json(200, await summary(subdomain));
  });

  add('POST', '/api/v1/queue/resume', async ({ req, principal }) => {
    notInCluster();
    const subdomain = await ownSubdomain(req, principal);
    await held.setPaused(subdomain, false);
    driver?.changed(subdomain);
    return json(200, await summary(subdomain));
  });

  add('POST', '/api/v1/queue/:event_id/deliver', async ({ params, principal }) => {
    notInCluster();
    const event = ownEvent(params.event_id!, principal);
    if (event.state === 'delivering') return json(202, eventJson(event));
    // Back in line with a fresh retry schedule, ahead of the events still queued.
    const queued = await held.update(event.id, { state: 'queued', retryAt: null, roundAttempts: 0 });
    if (queued === undefined) throw new BurrowError('NOT_FOUND', `No held event ${event.id} on this account.`);
    driver?.changed(event.subdomain);
    return json(202, eventJson(queued));
  });

  add('DELETE', '/api/v1/queue/:event_id', async ({ params, principal }) => {
    notInCluster();
    const event = ownEvent(params.event_id!, principal);
    await held.remove(event.id);
    driver?.changed(event.subdomain);
    return NO_CONTENT;
  });
}
