/**
 * An https:// target through node:tls: a self-signed certificate is refused as LOCAL_UNREACHABLE with a
 * message naming the target and `--local-insecure`, and accepted with it; a certificate from a CA the
 * machine does not know is refused the same way; keep-alive works over TLS (counted by the server); big
 * answers on several TLS connections at once, read through the process's shared read buffer, arrive
 * whole, each its own bytes.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { LocalHop } from '../../../src/client/local-hop/pool.js';
import { parseTarget, type LocalTarget } from '../../../src/client/routes.js';
import { ResetCode } from '../../../src/protocol/constants.js';
import { tempDirs } from '../../helpers.js';
import { makeCa, makeServerCert, type Pem } from '../../tls-fixtures.js';
import { send } from './record.js';

const freshDir = tempDirs('burrow-local-hop-tls-');
const HOST = ['Host', 'app.example'];

let selfSigned: Server;
let caSigned: Server;
let connections = 0;

async function serve(pem: Pem): Promise<Server> {
  const server = createServer({ cert: readFileSync(pem.cert), key: readFileSync(pem.key) }, (req, res) => {
    const big = /^\/big\/(\d+)\/(length|chunked)$/.exec(req.url ?? '');
    if (big === null) {
      res.end(`tls ${req.url}`);
      return;
    }
    const body = bigBody(Number(big[1]));
    if (big[2] === 'length') res.setHeader('content-length', body.length);
    // In pieces, so the answer spans many TLS records and reads.
    for (let at = 0; at < body.length; at += 50_000) res.write(body.subarray(at, at + 50_000));
    res.end();
  });
  server.on('secureConnection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

/** 1 MiB whose bytes depend on `seed`: answers that a shared read buffer mixed up would not match. */
function bigBody(seed: number): Buffer {
  const body = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < body.length; i++) body[i] = (i * seed + (i >> 10)) & 0xff;
  return body;
}

function targetOf(server: Server): LocalTarget {
  const target = parseTarget(`https://localhost:${(server.address() as AddressInfo).port}`);
  assert.ok(typeof target !== 'string');
  return target;
}

before(async () => {
  const dir = freshDir();
  selfSigned = await serve(makeServerCert(dir, 'self', ['localhost'], null));
  caSigned = await serve(makeServerCert(dir, 'signed', ['localhost'], makeCa(dir, 'unknown-ca')));
});

after(() => {
  for (const server of [selfSigned, caSigned]) {
    server.closeAllConnections();
    server.close();
  }
});

for (const [name, server] of [['self-signed', () => selfSigned], ['signed by an unknown CA', () => caSigned]] as const) {
  test(`a ${name} certificate: LOCAL_UNREACHABLE naming --local-insecure`, async () => {
    const target = targetOf(server());
    const hop = new LocalHop([target]);
    try {
      const outcome = await send(hop.pool(target), { method: 'GET', target: '/', fields: HOST });
      assert.equal(outcome.error?.resetCode, ResetCode.LOCAL_UNREACHABLE);
      assert.match(outcome.error!.message, new RegExp(`^local server at ${target.origin.replace(/[.]/g, '\\.')}: .*--local-insecure accepts it`));
    } finally {
      hop.close();
    }
  });
}

test('with --local-insecure the self-signed target answers, and one TLS connection carries many requests', async () => {
  const target = targetOf(selfSigned);
  const hop = new LocalHop([target], { insecure: true });
  const before = connections;
  try {
    for (let i = 0; i < 5; i++) {
      const outcome = await send(hop.pool(target), { method: 'GET', target: `/r${i}`, fields: HOST });
      assert.equal(outcome.error, null, outcome.error?.message);
      assert.equal(outcome.body.toString(), `tls /r${i}`);
    }
    assert.equal(connections - before, 1);
  } finally {
    hop.close();
  }
});

test('big answers over several TLS connections at once arrive whole: each its own bytes, with content-length and chunked', async () => {
  const target = targetOf(selfSigned);
  const hop = new LocalHop([target], { insecure: true });
  try {
    const seeds = [3, 5, 7, 11];
    const outcomes = await Promise.all(seeds.map((seed, i) => send(hop.pool(target), { method: 'GET', target: `/big/${seed}/${i % 2 === 0 ? 'length' : 'chunked'}`, fields: HOST })));
    outcomes.forEach((outcome, i) => {
      assert.equal(outcome.error, null, outcome.error?.message);
      assert.ok(outcome.body.equals(bigBody(seeds[i]!)), `the answer of seed ${seeds[i]} differs`);
    });
  } finally {
    hop.close();
  }
});
