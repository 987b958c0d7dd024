/**
 * Issue 27, item 2: the TCP connections of the tunnels `burrow start` runs are recorded in its local
 * inspector, as the edge records them. A real edge with `--tcp-ports`, the real CLI (`burrow start`
 * with an http and a tcp tunnel in burrow.yml), a real local TCP server and real Chromium: two public
 * connections (one closed cleanly by both sides, one cut by the local server) are listed in the
 * inspector's JSON with the edge's record ids, the bytes each way and how they ended, found by the
 * filter, shown on the page as TCP connections with an accessible name and no replay; a replay or curl
 * of one is refused in the spec's error shape; and a restarted `burrow start` shows them again from the
 * edge's history under the tcp tunnel (asked for as `tcp:PORT`, not the public host's first label).
 * Likewise a TLS passthrough tunnel's connection (an HTTPS edge, the client library as `burrow start`
 * binds it): a TLS row with the edge's id and bytes, and in a new inspector's history under its name.
 */
import '../wildcard-dns.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, freePortRange, spawnCli, startEdge, startLocal, tempDir, waitFor, type LocalServer, type SpawnedProcess, type TestAccount, type TestEdge } from '../helpers.js';
import { useForEdgeRequests } from '../../src/cli/edge-ca.js';
import { localTarget, RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { Inspector, recordsName } from '../../src/inspector/server.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { openInspectorPage } from './browser.js';

interface Row {
  id: string;
  kind: string;
  method: string;
  path: string;
  status: number;
  error: string | null;
  request_size: number;
  response_size: number;
  client_address: string | null;
  tunnel: string | null;
  source: string;
  latency_ms: number;
}

/** Bytes the cut connection sends; the local server cuts it once it has them all, answering nothing. */
const CUT_AFTER = 3000;

let edge: TestEdge;
let account: TestAccount;
let web: LocalServer;
let local: Server;
let remotePort: number;
let dir: string;
let env: Record<string, string>;
let run: SpawnedProcess | null = null;

before(async () => {
  const ports = await freePortRange(2);
  remotePort = Number(ports.split('-')[0]);
  edge = await startEdge({ tcp: { ports } });
  account = await createAccount(edge, 'PRO');
  web = await startLocal((_req, res) => res.end('web'));
  // A connection starting with "c" is reset (RST) after CUT_AFTER bytes; any other is answered with twice the
  // bytes it sent once its client ends.
  local = createServer({ allowHalfOpen: true }, (socket) => {
    let received = 0;
    let cut = false;
    socket.on('data', (chunk: Buffer) => {
      if (received === 0) cut = chunk[0] === 0x63;
      received += chunk.byteLength;
      if (cut && received >= CUT_AFTER) socket.resetAndDestroy();
    });
    socket.on('end', () => socket.end(Buffer.alloc(received * 2, 'x')));
    socket.on('error', () => undefined);
  });
  local.listen(0, '127.0.0.1');
  await once(local, 'listening');
  dir = tempDir('burrow-inspector-tcp-');
  writeFileSync(
    join(dir, 'burrow.yml'),
    [
      `edge: ${edge.url}`,
      'token_env: TCP_RECORDS_TOKEN',
      'inspect: 0',
      'tunnels:',
      '  web:',
      `    http: ${web.port}`,
      '    subdomain: web-records-27',
      '  db:',
      `    tcp: 127.0.0.1:${(local.address() as AddressInfo).port}`,
      `    remote_port: ${remotePort}`,
      '',
    ].join('\n'),
  );
  env = { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '', BURROW_TOKEN: '', BURROW_EDGE: '', TCP_RECORDS_TOKEN: account.token };
});
after(async () => {
  run?.child.kill('SIGKILL');
  local.close();
  await web.close();
  await edge.close();
});

/** `burrow start --all` until both tunnels are live; its inspector's URL. */
async function start(): Promise<string> {
  run = await spawnCli(['start', '--all'], env, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){2}/, 30_000, dir);
  assert.match(run.output(), new RegExp(`^Forwarding tcp://localhost:${remotePort} -> 127\\.0\\.0\\.1:[0-9]+$`, 'm'));
  return /^Inspector (http:\/\/\S+)$/m.exec(run.output())![1]!;
}

async function stop(): Promise<void> {
  run!.child.kill('SIGINT');
  assert.equal(await run!.exited, 0, run!.output());
  run = null;
}

/** One public connection: sends `payload` (ending it unless the server cuts first); its local port and the bytes back. */
function connection(payload: Buffer, end: boolean): Promise<{ clientPort: number; received: number }> {
  return new Promise((resolve, reject) => {
    let received = 0;
    const socket = connect({ port: remotePort, host: '127.0.0.1', allowHalfOpen: true }, () => {
      if (end) socket.end(payload);
      else socket.write(payload);
    });
    const clientPort = (): number => socket.localPort!;
    let port = 0;
    socket.once('connect', () => (port = clientPort()));
    socket.on('data', (chunk: Buffer) => (received += chunk.byteLength));
    // The edge ends a cut connection with a FIN: this side ends too, and the socket closes.
    socket.on('end', () => socket.end());
    socket.on('error', () => undefined);
    socket.on('close', () => (port === 0 ? reject(new Error('never connected')) : resolve({ clientPort: port, received })));
  });
}

async function inspectorJson(base: string, path: string): Promise<any> {
  return (await request(`${base}${path}`)).body.json();
}

async function tcpRows(base: string): Promise<Row[]> {
  return ((await inspectorJson(base, '/api/requests?summary=1&tunnel=db')) as { requests: Row[] }).requests;
}

let clean: { clientPort: number; received: number };
let cut: { clientPort: number; received: number };
let ids: string[] = [];

test('two TCP connections through `burrow start` are rows of its inspector, with the edge record ids, bytes each way and how they ended', async () => {
  const inspector = await start();
  assert.equal((await call(edge, 'GET', '/', { host: `web-records-27.localhost:${edge.port}` })).text, 'web');

  clean = await connection(Buffer.alloc(100, 'a'), true);
  assert.equal(clean.received, 200);
  cut = await connection(Buffer.alloc(CUT_AFTER, 'c'), false);
  assert.equal(cut.received, 0);

  await waitFor(async () => (await tcpRows(inspector)).length === 2, 10_000, 'two connection rows');
  const rows = await tcpRows(inspector);
  const byClient = new Map(rows.map((row) => [row.path, row]));
  const cleanRow = byClient.get(`127.0.0.1:${clean.clientPort}`);
  const cutRow = byClient.get(`127.0.0.1:${cut.clientPort}`);
  assert.ok(cleanRow !== undefined && cutRow !== undefined, JSON.stringify(rows));
  for (const row of [cleanRow, cutRow]) {
    assert.equal(row.kind, 'tcp');
    assert.equal(row.method, 'TCP');
    assert.equal(row.status, 0);
    assert.equal(row.tunnel, 'db');
    assert.equal(row.client_address, '127.0.0.1');
    assert.equal(row.source, 'live');
    assert.match(row.id, /^req_/);
  }
  assert.deepEqual([cleanRow.request_size, cleanRow.response_size, cleanRow.error], [100, 200, null]);
  assert.deepEqual([cutRow.request_size, cutRow.response_size, cutRow.error], [CUT_AFTER, 0, 'LOCAL_UNREACHABLE']);
  ids = [cleanRow.id, cutRow.id];

  // The same records as the edge's: same ids, same end reasons.
  const edgeRecords = async () => (await call(edge, 'GET', `/api/v1/requests?subdomain=tcp:${remotePort}`, { token: account.token })).json?.requests ?? [];
  await waitFor(async () => (await edgeRecords()).length === 2, 10_000, "the edge's two records");
  const edgeById = new Map(((await edgeRecords()) as { id: string; error: string | null; path: string }[]).map((record) => [record.id, record]));
  assert.deepEqual([edgeById.get(cleanRow.id)?.path, edgeById.get(cleanRow.id)?.error], [cleanRow.path, null]);
  assert.deepEqual([edgeById.get(cutRow.id)?.path, edgeById.get(cutRow.id)?.error], [cutRow.path, 'LOCAL_UNREACHABLE']);

  // Found by the filter: "tcp" finds both and not the HTTP request; the client's port finds one.
  const found = async (q: string) => ((await inspectorJson(inspector, `/api/requests?summary=1&q=${encodeURIComponent(q)}`)) as { requests: Row[] }).requests.map((row) => row.id).sort();
  assert.deepEqual(await found('tcp'), [...ids].sort());
  assert.deepEqual(await found(`127.0.0.1:${cut.clientPort}`), [cutRow.id]);
  assert.deepEqual(await found('local_unreachable'), [cutRow.id]);
  const detail = await inspectorJson(inspector, `/api/requests/${cutRow.id}`);
  assert.deepEqual([detail.request.body_size, detail.response.body_size, detail.request.headers], [CUT_AFTER, 0, []]);

  // Nothing to replay or copy as curl: refused in the spec's error shape.
  for (const [method, path] of [['POST', `/api/requests/${cleanRow.id}/replay`], ['GET', `/api/requests/${cleanRow.id}/curl`]] as const) {
    const refused = await request(`${inspector}${path}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : null });
    assert.equal(refused.statusCode, 400, path);
    const body = (await refused.body.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'INVALID_REQUEST');
    assert.match(body.error.message, /TCP connection's record: its bytes are not kept/);
  }
  const har = (await inspectorJson(inspector, '/api/har')) as { log: { entries: { request: { method: string } }[] } };
  assert.deepEqual(har.log.entries.map((entry) => entry.request.method), ['GET'], 'HAR has the HTTP request only');
});

test("the inspector's page shows the connections as TCP rows with an accessible name, their bytes and end, and offers no replay", async () => {
  const inspector = /^Inspector (http:\/\/\S+)$/m.exec(run!.output())![1]!;
  const { browser, page, problems } = await openInspectorPage(inspector);
  try {
    const row = page.getByRole('row', { name: new RegExp(`^TCP db ?127\\.0\\.0\\.1:${clean.clientPort} ?connection closed `) });
    await row.waitFor();
    const cutRow = page.getByRole('row', { name: new RegExp(`^TCP db ?127\\.0\\.0\\.1:${cut.clientPort} ?connection local unreachable `) });
    await cutRow.waitFor();
    await cutRow.click();
    await page.getByRole('heading', { name: `TCP 127.0.0.1:${cut.clientPort}`, exact: true }).waitFor();
    const facts = page.locator('#d-facts');
    assert.equal(await facts.locator('#d-bytes-in').innerText(), '2.9 KiB');
    assert.equal(await facts.locator('#d-bytes-out').innerText(), '0 B');
    assert.match(await facts.locator('#d-ended').innerText(), /^LOCAL_UNREACHABLE: /);
    assert.equal(await page.getByRole('button', { name: 'Replay', exact: true }).isVisible(), false, 'no replay');
    assert.equal(await page.getByRole('article', { name: 'Request' }).isVisible(), false, 'no request pane');

    await page.getByRole('searchbox', { name: /^Filter requests/ }).fill(`127.0.0.1:${clean.clientPort}`);
    await cutRow.waitFor({ state: 'hidden' });
    assert.equal(await row.isVisible(), true);
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
  }
});

test("a restarted `burrow start` shows the tcp tunnel's past connections from the edge's history, under that tunnel", async () => {
  await stop();
  const inspector = await start();
  await waitFor(async () => (await tcpRows(inspector)).length === 2, 10_000, "the tcp tunnel's history").catch(async (error: Error) => {
    throw new Error(`${error.message}: ${JSON.stringify((await inspectorJson(inspector, '/api/status')).tunnels)}`);
  });
  const rows = await tcpRows(inspector);
  assert.deepEqual(rows.map((row) => row.id).sort(), [...ids].sort());
  for (const row of rows) {
    assert.deepEqual([row.kind, row.method, row.source, row.tunnel], ['tcp', 'TCP', 'edge', 'db']);
  }
  assert.equal(rows.find((row) => row.id === ids[1])?.error, 'LOCAL_UNREACHABLE');
  // The bytes each way come with the edge's detail.
  const detail = await inspectorJson(inspector, `/api/requests/${ids[1]}`);
  assert.deepEqual([detail.kind, detail.request.body_size, detail.response.body_size], ['tcp', CUT_AFTER, 0]);
  // The http tunnel's history is its own: no connection among it.
  const webRows = ((await inspectorJson(inspector, '/api/requests?summary=1&tunnel=web')) as { requests: Row[] }).requests;
  assert.deepEqual(webRows.map((row) => `${row.method} ${row.path}`), ['GET /']);
  const refused = await request(`${inspector}/api/requests/${ids[0]}/replay`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(refused.statusCode, 400);
  assert.equal(((await refused.body.json()) as { error: { code: string } }).error.code, 'INVALID_REQUEST');
  await stop();
});

test("the name a tunnel's records are asked for: tcp:PORT for a tcp tunnel, the name for a tls or http one", () => {
  assert.equal(recordsName('tcp://localhost:20042'), 'tcp:20042');
  assert.equal(recordsName('tls://secure.example.com:443'), 'secure');
  assert.equal(recordsName('https://shop.example.com'), 'shop');
});

test("a TLS passthrough tunnel's connection is a TLS row with the edge's id and bytes, and comes back in a new inspector's history", async () => {
  const dir = tempDir('burrow-inspector-tls-');
  const edgeCa = makeCa(dir, 'edge-ca');
  const localCa = makeCa(dir, 'local-ca');
  const edgeCert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], edgeCa);
  const name = `secure-records-27.${TEST_DOMAIN}`;
  const localCert = makeServerCert(dir, 'local', [name], localCa);
  const tlsEdge = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: edgeCert.cert, keyFile: edgeCert.key } });
  const owner = await createAccount(tlsEdge, 'PRO');
  const server = createHttpsServer({ cert: readFileSync(localCert.cert), key: readFileSync(localCert.key) }, (_req, res) => res.end('secure answer'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const edgeUrl = `https://${TEST_DOMAIN}:${tlsEdge.port}`;
  const ca = readFileSync(edgeCa.cert, 'utf8');
  // The inspector's calls to the edge (history, details) trust the edge's CA, as the CLI's do.
  useForEdgeRequests(ca, []);
  const client = new TunnelClient({ edge: edgeUrl, token: owner.token, ca, routes: new RouteTable(localTarget(1)), bindOnly: true, recordLimit: 1024 * 1024 });
  const { tunnel, started } = client.bind({ kind: 'tls', routes: new RouteTable(localTarget((server.address() as AddressInfo).port, '127.0.0.1')), subdomain: 'secure-records-27' });
  const inspector = await Inspector.start({ port: 0, edge: edgeUrl, token: owner.token });
  inspector.attach(tunnel, 'secure');
  let fresh: Inspector | null = null;
  try {
    await client.start();
    assert.equal((await started).publicUrl, `tls://${name}:${tlsEdge.port}`);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: tlsEdge.port, servername: name, ca: readFileSync(localCa.cert) }, () => socket.write(`GET / HTTP/1.1\r\nHost: ${name}\r\nConnection: close\r\n\r\n`));
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(answer, /secure answer$/);
    const rows = async (base: string) => ((await inspectorJson(base, '/api/requests?summary=1&tunnel=secure')) as { requests: Row[] }).requests;
    await waitFor(async () => (await rows(inspector.url)).length === 1, 10_000, 'the TLS row');
    const [row] = await rows(inspector.url);
    assert.deepEqual([row!.kind, row!.method, row!.status, row!.client_address, row!.source], ['tls', 'TLS', 0, '127.0.0.1', 'live']);
    assert.ok(row!.request_size > 0 && row!.response_size > 0, JSON.stringify(row));
    const refused = await request(`${inspector.url}/api/requests/${row!.id}/replay`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(refused.statusCode, 400);
    assert.match(((await refused.body.json()) as { error: { message: string } }).error.message, /TLS connection's record/);

    // A new inspector asks the edge for the tunnel's records under its name, and finds this one.
    fresh = await Inspector.start({ port: 0, edge: edgeUrl, token: owner.token });
    fresh.attach(tunnel, 'secure');
    await waitFor(async () => (await rows(fresh!.url)).length === 1, 10_000, "the TLS tunnel's history");
    const [past] = await rows(fresh.url);
    assert.deepEqual([past!.id, past!.kind, past!.source, past!.error], [row!.id, 'tls', 'edge', null]);
    // Its detail is the edge's record: the same client and bytes each way as the live row.
    const record = await inspectorJson(fresh.url, `/api/requests/${row!.id}`);
    assert.deepEqual([record.method, record.path, record.request.body_size, record.response.body_size], ['TLS', row!.path, row!.request_size, row!.response_size]);
  } finally {
    fresh?.close();
    inspector.close();
    await client.close('test over');
    server.closeAllConnections();
    server.close();
    await tlsEdge.close();
  }
});
