/**
 * uWebSockets.js, loaded only as its native binary.
 *
 * The npm alias we install falls back silently to a slow pure-Node imitation when the binary does not
 * load (wrong Node ABI, missing glibc symbols, UWS_USE_FALLBACK set). Burrow's promises rest on the
 * native server, so we load the binary for this platform ourselves and refuse to run without it.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as UwsTypes from 'uWebSockets.js';

export type Uws = typeof UwsTypes;
export type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, WebSocketBehavior, us_listen_socket, us_socket_context_t } from 'uWebSockets.js';

const require = createRequire(import.meta.url);

function loadNative(): Uws {
  const packageDir = dirname(require.resolve('uWebSockets.js/package.json'));
  const binary = join(
    packageDir,
    'binaries',
    `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`,
  );
  try {
    return require(binary) as Uws;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    process.stderr.write(
      `burrow: the native uWebSockets.js server did not load (${binary}): ${reason}\n` +
        'burrow: refusing to start on the slow fallback. Use Node 20 on linux/darwin x64 or arm64 ' +
        '(glibc 2.28+) and reinstall with `npm ci`.\n',
    );
    process.exit(70);
  }
}

export const uws: Uws = loadNative();

/** The port a listen socket is bound to (useful after listening on port 0). */
export function listenPort(socket: UwsTypes.us_listen_socket): number {
  return uws.us_socket_local_port(socket as unknown as UwsTypes.us_socket);
}

/** uWS's LIBUS_LISTEN_EXCLUSIVE_PORT: exported by the binary, missing from its typings as a value. */
const LISTEN_EXCLUSIVE_PORT = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT?: number }).LIBUS_LISTEN_EXCLUSIVE_PORT ?? 1;

/**
 * Listens on host:port, refusing a port another server holds.
 *
 * By default uWS binds with SO_REUSEPORT: a second server on a taken port starts "successfully" and
 * shares it, and (measured here) a restarted server cannot bind while the old process's connections sit
 * in TIME_WAIT. The exclusive mode binds like any other server (SO_REUSEADDR only): a taken port is an
 * error and a restart binds at once.
 */
export async function listenAlone(
  app: UwsTypes.TemplatedApp,
  host: string,
  port: number,
): Promise<{ socket: UwsTypes.us_listen_socket } | { refused: string }> {
  const listen = app.listen as unknown as (
    host: string,
    port: number,
    options: number,
    cb: (socket: UwsTypes.us_listen_socket | false) => void,
  ) => void;
  const socket = await new Promise<UwsTypes.us_listen_socket | false>((resolve) => listen.call(app, host, port, LISTEN_EXCLUSIVE_PORT, resolve));
  return socket === false ? { refused: `cannot bind ${host}:${port} (in use, or not an address of this machine)` } : { socket };
}
