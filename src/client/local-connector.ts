/**
 * How the client dials a local target: undici's own connector, plus two things it lacks here.
 *
 * - `localhost` means both loopbacks. Many resolvers (this machine's /etc/hosts among them) give only
 *   127.0.0.1, while dev servers often listen on ::1 only; so `localhost` resolves to 127.0.0.1 and ::1
 *   and Node's autoSelectFamily tries the second when the first is refused.
 * - undici 7 (7.30.2, the newest undici that runs on Node 20) crashes the process with
 *   `AssertionError: assert(!this.paused)` in Parser.finish when a socket ends, resets or closes while
 *   its HTTP/1 parser is paused for backpressure: exactly what a download from a server that closes
 *   after each response (python's http.server) does when the tunnel is slower than the local server.
 *   undici fixed it in 8.6 (nodejs/undici#5474; Node >= 22 only). Until then each socket gets the same
 *   repair as the fix, in listeners that run before undici's own: the paused parser is resumed and the
 *   socket's buffered bytes are parsed, so a whole body completes and a short one fails with undici's
 *   content-length or parser error instead of the assertion. Backpressure is advisory at that point:
 *   the bytes are already in memory and the stream queues them within its credit.
 * - A connection reset in the middle of a body without a length is an error, not the body's end (undici
 *   takes it for the end, for macOS's sake): a cut body must never pass for a whole one.
 */
import type { LookupAddress } from 'node:dns';
import type { Socket } from 'node:net';
import { buildConnector } from 'undici';
import type { LocalTarget } from './routes.js';

type Connect = buildConnector.connector;
type Callback = buildConnector.Callback;

/** `localhost` is both loopbacks, whatever the resolver says; tried in turn (autoSelectFamily). */
const LOOPBACKS: LookupAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/** A dns.lookup for `localhost` that gives both loopback addresses (net.connect's `lookup` option). */
export function loopbackLookup(
  _hostname: string,
  options: { all?: boolean } | number | undefined,
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
): void {
  if (typeof options === 'object' && options !== null && options.all === true) callback(null, LOOPBACKS);
  else callback(null, LOOPBACKS[0]!.address, 4);
}

/** Socket options for `target`: `localhost` on both loopbacks; certificates checked unless `insecure`. */
export function dialOptions(target: LocalTarget, insecure: boolean): { rejectUnauthorized: boolean; lookup?: typeof loopbackLookup; autoSelectFamily?: boolean } {
  return target.host === 'localhost' ? { rejectUnauthorized: !insecure, lookup: loopbackLookup, autoSelectFamily: true } : { rejectUnauthorized: !insecure };
}

export function localConnector(target: LocalTarget, insecure: boolean): Connect {
  const base = buildConnector({ ...dialOptions(target, insecure), timeout: 10_000 } as buildConnector.BuildOptions);
  return (options, callback) =>
    base(options, ((error: Error | null, socket: Socket | null) => {
      if (error === null && socket !== null) guardPausedParser(socket);
      (callback as (error: Error | null, socket: Socket | null) => void)(error, socket);
    }) as Callback);
}

// ---- the paused-parser repair (undici 7) ---------------------------------------------------------------

interface H1Parser {
  paused: boolean;
  statusCode: number;
  shouldKeepAlive: boolean;
  ptr: number | null;
  llhttp: { llhttp_resume(ptr: number): void };
  execute(data: Buffer): void;
}

const EMPTY = Buffer.alloc(0);
let parserKey: symbol | null = null;

function parserOf(socket: Socket): H1Parser | null {
  if (parserKey === null) {
    parserKey = Object.getOwnPropertySymbols(socket).find((key) => key.description === 'parser') ?? null;
    if (parserKey === null) return null;
  }
  const parser = (socket as unknown as Record<symbol, unknown>)[parserKey] as H1Parser | null | undefined;
  if (parser === null || parser === undefined || typeof parser.execute !== 'function' || typeof parser.llhttp?.llhttp_resume !== 'function') return null;
  return parser;
}

/** Registered before undici's listeners, so it runs before undici's Parser.finish. */
function guardPausedParser(socket: Socket): void {
  const drain = (): void => drainPausedParser(socket);
  socket.on('end', drain);
  socket.on('close', drain);
  socket.on('error', (error: Error & { code?: string }) => {
    drainPausedParser(socket);
    if (error.code !== 'ECONNRESET') return;
    // undici takes a reset during a body without a length for its end (a macOS quirk it allows for),
    // which would pass a cut body off as whole. A reset mid-response is an error: undici then fails
    // the request with ECONNRESET, and the stream is reset.
    const parser = parserOf(socket);
    if (parser !== null && parser.statusCode >= 200) parser.shouldKeepAlive = true;
  });
}

/** nodejs/undici#5474's repair: resume and parse what the socket still holds until it is empty. */
function drainPausedParser(socket: Socket): void {
  const parser = parserOf(socket);
  if (parser === null || !parser.paused || parser.ptr === null) return;
  let data: Buffer;
  do {
    parser.llhttp.llhttp_resume(parser.ptr);
    parser.paused = false;
    data = (socket.read() as Buffer | null) ?? EMPTY;
    parser.execute(data);
  } while (parser.paused && data.length > 0 && parser.ptr !== null);
  if (parser.paused && parser.ptr !== null) {
    parser.llhttp.llhttp_resume(parser.ptr);
    parser.paused = false;
  }
}
