/**
 * An edge's connections to the cluster's Redis (docs/cluster.md): one for the leases, which fails fast
 * while Redis is unreachable (no offline queue, a command timeout: a connect is answered 503 at once and
 * a renewal is retried on the next round, never queued behind an outage), and one subscribed to the
 * commands channel. Both reconnect by themselves (forever, every 0.5 s at most; through the sentinels
 * when the store is a redis-sentinel:// URL), and the lease registry renews the moment they are back.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { StoreOptions } from '../../store/account-store.js';
import { MAX_CLUSTER_NODE_NUMBER } from '../../store/captures.js';
import { RedisLeases } from '../../store/redis-leases.js';
import { RedisOfflineQueue } from '../../store/redis-offline-queue.js';
import type { RedisStore } from '../../store/redis-store.js';
import { redacted } from '../../store/redis-url.js';
import { BurrowError } from '../../errors.js';
import type { ClusterOptions } from './types.js';

/**
 * Said when this edge made the hop's secret: a new cluster, or a Redis that restarted empty, in which
 * case the edges started before it keep the old secret and refuse this one's hops (docs/cluster.md).
 */
export const NEW_SECRET_LINE =
  'cluster: Redis held no internal hop secret, so this edge made one and stored it (a new cluster, or Redis restarted empty); ' +
  'edges started before hold another and refuse hops to and from this one until they restart: restart them, or give every edge --cluster-secret-file (docs/cluster.md)';

/** A lease call waits this long for Redis before it is answered 503. */
const COMMAND_TIMEOUT_MS = 2_000;

export class ClusterConnection {
  private constructor(
    /** Accounts, tokens, reservations, sessions, usage, limiters. */
    readonly accounts: RedisStore,
    readonly leases: RedisLeases,
    readonly subscriber: Redis,
    /** The internal hop's secret: configured, or the one the cluster stored first. */
    readonly secret: string,
    /** This edge's number in the cluster (its span of capture ring ids). */
    readonly nodeNumber: number,
    /** Held webhooks (docs/offline.md, "In cluster mode"): a connection of its own, as its WAIT blocks it. */
    readonly queue: RedisOfflineQueue,
  ) {}

  static async open(options: ClusterOptions, storeOptions: StoreOptions, log: (line: string) => void): Promise<ClusterConnection> {
    let accounts: RedisStore;
    try {
      // Loaded here, so an edge outside a cluster never loads ioredis (~0.15 s of CPU at each start).
      const { RedisStore } = await import('../../store/redis-store.js');
      accounts = await RedisStore.connect(options.redis, storeOptions);
    } catch (error) {
      // A bad URL or a Redis Cluster: the message says what to change.
      if (error instanceof BurrowError && error.code !== 'STORE_UNAVAILABLE') throw new Error(`the cluster store: ${error.message}`);
      throw new Error(`cannot reach the cluster store at ${redacted(options.redis)}: ${(error as Error).message}`);
    }
    // The leases' own connection: the renewal path fails sooner than account reads do.
    const client = accounts.redis.duplicate({ commandTimeout: COMMAND_TIMEOUT_MS, connectionName: `burrow-edge-${options.nodeId}` });
    // Outages are reported by the registry's renewals, once each; ioredis would print every retry.
    client.on('error', () => undefined);
    const subscriber = accounts.redis.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, connectionName: `burrow-edge-${options.nodeId}-commands` });
    subscriber.on('error', () => undefined);
    const leases = new RedisLeases(client, undefined, { replicas: accounts.target.replicas });
    try {
      await client.connect().catch((error: Error) => {
        if (client.status !== 'ready' && client.status !== 'connect') throw error;
      });
      accounts.reconnectWhenEnded(client);
      accounts.reconnectWhenEnded(subscriber);
      let secret = options.secret;
      if (secret === undefined) {
        const shared = await leases.sharedSecret(randomBytes(32).toString('hex'));
        secret = shared.secret;
        if (shared.stored) log(NEW_SECRET_LINE);
      }
      const nodeNumber = await leases.nodeNumber(options.nodeId, MAX_CLUSTER_NODE_NUMBER);
      log(`cluster: node ${options.nodeId} (edge number ${nodeNumber}) joins the cluster on ${accounts.displayUrl}${accounts.target.replicas > 0 ? ` (lease grants and renewals wait for ${accounts.target.replicas} replica${accounts.target.replicas === 1 ? '' : 's'})` : ''}`);
      const queueClient = accounts.redis.duplicate({ commandTimeout: COMMAND_TIMEOUT_MS, connectionName: `burrow-edge-${options.nodeId}-queue` });
      queueClient.on('error', () => undefined);
      await queueClient.connect().catch((error: Error) => {
        queueClient.disconnect();
        throw error;
      });
      accounts.reconnectWhenEnded(queueClient);
      const queue = new RedisOfflineQueue(queueClient, accounts.target.replicas, leases.channel, leases.prefix);
      return new ClusterConnection(accounts, leases, subscriber, secret, nodeNumber, queue);
    } catch (error) {
      client.disconnect();
      subscriber.disconnect();
      await accounts.close();
      throw new Error(`cannot reach the cluster store at ${accounts.displayUrl}: ${(error as Error).message}`);
    }
  }

  async close(): Promise<void> {
    this.subscriber.disconnect();
    this.leases.redis.disconnect();
    this.queue.disconnect();
    await this.accounts.close();
  }
}
