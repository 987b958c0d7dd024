/**
 * Issue 23, lower item: "a queued upload holds its whole body in memory (300 slow uploads: 301 MiB)".
 * A held request's body is now written to LMDB in pieces as it arrives, so an upload costs the edge a
 * couple of 16 KiB pieces however much of its body has come. Reproduced against a real `burrow edge`
 * process: N concurrent uploads of 1 MiB bodies to a name in `queue` mode with no tunnel connected, each
 * sends 768 KiB and stalls. The edge's own /metrics (on --admin) says when it has read every byte sent
 * (burrow_queue_upload_bytes_received) and what its heap and external memory (Buffers) hold; the growth
 * must stay within N × a per-upload bound plus a fixed slack, where holding the bodies would cost N ×
 * 768 KiB. Then the uploads finish and every one is held, whole.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import { BIN, freePort, runCli, spawnNode, tempDir, testEdgeArgs, waitFor, type SpawnedProcess } from '../helpers.js';

const UPLOADS = 100;
const BODY = 1024 * 1024;
const SENT_BEFORE_STALL = 768 * 1024;
const WRITE = 16 * 1024;
/** What the edge's own gauge may show per stalled upload: the piece it fills and a spare one. */
const STALLED_PIECES_BOUND = 32 * 1024;
/** Two 16 KiB pieces, the upload's state and its connection, with room to spare. */
const PER_UPLOAD_BOUND = 64 * 1024;
/** Garbage not yet collected, code paths warmed up, prom-client's own scrape. */
const SLACK = 8 * 1024 * 1024;
const NAME = 'slow-hooks';

/**
 * The edge runs a full garbage collection when sent SIGUSR2 and says so on stderr: memory is read after
 * one, so it shows what the edge holds, not garbage not yet collected.
 */
const COLLECT_ON_SIGNAL = [
  '--expose-gc',
  '--import',
  // Twice, a turn apart: V8 frees ArrayBuffer memory (Buffers) concurrently after a collection, and the
  // next collection waits for that to finish.
  'data:text/javascript,let n = 0; process.on("SIGUSR2", () => { globalThis.gc(); setTimeout(() => { globalThis.gc(); process.stderr.write(`collected ${++n}\\n`); }, 0); });',
];

let collections = 0;
async function collectedMetrics(edge: SpawnedProcess, adminPort: number): Promise<Map<string, number>> {
  collections++;
  edge.child.kill('SIGUSR2');
  await waitFor(() => edge.output().includes(`collected ${collections}\n`), 10_000, 'a garbage collection in the edge');
  return metrics(adminPort);
}

async function metrics(adminPort: number): Promise<Map<string, number>> {
  const response = await request(`http://127.0.0.1:${adminPort}/metrics`);
  const text = await response.body.text();
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);
    if (match !== null) values.set(match[1]!, Number(match[2]));
  }
  return values;
}

function heldMemory(values: Map<string, number>): number {
  return (values.get('nodejs_heap_size_used_bytes') ?? NaN) + (values.get('nodejs_external_memory_bytes') ?? NaN);
}

function write(socket: Socket, bytes: Buffer): Promise<void> {
  return new Promise((resolve, reject) => socket.write(bytes, (error) => (error ? reject(error) : resolve())));
}

async function openUpload(port: number, index: number): Promise<{ socket: Socket; answer: () => string }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  await write(socket, Buffer.from(`POST /hooks/${index} HTTP/1.1\r\nHost: ${NAME}.localhost:${port}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${BODY}\r\n\r\n`));
  return { socket, answer: () => answer };
}

test('issue 23: 100 slow uploads to a queued name hold a bounded amount of edge memory each, not their bodies', async () => {
  const dataDir = tempDir();
  const env = { XDG_CONFIG_HOME: tempDir() };
  const port = await freePort();
  const adminPort = await freePort();
  const edge = await spawnNode(
    [...COLLECT_ON_SIGNAL, BIN, ...testEdgeArgs(['edge', '--port', String(port), '--data', dataDir, '--admin', `127.0.0.1:${adminPort}`, '--queue-rate-limit', '10000'])],
    env,
    /listening on/,
  );
  const sockets: Socket[] = [];
  try {
    const created = await runCli(['admin', 'create-account', '--email', 'slow@example.test', '--plan', 'PRO', '--data', dataDir, '--json'], env);
    const token = JSON.parse(created.stdout).token.token as string;
    const cli = { ...env, BURROW_EDGE: `http://localhost:${port}`, BURROW_TOKEN: token };
    assert.equal((await runCli(['reserve', NAME, '--offline', 'queue'], cli)).code, 0);
    const chunk = Buffer.alloc(WRITE, 0x61);

    // Warm-up: one whole upload, so the paths are compiled before the baseline.
    const warm = await openUpload(port, 0);
    sockets.push(warm.socket);
    for (let sent = 0; sent < BODY; sent += WRITE) await write(warm.socket, chunk);
    await waitFor(() => warm.answer().includes('\r\n\r\n{'), 10_000, 'the warm-up upload answered');
    assert.match(warm.answer(), /^HTTP\/1\.1 202 /);
    const before = heldMemory(await collectedMetrics(edge, adminPort));

    const uploads: { socket: Socket; answer: () => string }[] = [];
    for (let i = 1; i <= UPLOADS; i++) uploads.push(await openUpload(port, i));
    sockets.push(...uploads.map((upload) => upload.socket));
    for (let sent = 0; sent < SENT_BEFORE_STALL; sent += WRITE) await Promise.all(uploads.map((upload) => write(upload.socket, chunk)));
    // The edge has read every byte sent (and by the code under test, stored it): now it holds them or not.
    let during = new Map<string, number>();
    await waitFor(async () => {
      during = await metrics(adminPort);
      return (
        during.get('burrow_queue_uploads_receiving') === UPLOADS &&
        during.get('burrow_queue_upload_bytes_received') === UPLOADS * SENT_BEFORE_STALL &&
        // A fast read (uWS reads up to 512 KiB at once) is written out before the uploads count as stalled.
        during.get('burrow_queue_upload_bytes_buffered')! <= UPLOADS * STALLED_PIECES_BOUND
      );
    }, 60_000, 'the edge to read and store every byte sent');
    during = await collectedMetrics(edge, adminPort);
    const growth = heldMemory(during) - before;
    const bound = UPLOADS * PER_UPLOAD_BOUND + SLACK;
    process.stdout.write(`# ${UPLOADS} stalled uploads of ${SENT_BEFORE_STALL} bytes: edge heap+external grew ${(growth / 1024 / 1024).toFixed(1)} MiB (bound ${(bound / 1024 / 1024).toFixed(1)} MiB; the bodies are ${((UPLOADS * SENT_BEFORE_STALL) / 1024 / 1024).toFixed(0)} MiB)\n`);
    assert.ok(growth < bound, `the edge's heap and external memory grew ${growth} bytes for ${UPLOADS} stalled uploads (bound ${bound})`);

    // The uploads finish: each is held, whole.
    for (let sent = SENT_BEFORE_STALL; sent < BODY; sent += WRITE) await Promise.all(uploads.map((upload) => write(upload.socket, chunk)));
    await waitFor(() => uploads.every((upload) => upload.answer().includes('\r\n\r\n{')), 30_000, 'every upload answered');
    for (const upload of uploads) assert.match(upload.answer(), /^HTTP\/1\.1 202 /);
    const listed = await runCli(['queue', NAME, '--json'], cli);
    const queue = JSON.parse(listed.stdout).queue as { size: number; state: string }[];
    assert.equal(queue.length, UPLOADS + 1);
    assert.ok(queue.every((event) => event.size === BODY && event.state === 'queued'), listed.stdout.slice(0, 300));
    const after = await metrics(adminPort);
    assert.deepEqual(
      ['burrow_queue_uploads_receiving', 'burrow_queue_upload_bytes_received', 'burrow_queue_upload_bytes_buffered'].map((name) => after.get(name)),
      [0, 0, 0],
    );
  } finally {
    for (const socket of sockets) socket.destroy();
    edge.child.kill('SIGKILL');
    await edge.exited;
  }
});
