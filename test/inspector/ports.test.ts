/**
 * Where the inspector listens: loopback only, the next free port when the first is taken, exactly the
 * port asked for otherwise, never sharing a port with another listener; and `--inspect ADDR` parsing.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { describe, test } from 'node:test';
import { request } from 'undici';
import { parseInspectAddress } from '../../src/inspector/address.js';
import { Inspector } from '../../src/inspector/server.js';

async function occupy(port = 0): Promise<Server> {
  const server = createServer();
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function portOf(server: Server): number {
  return (server.address() as { port: number }).port;
}

describe('inspector ports', () => {
  test('a taken port moves on to the next free one', async () => {
    const blocker = await occupy();
    const taken = portOf(blocker);
    const inspector = await Inspector.start({ port: taken, portTries: 19 });
    try {
      assert.ok(inspector.port > taken && inspector.port <= taken + 19, `port ${inspector.port} after ${taken}`);
      assert.equal(inspector.url, `http://127.0.0.1:${inspector.port}`);
      const answer = await request(`${inspector.url}/api/status`);
      assert.equal(answer.statusCode, 200);
      await answer.body.text();
    } finally {
      inspector.close();
      blocker.close();
    }
  });

  test('two inspectors never share a port (uWS would, without the exclusive flag)', async () => {
    const first = await Inspector.start({ port: 0 });
    try {
      await assert.rejects(Inspector.start({ port: first.port }), /cannot listen on 127\.0\.0\.1 port \d+/);
      const second = await Inspector.start({ port: first.port, portTries: 5 });
      try {
        assert.notEqual(second.port, first.port);
      } finally {
        second.close();
      }
    } finally {
      first.close();
    }
  });

  test('every port tried is named when none is free', async () => {
    const blockers = [await occupy()];
    const base = portOf(blockers[0]!);
    try {
      for (let i = 1; i <= 2; i++) {
        try {
          blockers.push(await occupy(base + i));
        } catch {
          return; // a neighbour port is in use by someone else: nothing to prove here
        }
      }
      await assert.rejects(Inspector.start({ port: base, portTries: 2 }), new RegExp(`ports ${base}-${base + 2}`));
    } finally {
      for (const blocker of blockers) blocker.close();
    }
  });

  test('it listens on loopback only', async () => {
    const inspector = await Inspector.start({ port: 0 });
    try {
      const external = Object.values(networkInterfaces())
        .flat()
        .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal);
      if (external !== undefined) {
        await assert.rejects(request(`http://${external!.address}:${inspector.port}/api/status`, { headersTimeout: 2_000 }));
      }
      const local = await request(`http://127.0.0.1:${inspector.port}/api/status`);
      assert.equal(local.statusCode, 200);
      await local.body.text();
    } finally {
      inspector.close();
    }
  });

  test('closing frees the port at once', async () => {
    const inspector = await Inspector.start({ port: 0 });
    const port = inspector.port;
    inspector.close();
    const again = await Inspector.start({ port });
    again.close();
  });
});

describe('--inspect ADDR', () => {
  test('accepts a port or a loopback host and port', () => {
    assert.deepEqual(parseInspectAddress('4050'), { host: '127.0.0.1', port: 4050 });
    assert.deepEqual(parseInspectAddress('0'), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(parseInspectAddress('localhost:4041'), { host: '127.0.0.1', port: 4041 });
    assert.deepEqual(parseInspectAddress('127.0.0.1:4042'), { host: '127.0.0.1', port: 4042 });
    assert.deepEqual(parseInspectAddress('127.0.0.5:4042'), { host: '127.0.0.5', port: 4042 });
    assert.deepEqual(parseInspectAddress('[::1]:4043'), { host: '::1', port: 4043 });
    assert.deepEqual(parseInspectAddress(':4044'), { host: '127.0.0.1', port: 4044 });
  });

  test('refuses anything that is not loopback, or not a port', () => {
    for (const text of ['0.0.0.0:4040', '192.168.1.2:4040', 'example.com:4040', '[::]:4040', '::1:4040', '127.0.0.256:1', 'localhost', '70000', 'localhost:-1', '']) {
      const result = parseInspectAddress(text);
      assert.equal(typeof result, 'string', text);
    }
    assert.match(parseInspectAddress('0.0.0.0:4040') as string, /loopback/);
  });
});
