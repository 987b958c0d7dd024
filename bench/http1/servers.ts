/**
 * The public side alone, without a tunnel (`node dist/bench/http1/servers.js [--modes a,b] [--rounds N]`):
 * servers that take a 1 KiB POST and answer a small JSON body, each in its own process, driven in
 * alternated rounds by autocannon at 100 connections, with the server's CPU µs per request from /proc.
 *
 *   bare       node:net + Node's llhttp binding, one string written per answer (issue 24's 16.5 µs row)
 *   http1      src/http1/server.ts with a sink that answers when the body ended (in the same callback)
 *   http1-turn the same, the answer written at the end of the loop turn, corked (as the edge does)
 *   uws        uWebSockets.js, cork + writeStatus/writeHeader/end (the edge's public side before issue 24)
 *
 * So what src/http1 adds over the bare server, and what the end-of-turn write adds, are measured
 * apart from the tunnel.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ServerConnections, type ExchangeSink, type ServerExchange } from '../../src/http1/server.js';
import { listenPort, uws } from '../../src/uws.js';
import { runLoad } from '../e2e/load.js';
import { postBody } from '../e2e/payloads.js';
import { clockTicks } from '../e2e/sampler.js';

const MODES = ['bare', 'bare-onread', 'http1', 'http1-turn', 'uws'] as const;
type Mode = (typeof MODES)[number];

const ANSWER = postBody(1024);
const ANSWER_BYTES = Buffer.from(ANSWER);
const FIELDS = ['content-type', 'application/json'];

function serveBare(onread: boolean): void {
  const require = createRequire(import.meta.url);
  const { HTTPParser } = require('_http_common') as { HTTPParser: any };
  const whole = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: ${ANSWER.length}\r\n\r\n${ANSWER}`;
  const readBuffer = Buffer.allocUnsafe(64 * 1024);
  const server = createServer({ noDelay: true, pauseOnConnect: onread }, (accepted: Socket) => {
    let socket = accepted;
    if (onread) {
      // The accepted handle moved to a socket that reads into one reused buffer (net.Socket's onread).
      const handle = (accepted as unknown as { _handle: unknown })._handle;
      (accepted as unknown as { _handle: unknown })._handle = null;
      socket = new Socket({ handle, readable: true, writable: true, onread: { buffer: readBuffer, callback: (bytes: number, buffer: Buffer) => void parser.execute(buffer.subarray(0, bytes)) } } as never);
      socket.resume();
    }
    const parser = new HTTPParser();
    parser.initialize(HTTPParser.REQUEST, {}, 32 * 1024, 0);
    let fields: string[] = [];
    parser[HTTPParser.kOnHeadersComplete] = (_major: number, _minor: number, headers: string[]): number => {
      fields = headers;
      return 0;
    };
    parser[HTTPParser.kOnBody] = (): void => undefined;
    parser[HTTPParser.kOnMessageComplete] = (): void => {
      if (fields.length > 0) socket.write(whole, 'latin1');
    };
    if (!onread) socket.on('data', (data: Buffer) => parser.execute(data));
    socket.on('error', () => undefined);
    socket.on('close', () => parser.close());
  });
  announce(server);
}

/** Answers once the body ended: now, or at the end of the loop turn (the edge's way). */
class Answer implements ExchangeSink {
  constructor(
    private readonly exchange: ServerExchange,
    private readonly atTurnEnd: boolean,
  ) {}

  onRequestBody(_chunk: Buffer | null, last: boolean): void {
    if (!last) return;
    if (this.atTurnEnd) {
      pending.push(this);
      if (pending.length === 1) setImmediate(flushPending);
    } else {
      this.write();
    }
  }

  write(): void {
    // As the edge writes a small answer that is all here: head and body in one buffer, one write.
    const exchange = this.exchange;
    exchange.writeWhole(200, 'OK', FIELDS, [ANSWER_BYTES], ANSWER_BYTES.byteLength);
    exchange.end();
  }

  onAborted(): void {}
}

let pending: Answer[] = [];
function flushPending(): void {
  const answers = pending;
  pending = [];
  for (const answer of answers) answer.write();
}

function serveHttp1(atTurnEnd: boolean): void {
  const connections = new ServerConnections({
    onRequest: (exchange) => exchange.attach(new Answer(exchange, atTurnEnd)),
    refusal: () => ({ status: 400, fields: [], body: '' }),
  });
  const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => connections.accept(socket, '127.0.0.1'));
  announce(server);
}

function serveUws(): void {
  const app = uws.App();
  app.any('/*', (res, req) => {
    // The copy the edge did of every field.
    const fields: string[] = [];
    req.forEach((name, value) => fields.push(name, value));
    res.onAborted(() => undefined);
    res.onData((_chunk, last) => {
      if (!last) return;
      res.cork(() => {
        res.writeStatus('200 OK');
        res.writeHeader('content-type', 'application/json');
        res.end(ANSWER);
      });
    });
  });
  app.listen('127.0.0.1', 0, (token) => {
    process.stdout.write(`${JSON.stringify({ port: listenPort(token) })}\n`);
  });
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

function announce(server: ReturnType<typeof createServer>): void {
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`);
  });
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

function ticksOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}
async function runner(): Promise<void> {
  const { values } = parseArgs({ options: { modes: { type: 'string' }, rounds: { type: 'string' }, duration: { type: 'string' }, serve: { type: 'string' } } });
  const modes = (values.modes ?? MODES.join(',')).split(',') as Mode[];
  const rounds = Number(values.rounds ?? 5);
  const durationS = Number(values.duration ?? 3);
  const hz = clockTicks();
  const servers: { mode: Mode; pid: number; port: number; kill: () => void }[] = [];
  for (const mode of modes) {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve', mode], { stdio: ['pipe', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve) => child.stdout.once('data', (data: Buffer) => resolve((JSON.parse(data.toString()) as { port: number }).port)));
    servers.push({ mode, pid: child.pid!, port, kill: () => child.kill() });
  }
  const results = new Map<Mode, number[]>();
  try {
    for (const server of servers) await runLoad({ origin: `http://127.0.0.1:${server.port}`, host: null }, { method: 'POST', size: 1024, shape: 'length' }, 100, 1);
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < servers.length; i++) {
        const server = servers[(i + round) % servers.length]!;
        const before = ticksOf(server.pid);
        const load = await runLoad({ origin: `http://127.0.0.1:${server.port}`, host: null }, { method: 'POST', size: 1024, shape: 'length' }, 100, durationS);
        const us = ((ticksOf(server.pid) - before) * 1e6) / hz / load.requests;
        (results.get(server.mode) ?? results.set(server.mode, []).get(server.mode)!).push(us);
        process.stdout.write(`round ${round + 1} ${server.mode.padEnd(11)} ${load.reqPerSec.toFixed(0).padStart(6)} req/s  ${us.toFixed(1)} µs/req${load.non2xx + load.errors + load.mismatches > 0 ? ' BAD' : ''}\n`);
      }
    }
  } finally {
    for (const server of servers) server.kill();
  }
  for (const [mode, values] of results) {
    const sorted = [...values].sort((a, b) => a - b);
    process.stdout.write(`${mode.padEnd(11)} median ${sorted[sorted.length >> 1]!.toFixed(1)} µs/req (${sorted.map((v) => v.toFixed(1)).join(', ')})\n`);
  }
}

const serve = process.argv.indexOf('--serve');
if (serve !== -1) {
  const mode = process.argv[serve + 1] as Mode;
  if (mode === 'bare') serveBare(false);
  else if (mode === 'bare-onread') serveBare(true);
  else if (mode === 'http1') serveHttp1(false);
  else if (mode === 'http1-turn') serveHttp1(true);
  else serveUws();
} else {
  await runner();
}
