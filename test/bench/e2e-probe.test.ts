/**
 * The benchmark's 1-connection probe (bench/e2e/probe.ts) measures a path only while every request reuses
 * one connection: each sender (undici, Node http, curl) checks the answers and counts the connections it
 * opened beyond the first. Checked here against the benchmark's own target (bench/e2e/target.ts, both
 * answer shapes) and against a server that closes every connection after one answer, which each sender
 * must report. Behaviour only, no timing.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { payload, postBody, type Scenario } from '../../bench/e2e/payloads.js';
import { probe, SENDERS } from '../../bench/e2e/probe.js';

const TARGET = fileURLToPath(new URL('../../bench/e2e/target.js', import.meta.url));
const curlMissing = spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0 ? null : 'curl is not installed';

const scenarios: Scenario[] = [
  { method: 'GET', size: 1024, shape: 'length' },
  { method: 'GET', size: 1024, shape: 'chunked' },
  { method: 'POST', size: 1024, shape: 'length' },
  { method: 'POST', size: 1024, shape: 'chunked' },
];

describe('the benchmark probe', () => {
  let target: ChildProcess;
  let targetPort = 0;
  let closing: Server;
  let closingPort = 0;

  before(async () => {
    target = spawn(process.execPath, [TARGET], { stdio: ['pipe', 'pipe', 'inherit'] });
    const [line] = (await once(target.stdout!, 'data')) as [Buffer];
    targetPort = (JSON.parse(line.toString()) as { port: number }).port;
    // Answers right, but closes the connection after each answer.
    closing = createServer((req, res) => {
      let length = 0;
      req.on('data', (chunk: Buffer) => (length += chunk.length));
      req.on('end', () => {
        const body = req.method === 'POST' ? postBody(length) : payload(1024);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' });
        res.end(body);
      });
    });
    closing.listen(0, '127.0.0.1');
    await once(closing, 'listening');
    closingPort = (closing.address() as AddressInfo).port;
  });

  after(async () => {
    target.stdin!.end();
    await once(target, 'exit');
    closing.close();
  });

  test('the target answers each shape as named: a content-length, or chunked', async () => {
    for (const shape of ['length', 'chunked']) {
      const response = await request(`http://127.0.0.1:${targetPort}/bench/${shape}/65536`);
      const body = await response.body.text();
      assert.equal(body, payload(65536));
      assert.equal(response.headers['content-length'], shape === 'length' ? '65536' : undefined);
      assert.equal(response.headers['transfer-encoding'], shape === 'chunked' ? 'chunked' : undefined);
    }
    const posted = await request(`http://127.0.0.1:${targetPort}/bench/chunked/0`, { method: 'POST', body: payload(4096) });
    assert.equal(await posted.body.text(), postBody(4096));
    assert.equal(posted.headers['transfer-encoding'], 'chunked');
  });

  for (const sender of SENDERS) {
    test(`${sender}: every request on one connection, every answer checked`, { skip: sender === 'curl' ? (curlMissing ?? false) : false }, async () => {
      for (const scenario of scenarios) {
        const paths = new Map([['direct', { origin: `http://127.0.0.1:${targetPort}`, host: null }]]);
        const result = (await probe(paths, scenario, { requests: 30, warmup: 5, block: 10 }, () => false, sender)).get('direct')!;
        assert.equal(result.errors, 0, `${sender} ${scenario.method} ${scenario.shape}`);
        assert.equal(result.samples, 30);
        assert.equal(result.newConnections, 0, `${sender} ${scenario.method} ${scenario.shape} opened new connections`);
      }
    });

    test(`${sender}: a server that closes each connection shows as new connections`, { skip: sender === 'curl' ? (curlMissing ?? false) : false }, async () => {
      const paths = new Map([['closing', { origin: `http://127.0.0.1:${closingPort}`, host: null }]]);
      const result = (await probe(paths, { method: 'GET', size: 1024, shape: 'length' }, { requests: 20, warmup: 2, block: 10 }, () => false, sender)).get('closing')!;
      assert.equal(result.errors, 0);
      assert.ok(result.newConnections >= 10, `${sender} reported ${result.newConnections} new connections`);
    });
  }
});
