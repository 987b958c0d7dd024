/**
 * An edge's connections to the cluster's Redis (docs/cluster.md): one for the leases, which fails fast
 * while Redis is unreachable (no offline queue, a command timeout: a connect is answered 503 at once and
 * a renewal is retried on the next round, never queued behind an outage), and one subscribed to the
 * commands channel. Both reconnect by themselves (ioredis's retry strategy, forever, every 2 s at most).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisLeases } from '../../store/redis-leases.js';
import type { ClusterOptions } from './types.js';

/** A lease call waits this long for Redis before it is answered 503. */
const COMMAND_TIMEOUT_MS = 2_000;

export class ClusterConnection {
  private constructor(
    readonly leases: RedisLeases,
    readonly subscriber: Redis,
    /** The internal hop's secret: configured, or the one the cluster stored first. */
    readonly secret: string,
  ) {}

  static async open(options: ClusterOptions, log: (line: string) => void): Promise<ClusterConnection> {
    const client = new Redis(options.redis, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectionName: `burrow-edge-${options.nodeId}`,
    });
    // Outages are reported by the registry's renewals, once each; ioredis would print every retry.
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      client.disconnect();
      throw new Error(`cannot reach the cluster store at ${options.redis}: ${(error as Error).message}`);
    }
    const subscriber = client.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, connectionName: `burrow-edge-${options.nodeId}-commands` });
    subscriber.on('error', () => undefined);
    const leases = new RedisLeases(client);
    try {
      const secret = options.secret ?? (await leases.sharedSecret(randomBytes(32).toString('hex')));
      log(`cluster: node ${options.nodeId} joins the cluster on ${redactedUrl(options.redis)}`);
      return new ClusterConnection(leases, subscriber, secret);
    } catch (error) {
      client.disconnect();
      subscriber.disconnect();
      throw error;
    }
  }

  close(): void {
    this.subscriber.disconnect();
    this.leases.redis.disconnect();
  }
}

/** The Redis URL without its password, for logs. */
function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'the configured Redis';
  }
}
