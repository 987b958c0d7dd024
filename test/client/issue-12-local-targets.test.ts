/**
 * Issue 12, finding 7: `burrow http [scheme://][host:]port`. `localhost` reaches a server listening on
 * ::1 only (this machine's resolver gives only 127.0.0.1), an IPv6 address can be named, an https://
 * target works, a self-signed certificate only with --local-insecure, and routes take the same forms.
 * The real client against a frame-level edge (frame-edge.ts) and real Node servers; 192.168.1.5 and
 * other foreign hosts are parsed, never dialled.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { WebSocketServer } from 'ws';
import { localTarget, parseRoute, parseTarget, RouteTable } from '../../src/client/routes.js';
import { ResetCode } from '../../src/protocol/constants.js';
import { tempDirs, waitFor } from '../helpers.js';
import { FrameEdge } from './frame-edge.js';

const freshDir = tempDirs('burrow-issue-12-targets-');

test('targets parse in every form of [scheme://][host:]port', () => {
  const cases: [string, string, string][] = [
    ['3000', 'http://localhost:3000', 'localhost:3000'],
    ['localhost:3000', 'http://localhost:3000', 'localhost:3000'],
    ['192.168.1.5:8080', 'http://192.168.1.5:8080', '192.168.1.5:8080'],
    ['[::1]:3000', 'http://[::1]:3000', '[::1]:3000'],
    ['http://localhost:3000', 'http://localhost:3000', 'localhost:3000'],
    ['http://localhost:3000/', 'http://localhost:3000', 'localhost:3000'],
    ['https://localhost:8443', 'https://localhost:8443', 'localhost:8443'],
    ['https://dev.test', 'https://dev.test:443', 'dev.test:443'],
    ['http://127.0.0.1:80', 'http://127.0.0.1:80', '127.0.0.1:80'],
  ];
  for (const [text, origin, authority] of cases) {
    const target = parseTarget(text);
    assert.ok(typeof target !== 'string', `${text}: ${String(target)}`);
    assert.equal(target.origin, origin, text);
    assert.equal(target.authority, authority, text);
  }
  const v6 = parseTarget('[::1]:3000');
  assert.ok(typeof v6 !== 'string' && v6.host === '::1');
  for (const bad of ['localhost', '0', '70000', 'ftp://localhost:21', 'http://localhost:3000/app', 'http://user:pw@localhost:3000', 'local host:3000', 'localhost:0', '']) {
    const result = parseTarget(bad);
    assert.equal(typeof result, 'string', `"${bad}" is refused`);
    assert.match(result as string, /target|port|path|user|http/, bad);
  }
  const route = parseRoute('/api=https://localhost:8443');
  assert.ok(typeof route !== 'string' && route.prefix === '/api' && route.target.origin === 'https://localhost:8443');
  const byPort = parseRoute('/hooks/=4000');
  assert.ok(typeof byPort !== 'string' && byPort.prefix === '/hooks' && byPort.target.origin === 'http://localhost:4000');
  assert.match(parseRoute('api=4000') as string, /must start with/);
  assert.match(parseRoute('/api=nope') as string, /not a target/);
});

function answer(label: string): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => res.end(`${label} ${req.headers.host}`);
}

async function listen(server: Server, host: string): Promise<number> {
  server.listen(0, host);
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

test('localhost reaches a server listening on ::1 only, for HTTP and WebSocket; [::1] can be named', async () => {
  const server = createServer(answer('v6'));
  const sockets = new WebSocketServer({ server });
  sockets.on('connection', (socket) => socket.send('v6 socket'));
  const port = await listen(server, '::1');
  const edge = await FrameEdge.start();
  const client = await edge.client(localTarget(port), { routes: new RouteTable(localTarget(port), [{ prefix: '/named', port, target: localTarget(port, '::1') }]) });
  try {
    const viaLocalhost = await edge.request('GET', '/', ['host', 'frames.localhost']);
    assert.equal(viaLocalhost.ending, 'end', viaLocalhost.resetMessage);
    assert.equal(viaLocalhost.body.toString(), 'v6 frames.localhost');
    const viaAddress = await edge.request('GET', '/named', ['host', 'frames.localhost']);
    assert.equal(viaAddress.body.toString(), 'v6 frames.localhost');
    const id = edge.openUpgrade('/live', ['host', 'frames.localhost', 'Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version', '13']);
    await waitFor(() => edge.upgrades.has(id), 5_000, 'the WebSocket answer');
    assert.equal(edge.upgrades.get(id)!.status, 101);
  } finally {
    await client.close();
    await edge.close();
    sockets.close();
    server.closeAllConnections();
    server.close();
  }
});

test('localhost still reaches a server on 127.0.0.1 only', async () => {
  const server = createServer(answer('v4'));
  const port = await listen(server, '127.0.0.1');
  const edge = await FrameEdge.start();
  const client = await edge.client(localTarget(port));
  try {
    for (let i = 0; i < 3; i++) {
      const result = await edge.request('GET', '/', ['host', 'frames.localhost']);
      assert.equal(result.body.toString(), 'v4 frames.localhost');
    }
  } finally {
    await client.close();
    await edge.close();
    server.closeAllConnections();
    server.close();
  }
});

test('an https:// target with a self-signed certificate: refused with a hint, accepted with --local-insecure', async () => {
  const dir = freshDir();
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=localhost'], { stdio: 'ignore' });
  const server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, answer('tls'));
  const port = await listen(server, '127.0.0.1');
  const target = parseTarget(`https://localhost:${port}`);
  assert.ok(typeof target !== 'string');
  const edge = await FrameEdge.start();
  try {
    const strict = await edge.client(target);
    const refused = await edge.request('GET', '/', ['host', 'frames.localhost']);
    assert.equal(refused.ending, 'reset');
    assert.ok(refused.resetCode === ResetCode.LOCAL_UNREACHABLE || refused.resetCode === ResetCode.LOCAL_ERROR);
    assert.match(refused.resetMessage, new RegExp(`^local server at https://localhost:${port}: .*--local-insecure`));
    await strict.close();

    const insecure = await edge.client(target, { localInsecure: true });
    const accepted = await edge.request('GET', '/', ['host', 'frames.localhost']);
    assert.equal(accepted.ending, 'end', accepted.resetMessage);
    assert.equal(accepted.body.toString(), 'tls frames.localhost');
    await insecure.close();
  } finally {
    await edge.close();
    server.closeAllConnections();
    server.close();
  }
});
