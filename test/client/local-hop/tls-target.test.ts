/**
 * An https:// target through node:tls: a self-signed certificate is refused as LOCAL_UNREACHABLE with a
 * message naming the target and `--local-insecure`, and accepted with it; a certificate from a CA the
 * machine does not know is refused the same way; keep-alive works over TLS (counted by the server).
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
  const server = createServer({ cert: readFileSync(pem.cert), key: readFileSync(pem.key) }, (req, res) => res.end(`tls ${req.url}`));
  server.on('secureConnection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
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
