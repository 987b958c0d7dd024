/**
 * `burrow edge --trust-proxy` (issue 14, DESIGN.md 5b) on a real edge: forwarded headers and PROXY v2
 * headers are believed from trusted peers only, and the believed client address reaches the local
 * server's X-Forwarded-For, the capture and the API's auth throttling. Untrusted peers are other loopback
 * sources (127.0.0.3), so one machine shows both sides.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { call, createAccount, echo, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One request on a fresh connection from `localAddress`, optionally preceded by a PROXY v2 header. */
async function send(port: number, localAddress: string, head: string[], proxyV2?: { source: string; sourcePort: number }): Promise<RawResponse> {
  const socket = connect({ host: '127.0.0.1', port, localAddress });
  const bytes: Buffer[] = [];
  if (proxyV2 !== undefined) bytes.push(proxyV2Header(proxyV2.source, proxyV2.sourcePort, port));
  bytes.push(Buffer.from(`${head.join('\r\n')}\r\nconnection: close\r\n\r\n`, 'latin1'));
  socket.write(Buffer.concat(bytes));
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer within 5 s: ${JSON.stringify(text)}`));
    }, 5_000);
    const check = (): void => {
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = /\r\ncontent-length: *([0-9]+)/i.exec(text.slice(0, end));
      if (length !== null && text.length - end - 4 >= Number(length[1])) {
        clearTimeout(timer);
        socket.destroy();
        resolve();
      }
    };
    socket.on('data', check);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.on('error', reject);
  });
  const end = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
  return { status: Number(statusLine!.split(' ')[1]), headers, body: text.slice(end + 4) };
}

/** A PROXY protocol v2 header for a TCP over IPv4 connection (what HAProxy or an AWS NLB sends first). */
function proxyV2Header(source: string, sourcePort: number, destinationPort: number): Buffer {
  const signature = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
  const addresses = Buffer.alloc(12);
  source.split('.').forEach((octet, i) => addresses.writeUInt8(Number(octet), i));
  [127, 0, 0, 1].forEach((octet, i) => addresses.writeUInt8(octet, 4 + i));
  addresses.writeUInt16BE(sourcePort, 8);
  addresses.writeUInt16BE(destinationPort, 10);
  // Version 2, PROXY command; AF_INET, STREAM; 12 bytes of addresses.
  return Buffer.concat([signature, Buffer.from([0x21, 0x11, 0x00, 12]), addresses]);
}

const FORGED = ['x-forwarded-for: 203.0.113.9', 'x-forwarded-proto: https', 'x-forwarded-host: hooks.example.com'];

describe('--trust-proxy 127.0.0.1/32', () => {
  let target: TestEdge;
  let owner: TestAccount;
  let local: LocalServer;
  let started: Awaited<ReturnType<typeof startClient>>;

  before(async () => {
    target = await startEdge({ trustProxy: '127.0.0.1/32', authFailureLimit: 2 });
    owner = await createAccount(target, 'PRO');
    local = await startLocal(echo);
    started = await startClient(target, owner.token, local.port);
  });

  after(async () => {
    await started.client.close();
    await local.close();
    await target.close();
  });

  /** The capture of the newest request to `path`. */
  async function captureOf(path: string): Promise<{ client_address: string }> {
    let id = '';
    await waitFor(async () => {
      const list = await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}&limit=20`, { token: owner.token });
      id = (list.json.requests as { id: string; path: string }[]).find((entry) => entry.path === path)?.id ?? '';
      return id !== '';
    }, 5_000, `the capture of ${path}`);
    return (await call(target, 'GET', `/api/v1/requests/${id}`, { token: owner.token })).json;
  }

  test('from a trusted peer: the proxy\'s X-Forwarded-* are believed, the chain is extended with the peer', async () => {
    const response = await send(target.port, '127.0.0.1', ['GET /trusted HTTP/1.1', `host: ${started.host}`, ...FORGED]);
    assert.equal(response.status, 200);
    const seen = JSON.parse(response.body).headers;
    assert.equal(seen['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
    assert.equal(seen['x-forwarded-proto'], 'https');
    assert.equal(seen['x-forwarded-host'], 'hooks.example.com');
    assert.equal((await captureOf('/trusted')).client_address, '203.0.113.9');
  });

  test('from an untrusted peer: forged X-Forwarded-* are ignored, the peer is the client', async () => {
    const response = await send(target.port, '127.0.0.3', ['GET /untrusted HTTP/1.1', `host: ${started.host}`, ...FORGED]);
    assert.equal(response.status, 200);
    const seen = JSON.parse(response.body).headers;
    // As today without --trust-proxy: the chain is passed on extended, proto and host are the edge's own.
    assert.equal(seen['x-forwarded-for'], '203.0.113.9, 127.0.0.3');
    assert.equal(seen['x-forwarded-proto'], 'http');
    assert.equal(seen['x-forwarded-host'], started.host);
    assert.equal((await captureOf('/untrusted')).client_address, '127.0.0.3');
  });

  test('a PROXY v2 header from a trusted peer names the client; that client\'s own X-Forwarded-* are not believed', async () => {
    const response = await send(
      target.port,
      '127.0.0.1',
      ['GET /proxy-v2 HTTP/1.1', `host: ${started.host}`, ...FORGED],
      { source: '198.51.100.7', sourcePort: 40_000 },
    );
    assert.equal(response.status, 200);
    const seen = JSON.parse(response.body).headers;
    assert.equal(seen['x-forwarded-for'], '203.0.113.9, 198.51.100.7');
    assert.equal(seen['x-forwarded-proto'], 'http');
    assert.equal((await captureOf('/proxy-v2')).client_address, '198.51.100.7');
  });

  test('a PROXY v2 header from an untrusted peer is ignored', async () => {
    const response = await send(target.port, '127.0.0.3', ['GET /proxy-v2-untrusted HTTP/1.1', `host: ${started.host}`], { source: '198.51.100.8', sourcePort: 40_001 });
    assert.equal(response.status, 200);
    assert.equal(JSON.parse(response.body).headers['x-forwarded-for'], '127.0.0.3');
    assert.equal((await captureOf('/proxy-v2-untrusted')).client_address, '127.0.0.3');
  });

  test('auth throttling counts the real client behind the proxy: one guesser does not lock out the rest', async () => {
    const guess = (from: string) =>
      send(target.port, '127.0.0.1', ['GET /api/v1/tunnels HTTP/1.1', `host: localhost:${target.port}`, 'authorization: Bearer wrong', `x-forwarded-for: ${from}`]);
    assert.equal((await guess('203.0.113.50')).status, 401);
    assert.equal((await guess('203.0.113.50')).status, 401);
    assert.equal((await guess('203.0.113.50')).status, 429, 'the guesser is blocked');
    assert.equal((await guess('203.0.113.51')).status, 401, 'another client behind the same proxy is not');
    const colleague = await send(target.port, '127.0.0.1', [
      'GET /api/v1/tunnels HTTP/1.1',
      `host: localhost:${target.port}`,
      `authorization: Bearer ${owner.token}`,
      'x-forwarded-for: 203.0.113.52',
    ]);
    assert.equal(colleague.status, 200);
  });
});

describe('without --trust-proxy', () => {
  let target: TestEdge;
  let owner: TestAccount;
  let local: LocalServer;
  let started: Awaited<ReturnType<typeof startClient>>;

  before(async () => {
    target = await startEdge();
    owner = await createAccount(target, 'PRO');
    local = await startLocal(echo);
    started = await startClient(target, owner.token, local.port);
  });

  after(async () => {
    await started.client.close();
    await local.close();
    await target.close();
  });

  test('nobody is trusted, not even loopback: forwarded headers and PROXY v2 headers are ignored', async () => {
    const response = await send(target.port, '127.0.0.1', ['GET /plain HTTP/1.1', `host: ${started.host}`, ...FORGED], { source: '198.51.100.9', sourcePort: 40_002 });
    const seen = JSON.parse(response.body).headers;
    assert.equal(seen['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
    assert.equal(seen['x-forwarded-proto'], 'http');
    assert.equal(seen['x-forwarded-host'], started.host);
  });
});
