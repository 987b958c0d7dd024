/**
 * One rogue tenant: a tunnel client written by hand (a raw `ws` WebSocket) that plays sequences from
 * test/fuzz/sequences.ts against the edge, one at a time. For each it sends the public request to its
 * own subdomain, waits for the OPEN (or WS_OPEN) the edge makes of it, sends the sequence's frames as
 * they are (msgpack of whatever the sequence holds, valid or not), ends the stream with a RESET and waits
 * for the public client's answer. When the edge ends the tunnel (GOAWAY for a protocol error, which is
 * correct), the lane connects again before the next sequence.
 */
import http from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { Packr } from 'msgpackr';
import WebSocket from 'ws';
import { decode, type Frame } from '../../src/protocol/codec.js';
import { CONNECT_PATH, DEFAULT_SETTINGS, FrameType, PROTOCOL_HEADER, PROTOCOL_VERSION, ResetCode } from '../../src/protocol/constants.js';
import { bodyBytes, isBody, type PublicAction, type PublicRequest, type Sequence, type Step } from './sequences.js';

/** The same msgpack options as the codec, but no type checks: the rogue sends what the sequence says. */
const packr = new Packr({ useRecords: false, variableMapSize: true });

/** Past this, an OPEN that has not come means the edge answered the public request itself. */
const OPEN_WAIT_MS = 5_000;
/** The edge always answers within this after the rogue's last frame (a RESET): longer is a hang. */
export const ANSWER_WAIT_MS = 3_000;
/** The lane waits this long for the answer; a later one is watched in the background. */
const QUICK_ANSWER_MS = 200;
const PONG_WAIT_MS = 5_000;

export interface SequenceOutcome {
  /** The edge opened a stream for the request and the rogue played its frames. */
  delivered: boolean;
  /** Messages the rogue sent. */
  frames: number;
  /** What the public client got: `200`, `502 TUNNEL_CLOSED`, `200 cut`, `ws closed 1011`, `error ECONNRESET`... */
  answer: string;
  /** The edge ended the rogue's tunnel during the sequence: the GOAWAY's code and reason. */
  goAway: string | null;
  /** The answer had not come QUICK_ANSWER_MS after the rogue's last frame: it settles later, null if never. */
  late: Promise<string | null> | null;
  /** Things the edge did that it must not (a frame it sent that does not decode, a spurious GOAWAY). */
  anomalies: string[];
}

interface Connection {
  ws: WebSocket;
  closed: boolean;
  whenClosed: Promise<void>;
  goAway: string | null;
  /** The highest stream id the edge opened on this tunnel. */
  lastOpened: number;
  /** Connection credit the rogue holds by its own count: bytes it sent are taken, WINDOW 0 adds. */
  credit: number;
  /** Request body bytes received since the rogue last granted them back. */
  toGrant: number;
  opens: Map<string, Frame>;
  openWaiter: { path: string; resolve: (frame: Frame) => void } | null;
  anomalies: string[];
}

export interface LaneTarget {
  /** The edge's public port (public requests). */
  port: number;
  /** Its agent port (the rogue's tunnel). */
  agentPort: number;
  token: string;
}

let pathCounter = 0;

export class RogueLane {
  private connection: Connection | null = null;
  /** Tunnel connections made, the first included. */
  connects = 0;
  /** Bumped by interrupt(): a connect loop of an older generation gives up. */
  private generation = 0;

  constructor(
    readonly subdomain: string,
    private readonly target: () => LaneTarget,
  ) {}

  get connected(): boolean {
    return this.connection !== null && !this.connection.closed;
  }

  /** Connects (again), retrying while the edge restarts or still holds the old session. */
  async connect(deadlineMs = 10_000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    const generation = this.generation;
    for (;;) {
      try {
        this.connection = await this.connectOnce();
        this.connects++;
        return;
      } catch (error) {
        if (Date.now() > deadline || generation !== this.generation) throw error;
        await sleep(25);
      }
    }
  }

  /** The edge died: stop retrying to connect (the fuzzer restarts it and the lane connects afresh). */
  interrupt(): void {
    this.generation++;
  }

  private connectOnce(): Promise<Connection> {
    const { port, agentPort, token } = this.target();
    const ws = new WebSocket(`ws://127.0.0.1:${agentPort}${CONNECT_PATH}?port=1&subdomain=${this.subdomain}`, {
      headers: { host: `localhost:${port}`, authorization: `Bearer ${token}`, [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) },
      perMessageDeflate: false,
      maxPayload: 64 * 1024 * 1024,
      handshakeTimeout: 5_000,
    });
    let markClosed: () => void = () => {};
    const connection: Connection = {
      ws,
      closed: false,
      whenClosed: new Promise((resolve) => (markClosed = resolve)),
      goAway: null,
      lastOpened: 0,
      credit: DEFAULT_SETTINGS.connectionWindow,
      toGrant: 0,
      opens: new Map(),
      openWaiter: null,
      anomalies: [],
    };
    return new Promise((resolve, reject) => {
      ws.on('unexpected-response', (request, response) => {
        response.resume();
        request.destroy();
        reject(new Error(`tunnel refused with ${response.statusCode}`));
      });
      ws.on('error', (error) => reject(error));
      ws.on('close', () => {
        connection.closed = true;
        markClosed();
        reject(new Error('closed before READY'));
      });
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        let frame: Frame;
        try {
          if (!isBinary) throw new Error('a text message');
          frame = decode(data);
        } catch (error) {
          connection.anomalies.push(`the edge sent a message that is not a frame: ${(error as Error).message}`);
          return;
        }
        if (frame[0] === FrameType.READY) resolve(connection);
        else this.onFrame(connection, frame);
      });
    });
  }

  private onFrame(connection: Connection, frame: Frame): void {
    switch (frame[0]) {
      case FrameType.OPEN: {
        if (frame[1] > connection.lastOpened) connection.lastOpened = frame[1];
        const path = frame[4];
        if (frame[7] !== null) this.received(connection, frame[7].byteLength);
        const waiter = connection.openWaiter;
        if (waiter !== null && waiter.path === path) {
          connection.openWaiter = null;
          waiter.resolve(frame);
        } else {
          connection.opens.set(path, frame);
        }
        return;
      }
      case FrameType.DATA:
        if (frame[2] !== null) this.received(connection, frame[2].byteLength);
        return;
      case FrameType.WINDOW:
        if (frame[1] === 0) connection.credit += frame[2];
        return;
      case FrameType.GOAWAY:
        connection.goAway = `GOAWAY ${frame[2]} ${frame[3]}`;
        return;
      default:
        return;
    }
  }

  /** Request body bytes from the edge: the connection credit goes back in batches, as a real client does. */
  private received(connection: Connection, bytes: number): void {
    connection.toGrant += bytes;
    if (connection.toGrant >= DEFAULT_SETTINGS.connectionWindow / 4 && !connection.closed) {
      connection.ws.send(packr.pack([FrameType.WINDOW, 0, connection.toGrant]));
      connection.toGrant = 0;
    }
  }

  private nextOpen(connection: Connection, path: string): Promise<Frame> {
    const early = connection.opens.get(path);
    if (early !== undefined) {
      connection.opens.delete(path);
      return Promise.resolve(early);
    }
    return new Promise((resolve) => (connection.openWaiter = { path, resolve }));
  }

  /** Plays one sequence; never throws for anything the edge does. */
  async run(sequence: Sequence): Promise<SequenceOutcome> {
    const outcome: SequenceOutcome = { delivered: false, frames: 0, answer: '', goAway: null, late: null, anomalies: [] };
    if (!this.connected) {
      try {
        await this.connect();
      } catch (error) {
        outcome.answer = `no tunnel: ${(error as Error).message}`;
        return outcome;
      }
    }
    const connection = this.connection!;
    connection.opens.clear();
    const path = `/fuzz/${sequence.seed}/${++pathCounter}`;
    const { port } = this.target();
    const publicSide = startPublic(port, `${this.subdomain}.localhost:${port}`, path, sequence.request);
    let timer: NodeJS.Timeout | undefined;
    const open = await Promise.race([
      this.nextOpen(connection, path),
      publicSide.answer.then(() => null),
      connection.whenClosed.then(() => null),
      new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), OPEN_WAIT_MS))),
    ]);
    clearTimeout(timer);
    connection.openWaiter = null;
    if (open === null) {
      // The edge answered the request itself (the tunnel was closing, or busy), or the edge is gone.
      publicSide.abort();
      outcome.answer = `undelivered: ${await Promise.race([publicSide.answer, sleep(100, 'no answer')])}`;
      outcome.goAway = connection.goAway;
      if (connection.goAway !== null && !connection.closed) await Promise.race([connection.whenClosed, sleep(1_000)]);
      return outcome;
    }
    outcome.delivered = true;
    const stream = open[1];
    for (const step of sequence.steps) {
      if (connection.closed) break;
      if ('wait' in step) await this.wait(connection, step.wait, outcome);
      else if ('public' in step) publicSide.act(step.public);
      else outcome.frames += this.send(connection, step, stream);
    }
    if (!connection.closed) {
      connection.ws.send(packr.pack([FrameType.RESET, stream, ResetCode.CANCEL, 'fuzz: end of sequence']));
      outcome.frames++;
    }
    const answer = await Promise.race([publicSide.answer, sleep(QUICK_ANSWER_MS, null)]);
    if (answer !== null) {
      outcome.answer = answer;
    } else {
      outcome.answer = 'late';
      outcome.late = Promise.race([publicSide.answer, sleep(ANSWER_WAIT_MS - QUICK_ANSWER_MS, null)]).then((late) => {
        if (late === null) publicSide.abort();
        return late;
      });
    }
    // The edge ended the tunnel: let the close arrive, so the next sequence starts on a new tunnel.
    if (connection.goAway !== null && !connection.closed) await Promise.race([connection.whenClosed, sleep(1_000)]);
    outcome.goAway = connection.goAway;
    if (connection.goAway !== null && /exceeded the connection window/.test(connection.goAway) && connection.credit >= 0) {
      outcome.anomalies.push(`the edge said the connection window was exceeded while the rogue still held ${connection.credit} bytes of credit`);
    }
    outcome.anomalies.push(...connection.anomalies.splice(0));
    return outcome;
  }

  private async wait(connection: Connection, what: 'pong' | 'tick' | number, outcome: SequenceOutcome): Promise<void> {
    if (what === 'tick') {
      await nextTurn();
      return;
    }
    if (typeof what === 'number') {
      await sleep(what);
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    let onPong: () => void = () => {};
    const answered = await Promise.race([
      new Promise<boolean>((resolve) => {
        onPong = () => resolve(true);
        connection.ws.once('pong', onPong);
        connection.ws.ping();
      }),
      connection.whenClosed.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), PONG_WAIT_MS))),
    ]);
    clearTimeout(timer);
    connection.ws.off('pong', onPong);
    if (!answered) outcome.anomalies.push(`the edge did not answer a ping within ${PONG_WAIT_MS} ms`);
  }

  /** Sends one step's message; returns 1 (a message sent). */
  private send(connection: Connection, step: Exclude<Step, { wait: unknown } | { public: unknown }>, stream: number): number {
    if ('text' in step) {
      connection.ws.send(step.text);
      return 1;
    }
    if ('raw' in step) {
      connection.ws.send(Buffer.from(step.raw, 'hex'));
      return 1;
    }
    const elements = step.frame.map((element, i) => (i === 1 ? resolveStream(element, stream, connection) : isBody(element) ? bodyBytes(element) : element));
    for (const element of elements) if (element instanceof Uint8Array) connection.credit -= element.byteLength;
    connection.ws.send(packr.pack(elements));
    return 1;
  }

  close(): void {
    this.connection?.ws.terminate();
    this.connection = null;
  }
}

function resolveStream(ref: unknown, stream: number, connection: Connection): unknown {
  if (ref === 's') return stream;
  if (ref === 'unopened') return connection.lastOpened + 1000;
  if (ref === 'previous') return Math.max(1, stream - 1);
  return ref;
}

// ---- the public side ---------------------------------------------------------------------------------

interface PublicExchange {
  /** Settles with what the public client saw; never rejects. */
  answer: Promise<string>;
  abort(): void;
  act(action: PublicAction): void;
}

/** Request bodies are views of one buffer (POST_LARGE is at most 300,000 bytes). */
const requestBytes = Buffer.alloc(512 * 1024, 0x62);
function requestBody(size: number): Buffer {
  return size <= requestBytes.byteLength ? requestBytes.subarray(0, size) : Buffer.alloc(size, 0x62);
}

function startPublic(port: number, host: string, path: string, request: PublicRequest): PublicExchange {
  return request.kind === 'WS' ? publicWebSocket(port, host, path, request.protocols ?? '') : publicHttp(port, host, path, request);
}

function publicHttp(port: number, host: string, path: string, request: PublicRequest): PublicExchange {
  const method = request.kind === 'GET' || request.kind === 'HEAD' ? request.kind : 'POST';
  const headers: Record<string, string> = { host };
  if (request.kind === 'POST' || request.kind === 'POST_LARGE') headers['content-length'] = String(request.bodySize);
  const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false });
  let settle: (answer: string) => void = () => {};
  const answer = new Promise<string>((resolve) => (settle = resolve));
  let informational = '';
  let status = '';
  req.on('information', (info) => (informational += `${info.statusCode}+`));
  req.on('upgrade', (response, socket) => {
    socket.destroy();
    settle(`${informational}${response.statusCode} upgrade`);
  });
  req.on('response', (response) => {
    const code = response.headers['burrow-error'];
    status = `${informational}${response.statusCode}${code === undefined ? '' : ` ${String(code)}`}`;
    response.on('data', () => {});
    response.on('end', () => settle(status));
    response.on('aborted', () => settle(`${status} cut`));
    response.on('error', () => settle(`${status} cut`));
  });
  req.on('error', (error: NodeJS.ErrnoException) => settle(status === '' ? `error ${error.code ?? error.message}` : `${status} cut`));
  req.on('close', () => settle(status === '' ? 'error closed' : `${status} cut`));
  if (request.kind === 'POST_CHUNKED') {
    const body = requestBody(request.bodySize);
    const half = body.byteLength >> 1;
    if (half > 0) req.write(body.subarray(0, half));
    setImmediate(() => req.end(body.subarray(half)));
  } else if (method === 'POST') {
    req.end(requestBody(request.bodySize));
  } else {
    req.end();
  }
  let acted = '';
  return {
    answer: answer.then((text) => `${acted}${text}`),
    abort: () => req.destroy(),
    act: (action) => {
      if (action === 'send') return;
      acted = 'gone away, ';
      req.destroy();
    },
  };
}

function publicWebSocket(port: number, host: string, path: string, protocols: string): PublicExchange {
  const offered = protocols === '' ? [] : protocols.split(', ');
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, offered, { headers: { host }, perMessageDeflate: false, handshakeTimeout: 30_000 });
  let settle: (answer: string) => void = () => {};
  const answer = new Promise<string>((resolve) => (settle = resolve));
  let opened = false;
  ws.on('open', () => {
    opened = true;
    ws.send('hello');
    ws.send(Buffer.from([1, 2, 3]));
  });
  ws.on('message', () => {});
  ws.on('unexpected-response', (request, response) => {
    const code = response.headers['burrow-error'];
    settle(`ws refused ${response.statusCode}${code === undefined ? '' : ` ${String(code)}`}`);
    response.resume();
    request.destroy();
  });
  ws.on('error', (error: NodeJS.ErrnoException) => {
    if (!opened) settle(`ws error ${error.code ?? error.message}`);
  });
  ws.on('close', (code) => settle(opened ? `ws closed ${code}` : `ws failed ${code}`));
  let acted = '';
  return {
    answer: answer.then((text) => `${acted}${text}`),
    abort: () => ws.terminate(),
    act: (action) => {
      if (action === 'send') {
        if (ws.readyState === WebSocket.OPEN) ws.send('more');
      } else if (action === 'close' && ws.readyState === WebSocket.OPEN) {
        acted = 'closed by the client, ';
        ws.close(1000, 'bye');
      } else {
        acted = 'gone away, ';
        ws.terminate();
      }
    },
  };
}
