/**
 * A tunnel client by hand, for tests that play a (mis)behaving client against a real edge: a raw `ws`
 * WebSocket at /api/v1/connect on the edge's agent port that records every frame the edge sends and
 * lets the test send anything.
 */
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { decode, type Frame, type ReadyFrame } from '../../src/protocol/codec.js';
import { FrameType, PROTOCOL_HEADER, PROTOCOL_VERSION } from '../../src/protocol/constants.js';
import type { TestEdge } from '../helpers.js';

export interface Closed {
  code: number;
  reason: string;
}

export class RawTunnel {
  readonly frames: Frame[] = [];
  /** Messages the test could not decode (the edge sent something broken). */
  readonly undecodable: string[] = [];
  readonly closed: Promise<Closed>;
  private waiters: { type: number; resolve: (frame: Frame) => void }[] = [];

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      let frame: Frame;
      try {
        assert.ok(isBinary, 'the edge sends binary messages only');
        frame = decode(data);
      } catch (error) {
        this.undecodable.push(String(error));
        return;
      }
      this.frames.push(frame);
      const waiter = this.waiters.find((w) => w.type === frame[0]);
      if (waiter !== undefined) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve(frame);
      }
    });
    ws.on('error', () => {
      // 'close' follows.
    });
    this.closed = new Promise((resolve) => ws.on('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString('utf8') })));
  }

  /** The next frame of `type`, taken out of `frames` (it may have arrived already). */
  next<T extends Frame>(type: number): Promise<T> {
    const index = this.frames.findIndex((frame) => frame[0] === type);
    if (index >= 0) return Promise.resolve(this.frames.splice(index, 1)[0] as T);
    return new Promise((resolve) =>
      this.waiters.push({ type, resolve: (frame) => resolve(this.frames.splice(this.frames.indexOf(frame), 1)[0] as T) }),
    );
  }

  send(data: Buffer | string): void {
    this.ws.send(data);
  }

  /** Resolves once the edge has handled everything sent before: it answers pings in order. */
  barrier(): Promise<'pong' | 'closed'> {
    return new Promise((resolve) => {
      this.ws.once('pong', () => resolve('pong'));
      void this.closed.then(() => resolve('closed'));
      this.ws.ping();
    });
  }
}

/** The agent listener's connect URL (where tunnel clients connect; GET /api/v1/instance names it). */
export function connectUrl(target: TestEdge, query: string): string {
  return `ws://127.0.0.1:${target.edge.agentPort}/api/v1/connect${query === '' ? '' : `?${query}`}`;
}

export function tunnelHeaders(target: TestEdge, token: string): Record<string, string> {
  return { host: `localhost:${target.port}`, authorization: `Bearer ${token}`, [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) };
}

/** The edge refused a connect: its HTTP status and body. */
export class ConnectRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`the edge refused the connect: ${status} ${body}`);
    this.name = 'ConnectRefused';
  }
}

/**
 * Opens a tunnel by hand; resolves once READY arrived. Rejects with ConnectRefused when the edge answers
 * the connect with an HTTP error, and with the close when the connection ends before READY (it used to
 * wait for a READY that could not come).
 */
export async function openRawTunnel(
  target: TestEdge,
  token: string,
  query = 'port=1234',
): Promise<{ tunnel: RawTunnel; ready: ReadyFrame; upgradeHeaders: Record<string, unknown> }> {
  const ws = new WebSocket(connectUrl(target, query), { headers: tunnelHeaders(target, token), perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  let upgradeHeaders: Record<string, unknown> = {};
  ws.once('upgrade', (response) => {
    upgradeHeaders = response.headers;
  });
  const refused = new Promise<never>((_, reject) => {
    ws.once('unexpected-response', (_request, response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        reject(new ConnectRefused(response.statusCode ?? 0, body));
        ws.terminate();
      });
    });
  });
  const tunnel = new RawTunnel(ws);
  const ended = tunnel.closed.then(({ code, reason }) => Promise.reject(new Error(`the connection closed before READY: ${code} ${reason}`)));
  // Whichever loses the race settles later (the close of a tunnel the test ends): not an unhandled rejection.
  refused.catch(() => undefined);
  ended.catch(() => undefined);
  const ready = await Promise.race([tunnel.next<ReadyFrame>(FrameType.READY), refused, ended]);
  return { tunnel, ready, upgradeHeaders };
}
