/**
 * A tunnel as a command, the inspector and the terminal see it: one session (TunnelClient) or one
 * tunnel attached to several edges of a cluster (MultiEdgeTunnel, src/client/multi-edge.ts).
 */
import type { EventEmitter } from 'node:events';
import type { RouteTable } from './routes.js';
import type { ReadyInfo, TunnelClientEvents } from './tunnel-client.js';

export interface TunnelEvents extends TunnelClientEvents {
  /** The number of edges serving the tunnel changed (a tunnel attached to several edges). */
  edges: [{ count: number }];
}

export interface Tunnel extends EventEmitter<TunnelEvents> {
  readonly routes: RouteTable;
  readonly publicUrl: string | null;
  readonly connected: boolean;
  /** The edge in use, as the user is told. */
  readonly edge: string;
  readonly activeStreams: number;
  readonly stats: { requests: number; errors: number; bytesIn: number; bytesOut: number };
  recordLimit: number;
  start(): Promise<ReadyInfo>;
  close(reason?: string): Promise<void>;
}
