/**
 * One edge name with several DNS addresses (a cluster behind round-robin DNS, issue 17) is used
 * address by address: an address that refuses is skipped at once for the next, and only the address
 * is pinned, so the TLS server name and the certificate check keep the name (a certificate for
 * another name still fails, named). The name's two A records are the system resolver's answer here, as
 * test/wildcard-dns.ts gives burrow.test one: 127.0.0.2 (nothing listens) and 127.0.0.1 (the edge).
 */
import assert from 'node:assert/strict';
import dns from 'node:dns';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, startEdge, startLocal, tempDirs, type LocalServer } from '../helpers.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';

const NAME = 'failover.test';
const ADDRESSES: dns.LookupAddress[] = [
  { address: '127.0.0.2', family: 4 },
  { address: '127.0.0.1', family: 4 },
];
const freshDir = tempDirs('burrow-dns-addresses-');

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;
const original = dns.lookup;
let local: LocalServer;

before(async () => {
  (dns as unknown as { lookup: unknown }).lookup = function lookup(hostname: string, options: unknown, callback?: LookupCallback): void {
    if (hostname !== NAME) {
      (original as unknown as (...args: unknown[]) => void).call(dns, hostname, options, callback);
      return;
    }
    const done = (typeof options === 'function' ? options : callback) as LookupCallback;
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
    if (all) process.nextTick(done, null, ADDRESSES);
    else process.nextTick(done, null, ADDRESSES[0]!.address, 4);
  };
  local = await startLocal((req, res) => res.end(`local saw ${req.url}`));
});

after(async () => {
  (dns as unknown as { lookup: unknown }).lookup = original;
  await local.close();
});

test('a refusing address is skipped for the next; the certificate is checked against the name', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const pem = readFileSync(ca.cert, 'utf8');
  const right = makeServerCert(dir, 'right', [`*.${NAME}`, NAME], ca);
  const edge = await startEdge({ domain: NAME, tls: { certFile: right.cert, keyFile: right.key } });
  const url = `https://${NAME}:${edge.port}`;
  const account = await createAccount(edge);
  const tunnel = new TunnelClient({ edge: url, token: account.token, routes: new RouteTable(local.port), ca: pem, minBackoffMs: 50, maxBackoffMs: 400 });
  const reconnects: { delayMs: number; edge: string; reason: string }[] = [];
  tunnel.on('reconnecting', (event) => reconnects.push(event));
  try {
    const ready = await tunnel.start();
    assert.equal(ready.edge, `${url} (127.0.0.1)`);
    assert.equal(reconnects.length, 1);
    assert.equal(reconnects[0]!.delayMs, 0);
    assert.equal(reconnects[0]!.edge, `${url} (127.0.0.1)`);
    assert.match(reconnects[0]!.reason, /\(127\.0\.0\.2\) is unreachable \(ECONNREFUSED\)/);
    const response = await request(`https://127.0.0.1:${edge.port}/through`, {
      headers: { host: `${ready.subdomain}.${NAME}:${edge.port}` },
      dispatcher: new Agent({ connect: { ca: pem, servername: `${ready.subdomain}.${NAME}` } }),
    });
    assert.equal(await response.body.text(), 'local saw /through');
  } finally {
    await tunnel.close();
    await edge.close();
  }

  // The same addresses with a certificate for another name: the check is still made against the name.
  const wrong = makeServerCert(dir, 'wrong', ['elsewhere.test'], ca);
  const wrongEdge = await startEdge({ domain: NAME, tls: { certFile: wrong.cert, keyFile: wrong.key } });
  const wrongUrl = `https://${NAME}:${wrongEdge.port}`;
  try {
    const refused = new TunnelClient({ edge: wrongUrl, token: account.token, routes: new RouteTable(local.port), ca: pem });
    await assert.rejects(refused.start(), (error: Error) => {
      assert.match(error.message, new RegExp(`^cannot connect to any edge: ${wrongUrl.replace(/\./g, '\\.')} \\(127\\.0\\.0\\.2\\): ECONNREFUSED; `));
      assert.match(error.message, /\(127\.0\.0\.1\): TLS certificate problem: .*\(ERR_TLS_CERT_ALTNAME_INVALID\)/);
      return true;
    });
  } finally {
    await wrongEdge.close();
  }
});
