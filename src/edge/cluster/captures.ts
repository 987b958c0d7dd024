/**
 * The API's captures across the cluster (issue 17; docs/cluster.md, "Captures"). A capture stays in the
 * LMDB of the edge that served the request (DESIGN.md section 6): listing, showing and replaying ask
 * every edge for what it holds, over the internal hop, and merge.
 *
 * The caller authenticates the user itself; the other edges answer an internal call (the cluster
 * secret) for the account id it names, from their own captures only, and never ask further. Sending the
 * user's token to every edge instead would check it N times and count it N times against its rate
 * limit, and a dashboard session has no token to send.
 *
 * Paging: the newest `limit` of every edge, merged newest first, cut at `limit`. A `before` cursor is a
 * capture id: on the edge that holds it, the ring's order (exact); on the others, its receive time.
 * Request ids are unique across the edges (each numbers its rings in its own span, `clusterRingIds`,
 * EdgeOptions.clusterHop.ringIds) and name the edge that stored them (`nodeNumberOfCaptureId`); a
 * ClusterPeer does not carry its number (yet), so `get` asks every edge, and only one can answer.
 */
import { Packr } from 'msgpackr';
import type { Agent } from 'undici';
import { BurrowError } from '../../errors.js';
import type { CaptureLog, CaptureQuery, ReplayOverrides, TunnelDirectory, TunnelInfo, TunnelCloseReason } from '../../api/types.js';
import type { LocalCaptureLog } from '../../api/capture-log.js';
import type { CaptureRecord, CaptureSummary, SearchResult } from '../../store/captures.js';
import type { InternalEndpoints, InternalRequest } from './internal.js';
import { SECRET_HEADER } from './secret.js';
import type { ClusterDirectory, ClusterPeer } from './types.js';

export const CAPTURES_PATH = '/_burrow/cluster/v1/captures';
export const REPLAY_PATH = '/_burrow/cluster/v1/replay';
const packr = new Packr({ useRecords: false, variableMapSize: true });
/** How long one edge may take to answer its part; an edge that does not is left out of the answer. */
const PEER_TIMEOUT_MS = 2_000;

type CaptureCall =
  | { op: 'list'; accountId: string; subdomain: string; query: CaptureQuery; receivedBefore?: number }
  | { op: 'search'; accountId: string; subdomain: string; text: string; query: CaptureQuery & { maxScanned: number; maxBodyBytes: number }; receivedBefore?: number }
  | { op: 'get'; accountId: string; id: string; retentionMs: number; now: number };

interface ReplayCall {
  capture: CaptureRecord;
  overrides: ReplayOverrides;
}

export class ClusterCaptureLog implements CaptureLog {
  constructor(
    private readonly local: LocalCaptureLog,
    private readonly directory: ClusterDirectory,
    private readonly agent: Agent,
    private readonly secret: string,
    private readonly log: (line: string) => void,
  ) {}

  /** The internal side: answers other edges from this edge's captures only. */
  register(endpoints: InternalEndpoints, tunnels: TunnelDirectory): void {
    endpoints.route('POST', CAPTURES_PATH, (request) => packed(this.answerLocally(unpacked(request) as CaptureCall)));
    endpoints.route('POST', REPLAY_PATH, async (request) => {
      const call = unpacked(request) as ReplayCall;
      return packed(await tunnels.replay(revived(call.capture), call.overrides));
    });
  }

  async list(accountId: string, subdomain: string, query: CaptureQuery): Promise<CaptureSummary[] | null> {
    const cursor = await this.cursor(accountId, subdomain, query.before);
    const parts = await this.everyEdge<CaptureSummary[] | null>((peer) => {
      const call: CaptureCall = { op: 'list', accountId, subdomain, query: partQuery(query, cursor, peer) };
      if (cursor !== null && cursor.holder !== peer.nodeId) call.receivedBefore = cursor.receivedAt;
      return call;
    });
    const found = parts.filter((part): part is CaptureSummary[] => part !== null);
    if (found.length === 0) return null;
    return newestFirst(found.flat()).slice(0, query.limit);
  }

  async search(accountId: string, subdomain: string, text: string, query: CaptureQuery & { maxScanned: number; maxBodyBytes: number }): Promise<SearchResult | null> {
    const cursor = await this.cursor(accountId, subdomain, query.before);
    const parts = await this.everyEdge<SearchResult | null>((peer) => {
      const call: CaptureCall = { op: 'search', accountId, subdomain, text, query: { ...partQuery(query, cursor, peer), maxScanned: query.maxScanned, maxBodyBytes: query.maxBodyBytes } };
      if (cursor !== null && cursor.holder !== peer.nodeId) call.receivedBefore = cursor.receivedAt;
      return call;
    });
    const found = parts.filter((part): part is SearchResult => part !== null);
    if (found.length === 0) return null;
    const matches = newestFirst(found.flatMap((part) => part.matches)).slice(0, query.limit);
    // Each edge bounds its own scan; a further page starts after the last match shown, or where the
    // edges that stopped early stopped (the newest of those: nothing newer is left unscanned).
    const stopped = found.filter((part) => part.resumeBefore !== null);
    const resumeBefore = matches.length === query.limit ? matches[matches.length - 1]!.id : stopped.length > 0 ? (matches[matches.length - 1]?.id ?? stopped[0]!.resumeBefore) : null;
    return { matches, scanned: found.reduce((sum, part) => sum + part.scanned, 0), resumeBefore };
  }

  async get(accountId: string, id: string, retentionMs: number, now: number): Promise<CaptureRecord | null> {
    const parts = await this.everyEdge<CaptureRecord | null>(() => ({ op: 'get', accountId, id, retentionMs, now }));
    let newest: CaptureRecord | null = null;
    for (const part of parts) if (part !== null && (newest === null || part.receivedAt > newest.receivedAt)) newest = revived(part);
    return newest;
  }

  /** Where a `before` id is (its edge and time), or null without one; INVALID_REQUEST when no edge has it. */
  private async cursor(accountId: string, subdomain: string, before: string | undefined): Promise<{ holder: string; receivedAt: number } | null> {
    if (before === undefined) return null;
    const peers = await this.edges();
    const parts = await this.everyEdge<CaptureRecord | null>(() => ({ op: 'get', accountId, id: before, retentionMs: Number.MAX_SAFE_INTEGER, now: Date.now() }), peers);
    let found: { holder: string; receivedAt: number } | null = null;
    for (const [index, part] of parts.entries()) {
      if (part !== null && part.subdomain === subdomain && (found === null || part.receivedAt > found.receivedAt)) found = { holder: peers[index]!.nodeId, receivedAt: part.receivedAt };
    }
    if (found === null) throw new BurrowError('INVALID_REQUEST', `"before" must be a request id of ${subdomain.length <= 200 ? subdomain : `${subdomain.slice(0, 200)}…`}.`);
    return found;
  }

  /** This edge first, then every other live edge. */
  private async edges(): Promise<ClusterPeer[]> {
    const self = this.directory.self;
    return [self, ...(await this.directory.peers()).filter((peer) => peer.nodeId !== self.nodeId)];
  }

  /** Asks this edge (directly) and every other live edge (over the hop), in parallel; an edge that fails is left out. */
  private async everyEdge<T>(callFor: (peer: ClusterPeer) => CaptureCall, known?: ClusterPeer[]): Promise<(T | null)[]> {
    const self = this.directory.self;
    const peers = known ?? (await this.edges());
    return Promise.all(
      peers.map(async (peer) => {
        const call = callFor(peer);
        if (peer.nodeId === self.nodeId) return this.answerLocally(call) as T | null;
        try {
          return (await this.ask(peer, CAPTURES_PATH, call)) as T | null;
        } catch (error) {
          this.log(`cluster: captures from ${peer.nodeId} left out: ${(error as Error).message}`);
          return null;
        }
      }),
    );
  }

  /** This edge's part of a call (a `before` another edge holds is a time here). */
  private answerLocally(call: CaptureCall): unknown {
    switch (call.op) {
      case 'get':
        return this.local.get(call.accountId, call.id, call.retentionMs, call.now);
      case 'list':
        if (call.receivedBefore !== undefined) return this.local.listOlderThan(call.accountId, call.subdomain, call.receivedBefore, call.query);
        return this.local.list(call.accountId, call.subdomain, call.query);
      case 'search':
        if (call.receivedBefore !== undefined) {
          // Paging a search by time on this edge: the older captures, searched (bounded like a search).
          const older = this.local.listOlderThan(call.accountId, call.subdomain, call.receivedBefore, { ...call.query, limit: 1 });
          if (older === null) return null;
          if (older.length === 0) return { matches: [], scanned: 0, resumeBefore: null };
          return this.local.search(call.accountId, call.subdomain, call.text, { ...call.query, before: nextAfter(older[0]!.id) });
        }
        return this.local.search(call.accountId, call.subdomain, call.text, call.query);
    }
  }

  /** Replays `capture` through the edge that holds its tunnel; the new capture is stored there. */
  async replayOn(peer: ClusterPeer, capture: CaptureRecord, overrides: ReplayOverrides): Promise<CaptureRecord> {
    return revived((await this.ask(peer, REPLAY_PATH, { capture, overrides } satisfies ReplayCall, 60_000)) as CaptureRecord);
  }

  private async ask(peer: ClusterPeer, path: string, call: unknown, timeoutMs = PEER_TIMEOUT_MS): Promise<unknown> {
    const response = await this.agent.request({
      origin: peer.advertise,
      path,
      method: 'POST',
      headers: { [SECRET_HEADER]: this.secret, 'content-type': 'application/msgpack' },
      body: packr.pack(call),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = Buffer.from(await response.body.arrayBuffer());
    if (response.statusCode !== 200) {
      const error = (JSON.parse(body.toString('utf8')) as { error?: { code?: string; message?: string } }).error;
      if (error?.code !== undefined && error.code in ERROR_STATUS) throw new BurrowError(error.code as 'TUNNEL_OFFLINE', error.message);
      throw new Error(`${peer.nodeId} answered ${response.statusCode}`);
    }
    return packr.unpack(body);
  }
}

/** Errors of the owner's replay that reach the user as they are. */
const ERROR_STATUS: Record<string, true> = { TUNNEL_OFFLINE: true, LOCAL_TIMEOUT: true, LOCAL_UNREACHABLE: true, TUNNEL_CLOSED: true, TUNNEL_BUSY: true, PAYLOAD_TOO_LARGE: true, INVALID_REQUEST: true };

/**
 * The API's tunnels with replays sent to the edge holding the tunnel: `get` falls back on the lease (a
 * tunnel another edge holds), `replay` goes over the hop when the owner is another edge. The rest is the
 * edge's own directory (the lease registry's, in cluster mode).
 */
export class ClusterTunnels implements TunnelDirectory {
  constructor(
    private readonly inner: TunnelDirectory,
    private readonly directory: ClusterDirectory,
    private readonly captures: ClusterCaptureLog,
  ) {}

  listByAccount(accountId: string) {
    return this.inner.listByAccount(accountId);
  }

  async get(subdomain: string): Promise<TunnelInfo | undefined> {
    const here = await this.inner.get(subdomain);
    if (here !== undefined) return here;
    const lease = await this.directory.ownerOf(subdomain);
    if (lease === null) return undefined;
    return { subdomain: lease.subdomain, accountId: lease.accountId, tokenId: lease.tokenId, port: lease.port, startedAt: lease.startedAt, publicUrl: lease.publicUrl };
  }

  holderOf(subdomain: string) {
    return this.inner.holderOf(subdomain);
  }

  close(subdomain: string, reason: TunnelCloseReason) {
    return this.inner.close(subdomain, reason);
  }

  closeByToken(tokenId: string) {
    return this.inner.closeByToken(tokenId);
  }

  async replay(capture: CaptureRecord, overrides: ReplayOverrides): Promise<CaptureRecord> {
    const lease = await this.directory.ownerOf(capture.subdomain);
    if (lease === null || lease.nodeId === this.directory.self.nodeId) return this.inner.replay(capture, overrides);
    if (lease.accountId !== capture.accountId) throw new BurrowError('TUNNEL_OFFLINE', `The tunnel ${capture.subdomain} is not connected.`);
    return this.captures.replayOn(lease, capture, overrides);
  }
}

function partQuery(query: CaptureQuery, cursor: { holder: string } | null, peer: ClusterPeer): CaptureQuery {
  // The cursor's own edge pages by its ring; the others by time (receivedBefore).
  if (cursor !== null && cursor.holder === peer.nodeId) return query;
  const { before: _before, ...rest } = query;
  return rest;
}

function newestFirst(list: CaptureSummary[]): CaptureSummary[] {
  return list.sort((a, b) => b.receivedAt - a.receivedAt || (a.id < b.id ? 1 : -1));
}

/** The id just after `id` in its ring, so a search `before` it includes it. */
function nextAfter(id: string): string {
  const seq = parseInt(id.slice(-12), 16) + 1;
  return id.slice(0, -12) + seq.toString(16).padStart(12, '0');
}

function unpacked(request: InternalRequest): unknown {
  if (request.body === null) throw new BurrowError('INVALID_REQUEST', 'An internal call carries a msgpack body.');
  return packr.unpack(request.body);
}

function packed(value: unknown): { status: number; body: Buffer; headers: [string, string][] } {
  return { status: 200, body: packr.pack(value), headers: [['content-type', 'application/msgpack']] };
}

/** msgpack gives bodies back as Buffers (Uint8Array): nothing else to restore. */
function revived(capture: CaptureRecord): CaptureRecord {
  return capture;
}
