/**
 * Issue 29, point 3: a second client of the same account asking for a name that is online no longer
 * takes it over silently. It is refused (409 SUBDOMAIN_TAKEN) with a message naming the running tunnel,
 * unless it asks to replace it (`--replace`). The client's own reconnect after a drop still replaces its
 * old session, even while the edge has not noticed that session is dead (DESIGN.md, "Subdomains"): a
 * TCP relay that stops forwarding without closing anything makes that half-dead session here.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { ClosedInfo, ReadyInfo } from '../../src/client/tunnel-client.js';
import { call, createAccount, runCli, startClient, startEdge, startLocal, tempDirs, type LocalServer, type TestEdge } from '../helpers.js';

/** A TCP relay to the edge that can go silent: existing connections stay open and carry nothing more. */
async function silenceableRelay(port: number): Promise<{ url: string; silence(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let silent = false;
  const server = createServer((inbound) => {
    const outbound = connect(port, '127.0.0.1');
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    // Once silenced, the edge is shown nothing: not even the client's close.
    const end = (): void => {
      if (silent) return;
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', end).on('close', end);
    outbound.on('error', end).on('close', end);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://localhost:${(server.address() as AddressInfo).port}`,
    silence() {
      silent = true;
      for (const socket of sockets) {
        socket.unpipe();
        socket.pause();
      }
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('a name online in another tunnel of the account', () => {
  let target: TestEdge;
  let local: LocalServer;
  const configDir = tempDirs('burrow-issue-29-online-');

  before(async () => {
    target = await startEdge();
    local = await startLocal((_req, res) => res.end('local'));
  });
  after(async () => {
    await local.close();
    await target.close();
  });

  test('is refused with 409 SUBDOMAIN_TAKEN naming the running tunnel; the first one keeps serving', async () => {
    const owner = await createAccount(target, 'PRO');
    const first = await startClient(target, owner.token, local.port, { subdomain: 'online-name' });
    try {
      await assert.rejects(startClient(target, owner.token, 4321, { subdomain: 'online-name' }), (error: Error & { code?: string; status?: number }) => {
        assert.equal(error.code, 'SUBDOMAIN_TAKEN');
        assert.equal(error.status, 409);
        const started = new Date(target.edge.registry.session('online-name')!.startedAt).toISOString();
        assert.match(error.message, /^The subdomain "online-name" is already online for this account: a tunnel to local port \d+, connected from 127\.0\.0\.1 at /);
        assert.ok(error.message.includes(`local port ${local.port},`), error.message);
        assert.ok(error.message.includes(` at ${started} with token ${owner.tokenId}.`), error.message);
        assert.match(error.message, /--replace/);
        return true;
      });
      assert.equal(first.client.connected, true);
      assert.equal((await call(target, 'GET', '/', { host: first.host })).text, 'local');
    } finally {
      await first.client.close();
    }
  });

  test('--replace takes it over: the first client ends with GOAWAY REPLACED, saying who took it', async () => {
    const owner = await createAccount(target, 'PRO');
    const first = await startClient(target, owner.token, local.port, { subdomain: 'replace-me' });
    const closed = once(first.client, 'closed') as Promise<[ClosedInfo]>;
    const second = await startClient(target, owner.token, local.port, { subdomain: 'replace-me', replace: true });
    try {
      const [info] = await closed;
      assert.equal(info.code, 'REPLACED');
      assert.match(info.reason, /another client of this account \(from 127\.0\.0\.1\) took the subdomain over \(--replace\)/);
      assert.equal(target.edge.registry.session('replace-me')?.instance, second.client.instance);
    } finally {
      await second.client.close();
    }
  });

  test("the client's own reconnect replaces its half-dead old session, which the edge still holds live", async () => {
    const owner = await createAccount(target, 'PRO');
    const relay = await silenceableRelay(target.port);
    const started = await startClient(target, owner.token, local.port, { subdomain: 'half-dead', edge: relay.url, silenceTimeoutMs: 1_000 });
    try {
      const old = target.edge.registry.session('half-dead')!;
      const back = Promise.race([once(started.client, 'ready') as Promise<[ReadyInfo]>, once(started.client, 'closed') as Promise<[ClosedInfo]>]);
      relay.silence();
      const [ready] = await back;
      assert.ok('reconnected' in ready, `the client ended instead of reconnecting: ${JSON.stringify(ready)}`);
      assert.equal(ready.reconnected, true);
      assert.equal(ready.subdomain, 'half-dead');
      const current = target.edge.registry.session('half-dead')!;
      assert.notEqual(current, old, 'a new session holds the name');
      assert.equal(current.instance, started.client.instance);
      assert.equal(old.connection.closed, true, 'the old session was ended (GOAWAY REPLACED), not left beside the new one');
      assert.equal((await call(target, 'GET', '/', { host: started.host })).text, 'local');
    } finally {
      await started.client.close();
      await relay.close();
    }
  });

  test('burrow http --subdomain NAME exits 1 with the refusal when NAME is online', async () => {
    const owner = await createAccount(target, 'PRO');
    const first = await startClient(target, owner.token, local.port, { subdomain: 'cli-online' });
    try {
      const env = { XDG_CONFIG_HOME: configDir(), BURROW_TOKEN: owner.token, BURROW_EDGE: target.url };
      const run = await runCli(['http', String(local.port), '--subdomain', 'cli-online', '--no-inspect'], env);
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /^burrow: SUBDOMAIN_TAKEN: The subdomain "cli-online" is already online for this account: a tunnel to local port \d+, connected from 127\.0\.0\.1 at .*--replace/);
      assert.equal(first.client.connected, true);
    } finally {
      await first.client.close();
    }
  });
});
