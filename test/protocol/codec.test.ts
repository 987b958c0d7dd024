/**
 * The frame codec: every frame type round-trips, binary fields are views, and anything that is not
 * exactly one valid frame is refused with a ProtocolError (never another exception type), however it
 * is broken: wrong counts, wrong types, unknown types, non-arrays, text, trailing bytes, truncation,
 * extension types, huge declared lengths and deep nesting.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Packr } from 'msgpackr';
import { copyWithDataRoom, dataFrame, decode, encode, markDataRoom, FRAME_NAMES, MAX_NESTING, ProtocolError, withBinaryRoom, type Frame } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType, GoAwayCode, MAX_WINDOW } from '../../src/protocol/constants.js';
import { LAYOUTS, matchesLayout, ODD_VALUES, OPTIONAL_LAST, SAMPLES } from './frames.js';

/** Plain msgpack for hand-made values the codec's types would not allow. */
const raw = new Packr({ useRecords: false, variableMapSize: true });
const pack = (value: unknown): Buffer => raw.pack(value);

/** Decoding `bytes` throws a ProtocolError (and nothing else); returns its message. */
function refused(bytes: Uint8Array, what: string): string {
  let thrown: unknown = null;
  let frame: unknown;
  try {
    frame = decode(bytes);
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown !== null, `${what}: decoded to ${JSON.stringify(frame)} instead of being refused`);
  assert.ok(thrown instanceof ProtocolError, `${what}: threw ${String(thrown)} instead of a ProtocolError`);
  assert.equal(thrown.code, GoAwayCode.PROTOCOL_ERROR);
  assert.ok(thrown.message.length > 0 && thrown.message.length <= 200, `${what}: message of ${thrown.message.length} chars`);
  return thrown.message;
}

const label = (frame: readonly unknown[]): string => `${FRAME_NAMES[frame[0] as number] ?? frame[0]} ${JSON.stringify(frame).slice(0, 60)}`;

describe('round trip', () => {
  test('the samples cover every frame type and match the documented layouts', () => {
    const covered = new Set(SAMPLES.map((frame) => frame[0]));
    for (const type of Object.values(FrameType)) assert.ok(covered.has(type), `no sample of ${FRAME_NAMES[type]}`);
    for (const frame of SAMPLES) assert.ok(matchesLayout(frame), label(frame));
  });

  for (const frame of SAMPLES) {
    test(`encode then decode: ${label(frame)}`, () => {
      const bytes = encode(frame);
      assert.ok(Buffer.isBuffer(bytes));
      assert.deepEqual(decode(bytes), frame);
      // Encoding is deterministic: the same frame gives the same bytes.
      assert.ok(encode(decode(bytes)).equals(bytes));
    });
  }

  test('frame names follow the type numbers', () => {
    for (const [name, type] of Object.entries(FrameType)) assert.equal(FRAME_NAMES[type], name);
  });

  test('a WINDOW frame is 3 to 8 bytes of plain msgpack', () => {
    assert.equal(encode([FrameType.WINDOW, 0, 1]).toString('hex'), '930500' + '01');
    assert.equal(encode([FrameType.WINDOW, 3, 65_536]).toString('hex'), '930503' + 'ce00010000');
  });

  test('settings with extra keys decode (keys a later edge may add are ignored)', () => {
    const frame = decode(pack([FrameType.READY, 0, 'sub', 'http://sub.localhost', { ...DEFAULT_SETTINGS, futureSetting: [1, 2] }]));
    assert.equal(frame[0], FrameType.READY);
  });

  test('boundary values decode', () => {
    const cases: unknown[][] = [
      [FrameType.DATA, 0xffffffff, null, true],
      [FrameType.WINDOW, 0, MAX_WINDOW],
      [FrameType.WINDOW, 0, 0xffffffff], // the codec allows it; the flow-control arithmetic refuses it
      [FrameType.RESPONSE, 1, 100, '', [], null, false],
      [FrameType.RESPONSE, 1, 999, 'Any Reason \u00e9', [], null, true],
      [FrameType.INFO, 1, 100, '', []],
      [FrameType.INFO, 1, 999, '', []],
      [FrameType.RESET, 1, 0xffffffff, ''],
      [FrameType.READY, 0, '', '', { ...DEFAULT_SETTINGS, streamWindow: MAX_WINDOW, connectionWindow: MAX_WINDOW }],
      [FrameType.OPEN, 1, 'r', 'GET', '/', ['x-tab', 'a\tb', 'X-Latin', 'caf\u00e9', 'x-del', 'a\u007fb', 'x-empty', ''], '', null, true, false, 0],
      [FrameType.OPEN, 1, 'r', 'GET', '/', [], '', null, true, false, 65_535],
      [FrameType.BIND, 0, 65_535, 'tcp', '', 65_535, 0, '', false, false],
      [FrameType.ACCEPT, 1, 65_535, 'req_1', '', 65_535, '', 0],
      [FrameType.UNBOUND, 0, 65_535, 0xffffffff, ''],
      // Names of any case (protocol 2 keeps them); whether one is a token is the receiving stream's check.
      [FrameType.TRAILERS, 1, ['X-Checksum', '1', 'not a token', 'v']],
    ];
    for (const frame of cases) assert.deepEqual(decode(pack(frame)), frame);
  });
});

describe('binary fields are views of the input', () => {
  const binaryFields: [Frame, number][] = [
    [[FrameType.OPEN, 1, 'r', 'POST', '/', [], '', Buffer.from('open body'), true, false, 2], 7],
    [[FrameType.DATA, 1, Buffer.from('data chunk'), false], 2],
    [[FrameType.RESPONSE, 1, 200, 'OK', [], Buffer.from('response body'), true], 5],
  ];
  for (const [frame, index] of binaryFields) {
    test(`${FRAME_NAMES[frame[0]]}: element ${index}`, () => {
      // A plain Uint8Array at an offset inside a larger ArrayBuffer, as a WebSocket library hands it over.
      const encoded = encode(frame);
      const backing = new ArrayBuffer(encoded.byteLength + 16);
      const input = new Uint8Array(backing, 8, encoded.byteLength);
      input.set(encoded);
      const decoded = decode(input) as unknown[];
      const field = decoded[index] as Uint8Array;
      assert.ok(field instanceof Uint8Array);
      assert.equal(field.buffer, backing, 'the field shares the input memory');
      assert.deepEqual(Buffer.from(field), frame[index]);
      // Writing through the input shows in the field: a view, not a copy.
      const at = field.byteOffset - input.byteOffset;
      input[at] = input[at]! ^ 0xff;
      assert.equal(field[0], (frame[index] as Buffer)[0]! ^ 0xff);
    });
  }

  test('an empty binary field decodes as an empty Uint8Array', () => {
    const frame = decode(encode([FrameType.DATA, 1, Buffer.alloc(0), true]));
    assert.ok(frame[2] instanceof Uint8Array);
    assert.equal((frame[2] as Uint8Array).byteLength, 0);
  });
});

describe('refused', () => {
  test('wrong element counts', () => {
    for (const frame of SAMPLES) {
      refused(pack([...frame, null]), `${label(frame)} + 1 element`);
      // The last element of OPEN (tunnel 0's), BIND (drop) and BOUND (attachment) is optional: one
      // element less is the same frame from an older peer; two less is refused.
      const full = OPTIONAL_LAST.includes(frame[0]) && frame.length === LAYOUTS[frame[0]]!.length + 1;
      if (full) assert.deepEqual(decode(pack(frame.slice(0, -1))), frame.slice(0, -1));
      else refused(pack(frame.slice(0, -1)), `${label(frame)} - 1 element`);
      if (full) refused(pack(frame.slice(0, -2)), `${label(frame)} - 2 elements`);
    }
    refused(pack([]), 'an empty array');
    refused(pack([FrameType.WINDOW]), 'a type alone');
  });

  test('wrong element type at every position of every frame type', () => {
    let checked = 0;
    for (const frame of SAMPLES) {
      for (let position = 1; position < frame.length; position++) {
        for (const odd of ODD_VALUES) {
          const broken: unknown[] = [...frame];
          broken[position] = odd;
          const bytes = pack(broken);
          if (matchesLayout(broken)) {
            assert.deepEqual(decode(bytes), broken, `${label(broken)} is valid and decodes`);
          } else {
            refused(bytes, `${label(frame)} with element ${position} = ${JSON.stringify(odd)}`);
            checked++;
          }
        }
      }
    }
    assert.ok(checked > 500, `checked ${checked} broken frames`);
  });

  test('unknown frame types', () => {
    for (const type of [0, 19, 255, -1, 1.5, '1', null, true, [1], { type: 1 }, Buffer.from([1])]) {
      refused(pack([type, 1]), `type ${JSON.stringify(type)} with a stream`);
      refused(pack([type, 1, 'a', 'b', null, true]), `type ${JSON.stringify(type)} with fields`);
    }
  });

  test("protocol 1's WebSocket frames (8-11) are retired: refused, named as protocol 1's", () => {
    const v1: [number, unknown[]][] = [
      [8, [8, 9, 'req_1', '/ws', [], '198.51.100.2']],
      [9, [9, 9, 101, 'chat', []]],
      [10, [10, 9, Buffer.from('hi'), false, true]],
      [11, [11, 9, 1000, 'bye']],
    ];
    for (const [type, frame] of v1) assert.match(refused(pack(frame), `type ${type}`), new RegExp(`frame type ${type} \\(WS_[A-Z]+\\) is protocol 1's`));
  });

  test('stream 0 where a stream is required, and a non-zero stream on READY or GOAWAY', () => {
    for (const type of [FrameType.OPEN, FrameType.DATA, FrameType.RESPONSE, FrameType.RESET, FrameType.INFO, FrameType.TRAILERS]) {
      const sample = SAMPLES.find((frame) => frame[0] === type)!;
      const broken: unknown[] = [...sample];
      broken[1] = 0;
      refused(pack(broken), `${FRAME_NAMES[type]} on stream 0`);
    }
    for (const type of [FrameType.BIND, FrameType.BOUND, FrameType.UNBOUND]) {
      const broken: unknown[] = [...SAMPLES.find((frame) => frame[0] === type)!];
      broken[1] = 1;
      refused(pack(broken), `${FRAME_NAMES[type]} on stream 1`);
    }
    const accept: unknown[] = [...SAMPLES.find((frame) => frame[0] === FrameType.ACCEPT)!];
    accept[1] = 0;
    refused(pack(accept), 'ACCEPT on stream 0');
    refused(pack([FrameType.READY, 1, 's', 'u', { ...DEFAULT_SETTINGS }]), 'READY on stream 1');
    refused(pack([FrameType.GOAWAY, 1, 1, '']), 'GOAWAY on stream 1');
    refused(pack([FrameType.NOTICE, 1, 1, '']), 'NOTICE on stream 1');
    refused(pack([FrameType.WINDOW, 1, 0]), 'WINDOW of 0 bytes');
  });

  test('header lists and reasons that could break an HTTP head', () => {
    const bad: unknown[] = [
      ['x-a', 'b\r\nx-injected: 1'],
      ['x-a\r\nx-injected', 'b'],
      ['x-a', 'b\nc'],
      ['x-a', 'b\rc'],
      ['x-a\0', 'b'],
      ['x-a', 'b\0'],
      ['x-a'],
      ['x-a', 1],
      [1, 'x'],
    ];
    for (const headers of bad) {
      refused(pack([FrameType.RESPONSE, 1, 200, 'OK', headers, null, true]), `RESPONSE headers ${JSON.stringify(headers)}`);
      refused(pack([FrameType.OPEN, 1, 'r', 'GET', '/', headers, '', null, true, false, 0]), `OPEN headers ${JSON.stringify(headers)}`);
      refused(pack([FrameType.INFO, 1, 103, '', headers]), `INFO headers ${JSON.stringify(headers)}`);
      refused(pack([FrameType.TRAILERS, 1, headers]), `TRAILERS ${JSON.stringify(headers)}`);
    }
    for (const reason of ['OK\r\nx-injected: 1', 'O\nK', 'O\0K']) {
      refused(pack([FrameType.RESPONSE, 1, 200, reason, [], null, true]), `RESPONSE reason ${JSON.stringify(reason)}`);
      refused(pack([FrameType.INFO, 1, 103, reason, []]), `INFO reason ${JSON.stringify(reason)}`);
    }
    refused(pack([FrameType.OPEN, 1, 'r', 'GET', '/\r\nx: 1', [], '', null, true, false, 0]), 'a target with CRLF');
    refused(pack([FrameType.OPEN, 1, 'r', 'GET\n', '/', [], '', null, true, false, 0]), 'a method with LF');
  });

  test('settings that are not a settings map', () => {
    const bad: unknown[] = [
      null,
      [],
      Buffer.from('x'),
      'settings',
      {},
      { ...DEFAULT_SETTINGS, maxFrameBody: 0 },
      { ...DEFAULT_SETTINGS, maxStreams: -1 },
      { ...DEFAULT_SETTINGS, maxMessage: '131072' },
      { ...DEFAULT_SETTINGS, streamWindow: MAX_WINDOW + 1 },
      { ...DEFAULT_SETTINGS, connectionWindow: 2 ** 32 },
      { ...DEFAULT_SETTINGS, connectionWindow: 1.5 },
      { ...DEFAULT_SETTINGS, clusterEdges: 0 },
      { ...DEFAULT_SETTINGS, clusterEdges: '3' },
      { ...DEFAULT_SETTINGS, attachment: 0 },
      { ...DEFAULT_SETTINGS, attachment: 2 ** 53 },
      { ...DEFAULT_SETTINGS, attachment: 1.5 },
    ];
    for (const settings of bad) refused(pack([FrameType.READY, 0, 's', 'u', settings]), `settings ${JSON.stringify(settings)}`);
  });

  test('values that are not arrays', () => {
    for (const value of [null, true, 0, 7, -1, 1.5, 'OPEN', '', Buffer.from([0x93, 5, 0, 1]), { 0: 5, 1: 0, 2: 1 }, new Map([[1, 2]])]) {
      refused(pack(value), `the value ${String(value)}`);
    }
  });

  test('text is not a frame', () => {
    for (const text of ['hello', '[5,0,1]', '{"type":5}', '', '\u0093\u0005\u0000\u0001']) {
      refused(Buffer.from(text, 'utf8'), `the text ${JSON.stringify(text)}`);
    }
  });

  test('trailing bytes after a valid frame', () => {
    for (const frame of SAMPLES) {
      const bytes = encode(frame);
      for (const tail of [[0x00], [0xc0], [0x90], [0xff], [...encode([FrameType.WINDOW, 0, 1])]]) {
        const message = refused(Buffer.concat([bytes, Buffer.from(tail)]), `${label(frame)} + ${Buffer.from(tail).toString('hex')}`);
        assert.match(message, /trailing/);
      }
      refused(Buffer.concat([bytes, bytes]), `${label(frame)} twice`);
    }
  });

  test('trailing bytes after a large frame are refused quickly and with a short reason', () => {
    // msgpackr's own check would JSON-stringify the whole 4 MiB value into its error message.
    const bytes = Buffer.concat([encode([FrameType.DATA, 1, Buffer.alloc(4 * 1024 * 1024, 7), false]), Buffer.from([0xc0])]);
    const message = refused(bytes, 'a 4 MiB DATA frame and one more byte');
    assert.match(message, /1 trailing bytes/);
  });

  test('every prefix of every valid frame (truncation)', () => {
    let checked = 0;
    for (const frame of SAMPLES) {
      const bytes = encode(frame);
      for (let length = 0; length < bytes.length; length++) {
        refused(bytes.subarray(0, length), `${label(frame)} cut to ${length} of ${bytes.length} bytes`);
        checked++;
      }
    }
    assert.ok(checked > 1000);
  });

  test('extension types and the never-used byte 0xc1', () => {
    const cases: number[][] = [
      [0xc1],
      [0x92, 0x05, 0xc1],
      [0x93, 0x05, 0x00, 0xd4, 0x01, 0x00], // fixext 1
      [0x93, 0x05, 0x00, 0xd6, 0xff, 0x00, 0x00, 0x00, 0x00], // timestamp 32
      [0x93, 0x05, 0x00, 0xc7, 0x01, 0x05, 0x00], // ext 8
      [0x93, 0x05, 0x00, 0xc8, 0x00, 0x01, 0x05, 0x00], // ext 16
      [0x93, 0x05, 0x00, 0xc9, 0x00, 0x00, 0x00, 0x01, 0x05, 0x00], // ext 32
      [0x95, 0x01, 0x00, 0xa1, 0x61, 0xa1, 0x62, 0xd4, 0x72, 0x40], // a msgpackr record definition
    ];
    for (const bytes of cases) refused(Buffer.from(bytes), Buffer.from(bytes).toString('hex'));
    // msgpackr with records on (not plain msgpack) is refused too.
    const records = new Packr({ useRecords: true }).pack([FrameType.READY, 0, 's', 'u', { ...DEFAULT_SETTINGS }]);
    refused(records, 'a READY frame packed with msgpackr records');
  });

  test('huge declared lengths', () => {
    const cases: number[][] = [
      [0xdd, 0xff, 0xff, 0xff, 0xff, 0x05], // array 32 of 4G items
      [0xdc, 0xff, 0xff, 0x05, 0x00], // array 16 of 65535 items
      [0x93, 0x05, 0x00, 0xdf, 0xff, 0xff, 0xff, 0xff], // map 32
      [0x93, 0x05, 0x00, 0xde, 0xff, 0xff], // map 16
      [0x94, 0x03, 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00], // bin 32
      [0x94, 0x03, 0x01, 0xc5, 0xff, 0xff, 0x00], // bin 16
      [0x94, 0x03, 0x01, 0xc4, 0xff, 0x00], // bin 8
      [0x94, 0x06, 0x01, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff], // str 32
      [0x94, 0x06, 0x01, 0x01, 0xda, 0xff, 0xff], // str 16
      [0x94, 0x06, 0x01, 0x01, 0xd9, 0xff], // str 8
      [0x93, 0x05, 0x00, 0xcf], // uint 64 without its bytes
      [0x93, 0x05, 0x00, 0xcb, 0x00], // float 64 cut short
    ];
    for (const bytes of cases) refused(Buffer.from(bytes), Buffer.from(bytes).toString('hex'));
  });

  test('deep nesting', () => {
    for (const depth of [MAX_NESTING + 1, 100, 10_000, 1_000_000]) {
      const bytes = Buffer.concat([Buffer.alloc(depth, 0x91), Buffer.from([0xc0])]);
      assert.match(refused(bytes, `${depth} nested arrays`), /nest/);
    }
    const maps = Buffer.concat([Buffer.from([0x92, 0x05]), Buffer.alloc(100_000 * 2).fill(Buffer.from([0x81, 0xa0]))]);
    refused(maps, 'nested maps');
    // Nesting within the limit reaches the layout check, which refuses it for what it is.
    let value: unknown = 'x';
    for (let i = 0; i < MAX_NESTING - 2; i++) value = [value];
    assert.match(refused(pack([FrameType.RESPONSE, 1, 200, '', [value, value], null, true]), 'nested headers'), /RESPONSE/);
  });

  test('large input: junk, and large valid frames (size limits are the session\'s, not the codec\'s)', () => {
    const junk = Buffer.alloc(8 * 1024 * 1024, 0x91);
    junk[0] = 0xdd;
    refused(junk, '8 MiB of junk');
    const headers: string[] = [];
    for (let i = 0; i < 50_000; i++) headers.push(`x-h${i}`, 'v');
    const big: Frame = [FrameType.RESPONSE, 1, 200, 'OK', headers, Buffer.alloc(4 * 1024 * 1024), true];
    assert.deepEqual(decode(encode(big)), big);
  });

  test('the decoder is usable again after each kind of failure', () => {
    const failures = [
      Buffer.concat([Buffer.alloc(100_000, 0x91), Buffer.from([0xc0])]),
      Buffer.from([0x93, 0x05, 0x00, 0xd6, 0xff, 0x00, 0x00, 0x00, 0x00]),
      encode([FrameType.WINDOW, 0, 1]).subarray(0, 2),
      Buffer.concat([encode([FrameType.WINDOW, 0, 1]), Buffer.from([0])]),
    ];
    for (const bytes of failures) {
      refused(bytes, bytes.subarray(0, 8).toString('hex'));
      assert.deepEqual(decode(encode(SAMPLES[1]!)), SAMPLES[1]);
    }
  });
});

test('ProtocolError carries the GOAWAY code it causes', () => {
  const error = new ProtocolError('bad frame');
  assert.ok(error instanceof Error);
  assert.equal(error.name, 'ProtocolError');
  assert.equal(error.code, GoAwayCode.PROTOCOL_ERROR);
  assert.equal(error.message, 'bad frame');
});

test('the layout table covers every frame type', () => {
  for (const type of Object.values(FrameType)) assert.ok(LAYOUTS[type] !== undefined, FRAME_NAMES[type]);
});

describe('withBinaryRoom (an OPEN whose body is written in place)', () => {
  test('the room filled in place decodes as the frame encoded with that body, with and without a tunnel id', () => {
    const body = Buffer.from('a body gathered from pieces');
    for (const tail of [[], [300]]) {
      const open = (inline: Uint8Array): Frame =>
        [FrameType.OPEN, 5, 'req_1', 'POST', '/x', ['Host', 'h'], '127.0.0.1', inline, true, false, ...tail] as unknown as Frame;
      const after = 2 + (tail.length === 0 ? 0 : 3);
      const frame = withBinaryRoom(encode(open(new Uint8Array(0))), after, body.byteLength);
      body.copy(frame, frame.byteLength - after - body.byteLength);
      assert.deepEqual(decode(frame), decode(encode(open(body))));
    }
  });

  test('refuses a frame without an empty binary field where it is told to look', () => {
    assert.throws(() => withBinaryRoom(encode([FrameType.DATA, 1, Buffer.from('x'), true]), 1, 4), /no empty binary field/);
  });
});

describe('a DATA frame written around bytes already in place (copyWithDataRoom, markDataRoom, dataFrame)', () => {
  test('decodes as the frame encode writes (a bin 32 header whatever the size), for stream ids of every width and both ends, without a copy', () => {
    for (const stream of [1, 127, 128, 255, 256, 65_535, 65_536, 0xfffffff0]) {
      for (const size of [0, 1, 300, 70_000]) {
        for (const end of [false, true]) {
          const body = Buffer.alloc(size, 0x5a);
          const copy = copyWithDataRoom(body);
          const frame = dataFrame(stream, copy, end);
          const decoded = decode(frame);
          assert.deepEqual(decoded, decode(encode([FrameType.DATA, stream, body, end])), `stream ${stream}, ${size} bytes, end ${end}`);
          assert.equal(frame.buffer, copy.buffer, 'a view of the copy\'s buffer: no second copy');
          assert.deepEqual(copy, body, 'the bytes untouched');
        }
      }
    }
  });

  test('bytes without a room of their own are encoded (a copy); a part of a copy too', () => {
    const body = Buffer.alloc(500, 0x41);
    const plain = dataFrame(3, body, true);
    assert.notEqual(plain.buffer, body.buffer);
    assert.deepEqual(decode(plain), [FrameType.DATA, 3, body, true]);
    const copy = copyWithDataRoom(body);
    const part = dataFrame(3, copy.subarray(0, 100), false);
    assert.notEqual(part.buffer, copy.buffer, 'a part has no room after it: encoded');
    assert.deepEqual(decode(part), [FrameType.DATA, 3, body.subarray(0, 100), false]);
  });

  test('a room is only taken where there is one', () => {
    const buffer = Buffer.alloc(100);
    assert.throws(() => markDataRoom(buffer.subarray(3, 50), buffer), /no room/);
    assert.throws(() => markDataRoom(buffer.subarray(20, 100), buffer), /no room/);
    assert.throws(() => markDataRoom(Buffer.alloc(10), buffer), /no room/);
    const view = buffer.subarray(20, 50);
    markDataRoom(view, buffer);
    assert.equal(dataFrame(1, view, true).buffer, buffer.buffer);
  });
});
