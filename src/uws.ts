/**
 * uWebSockets.js, loaded only as its native binary.
 *
 * The npm alias we install falls back silently to a slow pure-Node imitation when the binary does not
 * load (wrong Node ABI, missing glibc symbols, UWS_USE_FALLBACK set). Burrow's promises rest on the
 * native server, so we load the binary for this platform ourselves and refuse to run without it.
 */
import { createRequire } from 'node:module';
import { connect } from 'node:net';
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

/**
 * Listens on host:port, refusing a port another server is listening on.
 *
 * uWS binds with SO_REUSEPORT, so a second server on a taken port would start "successfully" and share
 * it. Its exclusive mode drops SO_REUSEPORT but then a restart cannot bind while the previous process's
 * connections sit in TIME_WAIT (a minute). So: keep uWS's own bind, and first try to connect to the
 * port: if something accepts, it is taken.
 */
export async function listenAlone(app: UwsTypes.TemplatedApp, host: string, port: number): Promise<UwsTypes.us_listen_socket | false> {
  if (port !== 0 && (await somethingListens(host, port))) return false;
  return new Promise((resolve) => app.listen(host, port, resolve));
}

function somethingListens(host: string, port: number): Promise<boolean> {
  const target = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = connect({ host: target, port });
    socket.setTimeout(1_000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}
