/**
 * The HTTPS phase's Node floor (bench/e2e/relay.ts with TLS): two relays, the front terminating HTTPS and
 * speaking TLS to the back, the back speaking plain TCP to the benchmark's target. Checked here with real
 * processes: answers through the pair equal the target's own, byte for byte, over one kept-alive
 * connection; the front presents the phase's certificate; a bad argument list is refused.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Agent, buildConnector, request } from 'undici';
import { payload } from '../../bench/e2e/payloads.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';

const TARGET = fileURLToPath(new URL('../../bench/e2e/target.js', import.meta.url));
const RELAY = fileURLToPath(new URL('../../bench/e2e/relay.js', import.meta.url));

async function started(script: string, args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { child, port: (JSON.parse(line.toString()) as { port: number }).port };
}

describe('the Node TLS floor: two relays, TLS on both hops', () => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-tls-relay-'));
  const children: ChildProcess[] = [];
  let targetPort = 0;
  let frontPort = 0;
  let ca = '';

  before(async () => {
    const authority = makeCa(dir, 'ca');
    const cert = makeServerCert(dir, 'edge', ['localhost', '*.localhost'], authority);
    ca = authority.cert;
    const target = await started(TARGET, []);
    const back = await started(RELAY, [String(target.port), '--tls-cert', cert.cert, '--tls-key', cert.key]);
    const front = await started(RELAY, [String(back.port), '--tls-cert', cert.cert, '--tls-key', cert.key, '--upstream-ca', ca]);
    children.push(front.child, back.child, target.child);
    targetPort = target.port;
    frontPort = front.port;
  });

  after(async () => {
    for (const child of children) {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    }
    rmSync(dir, { recursive: true, force: true });
  });

  test('answers through the pair are the target’s own, byte for byte, on one kept-alive connection, under the phase’s certificate', async () => {
    const tls = buildConnector({ ca: readFileSync(ca), servername: 'localhost' });
    let connections = 0;
    const dispatcher = new Agent({
      connections: 1,
      connect: (options, callback) => {
        connections++;
        tls(options, callback);
      },
    });
    try {
      for (const [method, path, body] of [
        ['GET', '/bench/length/1024', undefined],
        ['GET', '/bench/chunked/65536', undefined],
        ['POST', '/bench/length/0', payload(1024)],
        ['POST', '/bench/chunked/0', payload(65_536)],
      ] as const) {
        const direct = await request(`http://127.0.0.1:${targetPort}${path}`, { method, body });
        const relayed = await request(`https://127.0.0.1:${frontPort}${path}`, { method, body, dispatcher });
        assert.equal(relayed.statusCode, 200);
        assert.deepEqual(relayed.headers['transfer-encoding'], direct.headers['transfer-encoding']);
        assert.deepEqual(Buffer.from(await relayed.body.arrayBuffer()), Buffer.from(await direct.body.arrayBuffer()));
      }
      assert.equal(connections, 1);
    } finally {
      await dispatcher.close();
    }
  });

  test('a certificate without its key is refused', () => {
    const result = spawnSync(process.execPath, [RELAY, '8080', '--tls-cert', join(dir, 'edge.crt')], { encoding: 'utf8' });
    assert.equal(result.status, 2);
    assert.match(result.stderr, /usage: relay\.js/);
  });
});
