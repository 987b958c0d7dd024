/**
 * The HTTP stream's state machine alone, without sockets: a stream reaches its session only through
 * StreamHost, so a small host that records what the stream sends drives it frame by frame. Each row
 * is a sequence of frames from the client and where the stream must end up; the live behaviour of the
 * same cases against a real edge is test/edge/issue-11-hostile-response.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decode } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType, ResetCode } from '../../src/protocol/constants.js';
import { SendCredit } from '../../src/protocol/flow.js';
import type { ErrorCode } from '../../src/errors.js';
import { EdgeHttpStream, HttpStreamState } from '../../src/edge/http-stream.js';
import type { HostedStream, StreamHost } from '../../src/edge/stream-host.js';
import type { Captured, Writable } from '../../src/edge/turn.js';

class RecordingHost implements StreamHost {
  readonly settings = { ...DEFAULT_SETTINGS };
  readonly tunnelId = 0;
  readonly subdomain = 'quiet-river-42';
  readonly accountId = 'usr_1';
  readonly tokenId = 'tok_1';
  readonly requestTimeoutMs = 30_000;
  readonly captureLimit = 1024;
  readonly timesHops = false;
  readonly connectionSend = new SendCredit(DEFAULT_SETTINGS.connectionWindow);
  readonly blocked = new Set<HostedStream>();
  readonly sent: unknown[][] = [];
  returnedCredit = 0;
  ended = 0;
  private seq = 0;
  readonly ring = { ringId: 1, accountId: 'usr_1', subdomain: 'quiet-river-42', capacity: 10, next: () => ({ seq: ++this.seq, id: `req_${this.seq}` }) };
  send(frame: Buffer): void {
    this.sent.push(decode(frame));
  }
  consumedConnection(bytes: number): void {
    this.returnedCredit += bytes;
  }
  endStream(): void {
    this.ended++;
  }
  deferWrite(_stream: Writable): void {}
  upgradeEnded(): void {}
  capture(exchange: Captured): void {
    exchange.afterCapture();
  }
}

/** The public side as calls: what the stream asked its sink to do. */
class RecordingStream extends EdgeHttpStream {
  readonly calls: string[] = [];
  protected pauseRequest(): void {}
  protected resumeRequest(): void {}
  protected startResponse(): void {
    this.calls.push(`head ${this.status}`);
  }
  protected writeBody(chunk: Uint8Array): void {
    this.calls.push(`body ${Buffer.from(chunk).toString()}`);
  }
  protected endResponse(last: Uint8Array | null): void {
    this.calls.push(`end ${last === null ? '' : Buffer.from(last).toString()}`);
    this.releaseConnectionCredit();
  }
  protected failResponse(code: ErrorCode): void {
    this.calls.push(`fail ${code}`);
    // As the real sinks do: bytes received and not written out give their connection credit back.
    this.releaseConnectionCredit();
  }
  protected interim(status: number): void {
    this.calls.push(`interim ${status}`);
  }
  protected switchProtocols(): void {
    this.calls.push('switch');
  }
  protected writeRaw(chunk: Uint8Array | null, end: boolean): void {
    this.calls.push(`raw ${chunk === null ? '' : Buffer.from(chunk).toString()}${end ? ' FIN' : ''}`);
  }
  protected cutRaw(): void {
    this.calls.push('cut');
  }
  /** Both directions ended (the public side's part, as PublicHttpStream calls it). */
  bothEnded(): void {
    this.rawEnded();
  }
}

type Input =
  | ['RESPONSE', number, string[], string | null, boolean]
  | ['DATA', string | null, boolean]
  | ['INFO', number, string[]]
  | ['TRAILERS', string[]];

function run(method: string, inputs: Input[], upgrade = false): { stream: RecordingStream; host: RecordingHost } {
  const host = new RecordingHost();
  const stream = new RecordingStream(1, host, { method, target: '/', headers: [], clientAddress: '127.0.0.1', upgrade }, null);
  for (const input of inputs) {
    if (input[0] === 'RESPONSE') {
      const body = input[3] === null ? null : Buffer.from(input[3]);
      stream.onResponse(input[1], '', input[2], body, input[4], Buffer.alloc(1));
    } else if (input[0] === 'INFO') {
      stream.onInfo(input[1], '', input[2]);
    } else if (input[0] === 'TRAILERS') {
      stream.onTrailers(input[1]);
    } else {
      stream.onData(input[1] === null ? null : Buffer.from(input[1]), input[2]);
    }
  }
  return { stream, host };
}

const fits: { name: string; method?: string; inputs: Input[]; state: HttpStreamState; calls: string[] }[] = [
  { name: 'a whole response in one RESPONSE', inputs: [['RESPONSE', 200, ['content-length', '2'], 'ok', true]], state: HttpStreamState.COMPLETE, calls: ['head 200', 'end ok'] },
  { name: 'a head, then body frames', inputs: [['RESPONSE', 200, [], null, false], ['DATA', 'a', false], ['DATA', 'b', true]], state: HttpStreamState.COMPLETE, calls: ['head 200', 'body a', 'end b'] },
  { name: 'a head waiting for its body', inputs: [['RESPONSE', 200, ['content-length', '3'], null, false]], state: HttpStreamState.RECEIVING_BODY, calls: ['head 200'] },
  { name: 'INFO heads go out as interim answers, the final head follows', inputs: [['INFO', 100, []], ['INFO', 103, ['Link', '<x>']], ['RESPONSE', 200, [], 'ok', true]], state: HttpStreamState.COMPLETE, calls: ['interim 100', 'interim 103', 'head 200', 'end ok'] },
  { name: 'TRAILERS end the body', inputs: [['RESPONSE', 200, [], null, false], ['DATA', 'a', false], ['TRAILERS', ['X-Sum', '1']]], state: HttpStreamState.COMPLETE, calls: ['head 200', 'body a', 'end '] },
  { name: 'the declared length exactly, ended by an empty DATA', inputs: [['RESPONSE', 200, ['content-length', '2'], 'ok', false], ['DATA', null, true]], state: HttpStreamState.COMPLETE, calls: ['head 200', 'body ok', 'end '] },
  { name: 'HEAD with a content-length and no body', method: 'HEAD', inputs: [['RESPONSE', 200, ['content-length', '9'], null, true]], state: HttpStreamState.COMPLETE, calls: ['head 200', 'end '] },
];

const refused: { name: string; method?: string; inputs: Input[]; reason: RegExp; calls: string[] }[] = [
  { name: 'DATA before RESPONSE', inputs: [['DATA', 'x', false]], reason: /DATA before RESPONSE/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'a second RESPONSE', inputs: [['RESPONSE', 200, [], null, false], ['RESPONSE', 200, [], null, true]], reason: /second RESPONSE/, calls: ['head 200', 'fail INVALID_RESPONSE'] },
  { name: 'body past the declared length', inputs: [['RESPONSE', 200, ['content-length', '2'], null, false], ['DATA', 'ok', false], ['DATA', 'EXTRA', true]], reason: /beyond the declared content-length 2/, calls: ['head 200', 'body ok', 'fail INVALID_RESPONSE'] },
  { name: 'content-length 0, then DATA', inputs: [['RESPONSE', 200, ['content-length', '0'], null, false], ['DATA', 'x', true]], reason: /beyond the declared content-length 0/, calls: ['head 200', 'fail INVALID_RESPONSE'] },
  { name: 'a body on a 204', inputs: [['RESPONSE', 204, [], 'x', true]], reason: /a body on a response that has none/, calls: ['head 204', 'fail INVALID_RESPONSE'] },
  { name: 'a 1xx in RESPONSE', inputs: [['RESPONSE', 100, [], null, true]], reason: /informational status 100 in RESPONSE/, calls: ['fail INVALID_RESPONSE'] },
  { name: '101 on a stream that asked for no upgrade', inputs: [['RESPONSE', 101, [], null, false]], reason: /101 Switching Protocols on a stream/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'INFO with a final status', inputs: [['INFO', 200, []]], reason: /INFO with the status 200/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'INFO 101', inputs: [['INFO', 101, []]], reason: /INFO with the status 101/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'INFO after the final head', inputs: [['RESPONSE', 200, [], null, false], ['INFO', 103, []]], reason: /INFO after the final response/, calls: ['head 200', 'fail INVALID_RESPONSE'] },
  { name: 'TRAILERS before RESPONSE', inputs: [['TRAILERS', []]], reason: /TRAILERS before RESPONSE/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'a trailer name that is not a token', inputs: [['RESPONSE', 200, [], null, false], ['TRAILERS', ['x y', '1']]], reason: /not an HTTP token/, calls: ['head 200', 'fail INVALID_RESPONSE'] },
  { name: 'status 600', inputs: [['RESPONSE', 600, [], null, true]], reason: /not an HTTP status/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'a header name with a space', inputs: [['RESPONSE', 200, ['x a', 'v'], null, true]], reason: /not an HTTP token/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'a header value above \\xFF', inputs: [['RESPONSE', 200, ['x-a', '\u2713'], null, true]], reason: /above \\xFF/, calls: ['fail INVALID_RESPONSE'] },
  { name: 'two content-lengths', inputs: [['RESPONSE', 200, ['content-length', '1', 'content-length', '2'], null, true]], reason: /not one number/, calls: ['fail INVALID_RESPONSE'] },
];

describe('HTTP stream states: frames that fit', () => {
  for (const item of fits) {
    test(item.name, () => {
      const { stream, host } = run(item.method ?? 'GET', item.inputs);
      assert.equal(stream.state, item.state);
      assert.deepEqual(stream.calls, item.calls);
      assert.ok(!host.sent.some((frame) => frame[0] === FrameType.RESET), 'no RESET');
    });
  }
});

describe('HTTP stream states: a frame that does not fit resets the stream', () => {
  for (const item of refused) {
    test(item.name, () => {
      const { stream, host } = run(item.method ?? 'GET', item.inputs);
      assert.equal(stream.state, HttpStreamState.RESET);
      assert.equal(stream.closed, true);
      assert.equal(host.ended, 1, 'the stream left the table once');
      const resets = host.sent.filter((frame) => frame[0] === FrameType.RESET);
      assert.equal(resets.length, 1);
      assert.equal(resets[0]![2], ResetCode.PROTOCOL_ERROR);
      assert.match(String(resets[0]![3]), item.reason);
      assert.deepEqual(stream.calls, item.calls);
      // Every body byte the client sent has its connection credit back (written out or dropped).
      const bodyBytes = item.inputs.reduce((sum, input) => sum + ((input[0] === 'RESPONSE' ? input[3] : input[0] === 'DATA' ? input[1] : null)?.length ?? 0), 0);
      assert.equal(host.returnedCredit, bodyBytes);
    });
  }

  test('frames after the reset change nothing', () => {
    const { stream, host } = run('GET', [['DATA', 'x', false]]);
    stream.onData(Buffer.from('more'), true);
    stream.onResponse(200, '', [], null, true, Buffer.alloc(1));
    assert.equal(stream.state, HttpStreamState.RESET);
    assert.deepEqual(stream.calls, ['fail INVALID_RESPONSE']);
    assert.equal(host.sent.filter((frame) => frame[0] === FrameType.RESET).length, 1);
  });
});

describe('HTTP stream states: an upgrade', () => {
  test('a 101 switches to raw bytes both ways; the stream ends when both directions did', () => {
    const { stream, host } = run('GET', [['RESPONSE', 101, ['Upgrade', 'websocket', 'Connection', 'Upgrade'], null, false], ['DATA', 'frame', false], ['DATA', null, true]], true);
    assert.equal(stream.state, HttpStreamState.UPGRADED);
    assert.deepEqual(stream.calls, ['switch', 'raw frame', 'raw  FIN']);
    stream.sendBody(Buffer.from('up'), false);
    stream.sendBody(Buffer.alloc(0), true);
    assert.deepEqual(
      host.sent.filter((frame) => frame[0] === FrameType.DATA).map((frame) => [frame[2] === null ? null : Buffer.from(frame[2] as Uint8Array).toString(), frame[3]]),
      [['up', false], [null, true]],
    );
    stream.bothEnded();
    assert.equal(stream.state, HttpStreamState.COMPLETE);
    assert.equal(host.ended, 1);
  });

  test('after a 101: DATA past the end, TRAILERS or a RESET cut the stream', () => {
    const past = run('GET', [['RESPONSE', 101, [], null, false], ['DATA', null, true], ['DATA', 'x', false]], true);
    assert.equal(past.stream.state, HttpStreamState.RESET);
    assert.deepEqual(past.stream.calls, ['switch', 'raw  FIN', 'cut']);
    const trailers = run('GET', [['RESPONSE', 101, [], null, false], ['TRAILERS', []]], true);
    assert.deepEqual(trailers.stream.calls, ['switch', 'cut']);
    const reset = run('GET', [['RESPONSE', 101, [], null, false]], true);
    reset.stream.onReset(ResetCode.LOCAL_ERROR, 'gone');
    assert.deepEqual(reset.stream.calls, ['switch', 'cut']);
  });

  test('any other final status is an ordinary answer to an upgrade request', () => {
    const { stream } = run('GET', [['RESPONSE', 403, ['content-length', '6'], 'denied', true]], true);
    assert.equal(stream.state, HttpStreamState.COMPLETE);
    assert.deepEqual(stream.calls, ['head 403', 'end denied']);
  });
});
