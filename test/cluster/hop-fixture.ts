/**
 * Edges joined by the internal hop without Redis: each edge gets a directory of the test's own that
 * says which edge holds which subdomain (the lease registry's job in cluster mode).
 */
import { randomUUID } from 'node:crypto';
import type { ClusterDirectory, ClusterPeer, LocalTunnels, TunnelLease } from '../../src/edge/cluster/types.js';
import { startEdge, type TestEdge } from '../helpers.js';
import type { EdgeOptions } from '../../src/edge/server.js';
import { clusterRingIds } from '../../src/store/captures.js';

export const SECRET = 'test-cluster-secret-0123456789';

/** Who owns what, shared by every edge's directory (a stand-in for Redis). */
export class TestCluster {
  readonly owners = new Map<string, TunnelLease>();
  readonly peers: ClusterPeer[] = [];
  readonly forgotten: string[] = [];

  /** A directory as seen by the edge `self`. */
  directory(self: ClusterPeer): ClusterDirectory {
    return {
      self,
      ownerOf: async (subdomain) => this.owners.get(subdomain) ?? null,
      forget: (subdomain) => {
        this.forgotten.push(`${self.nodeId}:${subdomain}`);
      },
      peers: async () => [...this.peers],
    };
  }

  /** Says `edge` holds `subdomain` (as the registry would once its tunnel connected). */
  own(subdomain: string, peer: ClusterPeer, accountId = 'acct', fence = 1): void {
    this.owners.set(subdomain, { ...peer, subdomain, accountId, tokenId: 'tok', port: 1, startedAt: Date.now(), publicUrl: '', fence });
  }
}

export interface ClusterEdge extends TestEdge {
  peer: ClusterPeer;
}

/**
 * Starts an edge in `cluster`. Its port is only known once it listens, so the peer's advertise URL is
 * filled in then (the directory reads `peer` when asked).
 */
export async function startClusterEdge(
  cluster: TestCluster,
  nodeId: string,
  options: Partial<EdgeOptions> & { local?: LocalTunnels; secret?: string } = {},
  nodeNumber = cluster.peers.length + 1,
): Promise<ClusterEdge> {
  const peer: ClusterPeer = { nodeId, advertise: '', boot: randomUUID() };
  const { local, secret, ...edgeOptions } = options;
  const edge = await startEdge({
    ...edgeOptions,
    clusterHop: { directory: cluster.directory(peer), secret: secret ?? SECRET, ringIds: clusterRingIds(nodeNumber), ...(local === undefined ? {} : { local }) },
  });
  peer.advertise = edge.base;
  cluster.peers.push(peer);
  return { ...edge, peer };
}

/**
 * Gives `to` the account `from` has (same id, e-mail and plan) and a token of its own for it: what the
 * shared Redis store does in cluster mode, done here on each edge's LMDB (test setup only).
 */
export async function mirrorAccount(from: TestEdge, to: TestEdge, accountId: string): Promise<string> {
  const account = await from.edge.store.getAccount(accountId);
  if (account === undefined) throw new Error(`no account ${accountId}`);
  const store = to.edge.store as unknown as { accounts: { put(id: string, value: unknown): Promise<boolean> }; accountsByEmail: { put(email: string, id: string): Promise<boolean> } };
  await store.accounts.put(account.id, account);
  await store.accountsByEmail.put(account.email, account.id);
  return (await to.edge.store.createToken(account, 'mirror')).token;
}
