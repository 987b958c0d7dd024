/**
 * The admin listener (`--admin`): GET /metrics is valid Prometheus text whose counters move with real
 * traffic through a real tunnel, GET /healthz answers 200 while serving; the spec's /health paths stay
 * 404 on the public port. A real edge, client and local server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, echo, rawRequest, startClient, startEdge, startLocal, tempDirs, type LocalServer, type TestEdge } from '../helpers.js';
import { parseAdminAddress } from '../../src/edge/admin.js';
import { parsePrometheusText, sampleValue, type Exposition } from './prometheus-text.js';

async function admin(target: TestEdge, path: string, method = 'GET'): Promise<{ status: number; type: string; text: string }> {
  const response = await request(`http://127.0.0.1:${target.edge.adminPort}${path}`, { method: method as 'GET' });
  return { status: response.statusCode, type: String(response.headers['content-type']), text: await response.body.text() };
}

async function scrape(target: TestEdge): Promise<Exposition> {
  const response = await admin(target, '/metrics');
  assert.equal(response.status, 200);
  assert.match(response.type, /^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(response.text);
}

const BODY = 'x'.repeat(1234);
const tempDir = tempDirs('burrow-metrics-');

describe('GET /metrics', () => {
  let local: LocalServer;
  let target: TestEdge;
  let token: string;
  const logLines: string[] = [];

  before(async () => {
    local = await startLocal((req, res) => {
      if (req.url === '/fail') {
        res.statusCode = 500;
        res.end('broken');
        return;
      }
      echo(req, res);
    });
    target = await startEdge({ admin: { host: '127.0.0.1', port: 0 }, maxRequestBody: 4096, rateLimit: 3, log: (line) => logLines.push(line) });
    token = (await createAccount(target)).token;
  });

  after(async () => {
    await target.close();
    await local.close();
  });

  test('is valid exposition text with the process metrics and every burrow metric, before any traffic', async () => {
    const metrics = await scrape(target);
    for (const [name, type] of [
      ['burrow_tunnels_active', 'gauge'],
      ['burrow_streams_open', 'gauge'],
      ['burrow_draining', 'gauge'],
      ['burrow_tunnel_connects_total', 'counter'],
      ['burrow_tunnel_disconnects_total', 'counter'],
      ['burrow_public_requests_total', 'counter'],
      ['burrow_public_received_bytes_total', 'counter'],
      ['burrow_public_sent_bytes_total', 'counter'],
      ['burrow_rejected_requests_total', 'counter'],
      ['burrow_captures_committed_total', 'counter'],
      ['burrow_access_log_dropped_lines_total', 'counter'],
      ['burrow_public_request_duration_seconds', 'histogram'],
      ['burrow_tunnel_hop_duration_seconds', 'histogram'],
      ['burrow_capture_commit_duration_seconds', 'histogram'],
      ['process_cpu_seconds_total', 'counter'],
      ['process_resident_memory_bytes', 'gauge'],
      ['nodejs_eventloop_lag_p99_seconds', 'gauge'],
    ] as const) {
      assert.equal(metrics.types.get(name), type, name);
    }
    assert.ok(sampleValue(metrics, 'process_resident_memory_bytes') > 0);
    assert.equal(sampleValue(metrics, 'burrow_tunnels_active'), 0);
    assert.equal(sampleValue(metrics, 'burrow_draining'), 0);
  });

  test('counters move with traffic: requests by class, bytes, tunnels, hops, commits, rejections by reason', async () => {
    const before = await scrape(target);
    const started = await startClient(target, token, local.port);
    const during = await scrape(target);
    assert.equal(sampleValue(during, 'burrow_tunnels_active'), 1);
    assert.equal(sampleValue(during, 'burrow_tunnel_connects_total') - sampleValue(before, 'burrow_tunnel_connects_total'), 1);

    const answers: number[] = [];
    for (let i = 0; i < 3; i++) answers.push((await call(target, 'GET', `/ok/${i}`, { host: started.host })).status);
    const posted = await call(target, 'POST', '/upload', { host: started.host, rawBody: BODY });
    answers.push(posted.status);
    answers.push((await call(target, 'GET', '/fail', { host: started.host })).status);
    answers.push((await call(target, 'GET', '/', { host: `nobody-here.localhost:${target.port}` })).status);
    answers.push((await call(target, 'POST', '/big', { host: started.host, rawBody: 'y'.repeat(5000) })).status);
    assert.deepEqual(answers, [200, 200, 200, 200, 500, 404, 413]);
    // API refusals: a bad token, then the rate limit (3 a minute here).
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: 'svc_pat_00000000_bad' })).status, 401);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await call(target, 'GET', '/api/v1/auth/me', { token })).status);
    assert.ok(statuses.includes(429), `rate limited: ${statuses}`);

    const after = await scrape(target);
    const delta = (name: string, labels: Record<string, string> = {}): number => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    assert.equal(delta('burrow_public_requests_total', { status_class: '2xx' }), 4);
    assert.equal(delta('burrow_public_requests_total', { status_class: '5xx' }), 1);
    assert.equal(delta('burrow_public_requests_total', { status_class: '4xx' }), 2);
    assert.equal(delta('burrow_public_received_bytes_total'), BODY.length);
    const echoed = JSON.parse(posted.text) as { length: number };
    assert.equal(echoed.length, BODY.length);
    assert.ok(delta('burrow_public_sent_bytes_total') >= BODY.length + 'broken'.length, 'response bytes counted');
    assert.equal(delta('burrow_rejected_requests_total', { reason: 'TUNNEL_NOT_FOUND', source: 'public' }), 1);
    assert.equal(delta('burrow_rejected_requests_total', { reason: 'PAYLOAD_TOO_LARGE', source: 'public' }), 1);
    assert.equal(delta('burrow_rejected_requests_total', { reason: 'UNAUTHORIZED', source: 'api' }), 1);
    assert.ok(delta('burrow_rejected_requests_total', { reason: 'RATE_LIMITED', source: 'api' }) >= 1);
    // Five exchanges went through the tunnel: five request durations, five hops, five captures.
    assert.equal(delta('burrow_public_request_duration_seconds_count'), 5);
    assert.equal(delta('burrow_tunnel_hop_duration_seconds_count'), 5);
    assert.ok(sampleValue(after, 'burrow_tunnel_hop_duration_seconds_sum') > 0);
    assert.equal(delta('burrow_captures_committed_total'), 5);
    assert.ok(delta('burrow_capture_commit_duration_seconds_count') >= 1);
    assert.equal(sampleValue(after, 'burrow_streams_open'), 0);

    await started.client.close();
    await waitForMetric(target, 'burrow_tunnels_active', 0);
    const closed = await scrape(target);
    assert.equal(sampleValue(closed, 'burrow_tunnel_disconnects_total') - sampleValue(before, 'burrow_tunnel_disconnects_total'), 1);
  });

  test('a tunnel connect refused is counted by reason', async () => {
    const before = await scrape(target);
    const answer = await rawRequest(
      target.edge.agentPort,
      `GET /api/v1/connect?port=3000 HTTP/1.1\r\nHost: localhost:${target.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      500,
    );
    assert.match(answer, /^HTTP\/1\.1 401 /);
    const after = await scrape(target);
    assert.equal(
      sampleValue(after, 'burrow_rejected_requests_total', { reason: 'UNAUTHORIZED', source: 'connect' }) -
        sampleValue(before, 'burrow_rejected_requests_total', { reason: 'UNAUTHORIZED', source: 'connect' }),
      1,
    );
  });

  test('GET /healthz is 200 while serving; anything else on the admin port is 404', async () => {
    const health = await admin(target, '/healthz');
    assert.equal(health.status, 200);
    assert.deepEqual(JSON.parse(health.text), { status: 'serving' });
    assert.equal((await admin(target, '/')).status, 404);
    assert.equal((await admin(target, '/health')).status, 404);
    assert.equal((await admin(target, '/metrics', 'POST')).status, 404);
  });

  test("the spec's /health and /api/v1/health stay 404 on the public port", async () => {
    for (const path of ['/health', '/api/v1/health', '/healthz', '/metrics']) {
      assert.equal((await call(target, 'GET', path)).status, 404, path);
    }
  });
});

async function waitForMetric(target: TestEdge, name: string, value: number): Promise<void> {
  for (let i = 0; i < 250; i++) {
    if (sampleValue(await scrape(target), name) === value) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.fail(`${name} never became ${value}`);
}

describe('without --admin', () => {
  test('no admin listener and no per-request observation', async () => {
    const target = await startEdge();
    try {
      assert.equal(target.edge.adminPort, 0);
      assert.equal(target.edge.observer.watching, false);
      assert.equal(target.edge.observer.metrics, null);
    } finally {
      await target.close();
    }
  });
});

describe('an admin port that cannot be bound', () => {
  test('stops the start with the reason and gives the data directory back', async () => {
    const first = await startEdge({ admin: { host: '127.0.0.1', port: 0 } });
    const dataDir = tempDir();
    try {
      await assert.rejects(startEdge({ dataDir, admin: { host: '127.0.0.1', port: first.edge.adminPort } }), /admin listener: cannot bind 127\.0\.0\.1:\d+/);
      const second = await startEdge({ dataDir });
      await second.close();
    } finally {
      await first.close();
    }
  });
});

describe('--admin [HOST:]PORT', () => {
  const table: [string, ReturnType<typeof parseAdminAddress>][] = [
    ['9090', { host: '127.0.0.1', port: 9090 }],
    ['0', { host: '127.0.0.1', port: 0 }],
    ['0.0.0.0:9090', { host: '0.0.0.0', port: 9090 }],
    ['10.1.2.3:80', { host: '10.1.2.3', port: 80 }],
    ['[::1]:9090', { host: '::1', port: 9090 }],
    ['localhost:9100', { host: 'localhost', port: 9100 }],
  ];
  for (const [text, expected] of table) {
    test(`${text} → ${JSON.stringify(expected)}`, () => assert.deepEqual(parseAdminAddress(text), expected));
  }
  for (const text of ['', 'abc', '70000', '1.2.3.4:', ':9090', '::1:9090', '1.2.3.4:99999']) {
    test(`${JSON.stringify(text)} is refused with a reason`, () => assert.equal(typeof parseAdminAddress(text), 'string'));
  }
});
