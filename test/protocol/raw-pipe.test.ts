/**
 * The credit bookkeeping of raw streams (src/protocol/raw-pipe.ts), which both the edge's and the
 * client's TCP connections use: never more in flight than the credit, the source paused while bytes wait
 * and its end sent only after them, credit returned only for bytes the sink took, and all of it back
 * when the stream ends.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decode, type Frame } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { SendCredit } from '../../src/protocol/flow.js';
import { RawPipe, type RawPipeOwner } from '../../src/protocol/raw-pipe.js';

function owner(connectionCredit: number): RawPipeOwner & { frames: Frame[]; returned: number; log: string[] } {
  const state = {
    settings: { maxFrameBody: 100 },
    connectionSend: new SendCredit(connectionCredit),
    frames: [] as Frame[],
    returned: 0,
    log: [] as string[],
    send(frame: Buffer) {
      state.frames.push(decode(frame));
    },
    consumedConnection(bytes: number) {
      state.returned += bytes;
    },
    waitForConnection() {
      state.log.push('wait');
    },
    pauseSource() {
      state.log.push('pause');
    },
    resumeSource() {
      state.log.push('resume');
    },
  };
  return state;
}

const dataBytes = (frames: Frame[]): number => frames.reduce((sum, frame) => sum + (frame[0] === FrameType.DATA && frame[2] !== null ? (frame[2] as Uint8Array).byteLength : 0), 0);

test('source bytes go out within the stream credit in frames of at most maxFrameBody; the rest waits, paused, and its end after it', () => {
  const host = owner(10_000);
  const pipe = new RawPipe(3, host, 250);
  pipe.fromSource(Buffer.alloc(400, 1));
  assert.equal(dataBytes(host.frames), 250);
  assert.ok(host.frames.every((frame) => frame[0] === FrameType.DATA && frame[1] === 3 && (frame[2] as Uint8Array).byteLength <= 100));
  assert.deepEqual(host.log, ['pause']);
  assert.equal(pipe.pendingBytes, 150);
  assert.equal(pipe.sourceEnd(), false, 'the end waits behind the bytes');
  assert.equal(pipe.grant(100), false);
  assert.equal(pipe.pendingBytes, 50);
  assert.equal(pipe.grant(1000), true, 'the end went out after the last bytes');
  assert.equal(dataBytes(host.frames), 400);
  assert.deepEqual(host.frames.at(-1), [FrameType.DATA, 3, null, true]);
});

test('the connection credit binds too: the owner is told to wait for it, and the source resumes once all went', () => {
  const host = owner(120);
  const pipe = new RawPipe(1, host, 10_000);
  pipe.fromSource(Buffer.alloc(200));
  assert.equal(dataBytes(host.frames), 120);
  assert.deepEqual(host.log, ['wait', 'pause']);
  host.connectionSend.grant(500);
  assert.equal(pipe.drain(), false);
  assert.equal(dataBytes(host.frames), 200);
  assert.deepEqual(host.log, ['wait', 'pause', 'resume']);
  assert.ok(pipe.idle);
});

test("the peer's bytes: the window is checked, credit goes back only for what the sink took, and the rest when the stream ends", () => {
  const host = owner(0);
  const pipe = new RawPipe(5, host, 1000);
  assert.equal(pipe.receive(600), true);
  assert.equal(pipe.receive(500), false, 'beyond the window');
  pipe.wrote(300, true);
  assert.equal(host.returned, 300);
  pipe.wrote(200, false);
  assert.equal(host.returned, 300, 'held by a full sink');
  assert.equal(pipe.idle, false);
  pipe.sinkDrained();
  assert.equal(host.returned, 500);
  // 100 received bytes were never written: the end gives their connection credit back, once.
  pipe.close();
  pipe.close();
  assert.equal(host.returned, 600);
  const windows = host.frames.filter((frame) => frame[0] === FrameType.WINDOW);
  assert.ok(windows.every((frame) => frame[1] === 5));
});
