/**
 * Captured exchanges: a ring buffer per (account, tunnel subdomain) in LMDB (DESIGN.md section 3).
 *
 * A ring has a fixed number of slots, the plan's captured-request count. Sequence numbers grow for
 * ever; `seq % capacity` picks the slot, so a new capture overwrites the oldest and retention costs no
 * deletes. The plan's time window is applied on every read and by a periodic sweep that frees expired
 * slots. A request id `req_<ring><seq>` names its ring and sequence, so a lookup is one read; a slot
 * that holds another sequence (overwritten) or an expired capture answers "not found".
 *
 * An account's captures count against its plan's capture quota in bytes, across all its rings (issue
 * 23): a counter per account, changed in the commit that writes or removes its captures. A capture that
 * would take the account past its quota is skipped (the request was answered all the same), and so is
 * every capture while the file system is below the edge's free-space floor, or when a commit fails.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import { closeAfterWrites } from './lmdb-close.js';
import { Packr, Unpackr } from 'msgpackr';
import { bodyLength, wholeBody, type KeptBody } from '../capture-buffer.js';
import { decode, type OpenFrame } from '../protocol/codec.js';
import { BLOCK_BYTES, BLOCK_RECORD_MIN_BYTES, BLOCKS_FILE, blocksFor, CaptureBlocks } from './capture-blocks.js';
import { batchSize, CaptureJournal, type JournalRecord } from './capture-journal.js';
import { formatBytes } from './free-space.js';
import { guardLmdbRejections, isWriteFailure, WriteFailures } from './write-failures.js';

/** What every capture records besides its heads and bodies. */
export interface CaptureFields {
  id: string;
  seq: number;
  subdomain: string;
  accountId: string;
  tokenId: string;
  clientAddress: string;
  method: string;
  /** Path and query as received. */
  path: string;
  status: number;
  receivedAt: number;
  durationMs: number;
  /** The edge's own error code when the edge answered instead of the local server. */
  error: string | null;
  /** The id of the capture this one replayed, if it is a replay. */
  replayOf: string | null;
  requestBodySize: number;
  requestTruncated: boolean;
  responseBodySize: number;
  responseTruncated: boolean;
}

/** A capture as readers (the API, replay) see it. */
export interface CaptureRecord extends CaptureFields {
  requestHeaders: string[];
  requestBody: Uint8Array | null;
  responseHeaders: string[];
  responseBody: Uint8Array | null;
}

export type CaptureDetail = CaptureRecord;

/**
 * A capture as LMDB keeps it. The request and response heads are kept as the frames that crossed the
 * tunnel (already msgpack), so writing a capture copies bytes instead of encoding every header again
 * (measured: ~8 µs per capture with the headers as strings, ~5 µs with frames). A body that travelled
 * inside its frame and was kept whole is not stored a second time.
 */
export interface StoredCapture extends CaptureFields {
  /** The OPEN frame as sent, or null when the head is in `requestHeaders` instead. */
  open: Uint8Array | null;
  requestHeaders: string[] | null;
  /** The kept request body, or null when it is the body inside `open`. */
  requestBody: Uint8Array | null;
  /** The RESPONSE frame as received, or null (the edge answered itself, or its body was cut). */
  response: Uint8Array | null;
  responseHeaders: string[] | null;
  /** The kept response body, or null when it is the body inside `response` (or there is none). */
  responseBody: Uint8Array | null;
}

/**
 * A capture as the edge hands it to the store: a StoredCapture whose bodies may still be in the chunks
 * they arrived in, which the encoding copies straight into the stored record (a 1 MiB body is not first
 * joined into a buffer of its own).
 */
export interface CaptureToStore extends Omit<StoredCapture, 'requestBody' | 'responseBody'> {
  requestBody: KeptBody | null;
  responseBody: KeptBody | null;
}

interface CaptureParts {
  requestHeaders: string[];
  requestBody: Uint8Array | null;
  responseHeaders: string[];
  responseBody: Uint8Array | null;
}

/**
 * A stored OPEN or RESPONSE frame. Captures written by an edge of protocol 1 hold that protocol's frames
 * (OPEN without `upgrade`, RESPONSE without `reason`), which protocol 2's decoder refuses: they are read
 * as plain msgpack arrays, so a data directory keeps its history across the upgrade (docs/protocol.md 2).
 */
function storedFrame(bytes: Uint8Array): unknown[] {
  try {
    return decode(bytes) as unknown[];
  } catch {
    const value = recordUnpackr.unpack(bytes as Buffer) as unknown;
    return Array.isArray(value) ? value : [];
  }
}

/** A stored capture's headers and bodies, read out of the frames they travel in (views, no copies). */
function captureParts(stored: StoredCapture): CaptureParts {
  let requestHeaders = stored.requestHeaders ?? [];
  let requestBody = stored.requestBody;
  if (stored.open !== null) {
    // OPEN keeps its headers and body at 5 and 7 in both protocols.
    const open = storedFrame(stored.open) as OpenFrame;
    requestHeaders = open[5] ?? [];
    requestBody ??= open[7] ?? null;
  }
  let responseHeaders = stored.responseHeaders ?? [];
  let responseBody = stored.responseBody;
  if (stored.response !== null) {
    const response = storedFrame(stored.response);
    // Protocol 2's RESPONSE has 7 elements (its reason at 3); protocol 1's had 6.
    const at = response.length === 7 ? 4 : 3;
    responseHeaders = (response[at] as string[] | undefined) ?? [];
    responseBody ??= (response[at + 1] as Uint8Array | null | undefined) ?? null;
  }
  return { requestHeaders, requestBody, responseHeaders, responseBody };
}

/** A stored capture in the shape readers use; bodies are copied out of LMDB's buffers. */
/**
 * `tcp` or `tls` for the record of a TCP or TLS passthrough connection (method `TCP` or `TLS`, status 0:
 * docs/tcp.md, Records), undefined for an HTTP exchange's.
 */
export function connectionRecordKind(record: { method: string; status: number }): 'tcp' | 'tls' | undefined {
  if (record.status !== 0) return undefined;
  return record.method === 'TCP' ? 'tcp' : record.method === 'TLS' ? 'tls' : undefined;
}

export function expandCapture(capture: StoredCapture | CaptureToStore): CaptureRecord {
  const stored: StoredCapture = { ...capture, requestBody: wholeBody(capture.requestBody), responseBody: wholeBody(capture.responseBody) };
  const { requestHeaders, requestBody, responseHeaders, responseBody } = captureParts(stored);
  const { open: _open, response: _response, ...fields } = stored;
  return {
    ...fields,
    requestHeaders,
    requestBody: requestBody === null ? null : Buffer.from(requestBody),
    responseHeaders,
    responseBody: responseBody === null ? null : Buffer.from(responseBody),
  };
}

export interface CaptureSummary {
  id: string;
  method: string;
  path: string;
  status: number;
  durationMs: number;
  receivedAt: number;
  /** The edge's own error code when it answered (SIGNATURE_INVALID: refused for its webhook signature), else null. */
  error: string | null;
}

interface RingRecord {
  ringId: number;
  accountId: string;
  subdomain: string;
  capacity: number;
  /** The next sequence number to hand out, as saved when the ring was last closed or marked open. */
  head: number;
  /** Every sequence below this was swept (expired and removed). */
  swept: number;
  /**
   * True when `head` was saved by a clean close and nothing was written since. A ring is marked not
   * clean (in its own commit) before this process writes its first capture to it; after a crash such a
   * ring's head is recovered from its slots. Absent in records of older versions: not clean.
   */
  clean?: boolean;
  /**
   * The ring's captures are in its account's capture bytes. Rings made before the quota (issue 23) are
   * not, until an edge takes them for writing again and adds them.
   */
  counted?: boolean;
}

export interface RingHandle {
  readonly ringId: number;
  readonly accountId: string;
  readonly subdomain: string;
  readonly capacity: number;
  /** Hands out the next sequence number and its request id. */
  next(): { seq: number; id: string };
}

export interface ListOptions {
  limit: number;
  /** Only captures older than this sequence (a `before` cursor). */
  beforeSeq?: number;
  retentionMs: number;
  now?: number;
}

export interface SearchOptions extends ListOptions {
  /** Captures looked at, at most, newest first from `beforeSeq`: the bound on one search's work. */
  maxScanned: number;
  /**
   * Body bytes read, at most (the search stops after the capture that passes it): with 1 MiB bodies
   * each way, 1,000 captures would be 2 GiB, seconds of the edge's event loop.
   */
  maxBodyBytes: number;
}

export interface SearchResult {
  /** The matching captures, newest first, at most `limit`. */
  matches: CaptureSummary[];
  /** Captures looked at. */
  scanned: number;
  /**
   * Where a further search would go on (its `before`): the last match when `limit` was reached, the
   * oldest capture looked at when a bound was; null when no older capture is left.
   */
  resumeBefore: string | null;
}

/**
 * Whether a stored capture holds `needle` (already lower-cased) in its method, path, status, request or
 * response headers or bodies, case-insensitively. Bodies are read as Latin-1 when the needle is ASCII:
 * one character a byte, so any body (binary included) matches byte for byte, ASCII letters in either
 * case, and no multi-byte character can fold into an ASCII one. A needle with other characters is looked
 * for in the bodies read as UTF-8.
 */
export function storedCaptureMatches(stored: StoredCapture, needle: string, asciiNeedle: boolean): boolean {
  return captureMatch(stored, needle, asciiNeedle).found;
}

/** The search of one capture: whether it matched, and the body bytes it read to know. */
function captureMatch(stored: StoredCapture, needle: string, asciiNeedle: boolean): { found: boolean; bodyBytes: number } {
  if (stored.method.toLowerCase().includes(needle) || stored.path.toLowerCase().includes(needle) || String(stored.status).includes(needle)) return { found: true, bodyBytes: 0 };
  const { requestHeaders, requestBody, responseHeaders, responseBody } = captureParts(stored);
  for (const headers of [requestHeaders, responseHeaders]) {
    for (const text of headers) if (text.toLowerCase().includes(needle)) return { found: true, bodyBytes: 0 };
  }
  const encoding = asciiNeedle ? 'latin1' : 'utf8';
  let bodyBytes = 0;
  for (const body of [requestBody, responseBody]) {
    if (body === null || body.byteLength < needle.length) continue;
    bodyBytes += body.byteLength;
    if (Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString(encoding).toLowerCase().includes(needle)) return { found: true, bodyBytes };
  }
  return { found: false, bodyBytes };
}

/**
 * The bytes a capture is stored as. LMDB gets one Buffer: a small msgpack header with the scalar fields
 * and the sections' lengths, then the sections themselves, copied as they are. Against letting LMDB's
 * msgpack encode the record it saves ~10% per write (5.5 instead of 6.1 µs per capture in turns of 100,
 * bench/store/capture.bench.ts), and a listing reads only the headers.
 *
 *   u32 LE header length | header | open frame | response frame | request body | response body
 */
const FORMAT = 1;
/**
 * The format of a stub: a record kept in blocks (src/store/capture-blocks.ts) leaves in its slot its own
 * u32 length and header with this format, then u32 LE the whole record's length. Listings, sweeps and the
 * recovery of a ring's head read only headers, so they read stubs as they read records.
 */
const FORMAT_IN_BLOCKS = 2;
const recordPackr = new Packr({ useRecords: false });
const recordUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });

function sectionLength(section: KeptBody | null): number {
  return section === null ? -1 : bodyLength(section);
}

export function encodeStoredCapture(c: StoredCapture | CaptureToStore): Buffer {
  return encodeStoredCaptureInto(c, null);
}

/** The bytes of a capture's frames and bodies: its record is these and a header of a few hundred bytes. */
export function sectionsLength(c: StoredCapture | CaptureToStore): number {
  let size = 0;
  for (const section of [c.open, c.response, c.requestBody, c.responseBody]) if (section !== null) size += bodyLength(section);
  return size;
}

/**
 * The record of `c`, in a fresh buffer or, when `arena` has room for it, in the arena's next bytes (a
 * view; the arena's `used` moves past it).
 */
function encodeStoredCaptureInto(c: StoredCapture | CaptureToStore, arena: RecordArena | null): Buffer {
  const header = packHeader(c);
  const sections = [c.open, c.response, c.requestBody, c.responseBody];
  const size = 4 + header.byteLength + sectionsLength(c);
  let bytes: Buffer;
  if (arena !== null && arena.buffer.byteLength - arena.used >= size) {
    bytes = arena.buffer.subarray(arena.used, arena.used + size);
    arena.used += size;
  } else {
    bytes = Buffer.allocUnsafe(size);
  }
  bytes.writeUInt32LE(header.byteLength, 0);
  header.copy(bytes, 4);
  let offset = 4 + header.byteLength;
  for (const section of sections) {
    if (section === null) continue;
    if (section instanceof Uint8Array) {
      bytes.set(section, offset);
      offset += section.byteLength;
      continue;
    }
    for (const chunk of section) {
      bytes.set(chunk, offset);
      offset += chunk.byteLength;
    }
  }
  return bytes;
}

function packHeader(c: StoredCapture | CaptureToStore): Buffer {
  return recordPackr.pack([
    FORMAT, c.id, c.seq, c.subdomain, c.accountId, c.tokenId, c.clientAddress, c.method, c.path, c.status,
    c.receivedAt, c.durationMs, c.error, c.replayOf, c.requestBodySize, c.requestTruncated, c.responseBodySize,
    c.responseTruncated, c.requestHeaders, c.responseHeaders,
    sectionLength(c.open), sectionLength(c.response), sectionLength(c.requestBody), sectionLength(c.responseBody),
  ]);
}

/**
 * A record not joined into one buffer: its length and header, then its sections' bytes in the chunks
 * they arrived in. A big record goes from these straight into its blocks (one `pwritev`), without the
 * copy into one buffer that a value LMDB stores needs: at 1 MiB that copy was ~6% of the edge's CPU a
 * request.
 */
export interface RecordInParts {
  readonly parts: readonly Uint8Array[];
  readonly byteLength: number;
}

function encodeInParts(c: StoredCapture | CaptureToStore): RecordInParts {
  const header = packHeader(c);
  const head = Buffer.allocUnsafe(4 + header.byteLength);
  head.writeUInt32LE(header.byteLength, 0);
  header.copy(head, 4);
  const parts: Uint8Array[] = [head];
  let byteLength = head.byteLength;
  for (const section of [c.open, c.response, c.requestBody, c.responseBody]) {
    if (section === null) continue;
    for (const chunk of section instanceof Uint8Array ? [section] : section) {
      if (chunk.byteLength === 0) continue;
      parts.push(chunk);
      byteLength += chunk.byteLength;
    }
  }
  return { parts, byteLength };
}

/** Reused memory for the records of a turn committed at once (`journalAll`); see `CaptureStore.arena`. */
interface RecordArena {
  readonly buffer: Buffer;
  used: number;
}

/** The arena's size: a turn's big records up to this many bytes share it, larger ones get their own. */
export const RECORD_ARENA_BYTES = 4 * 1024 * 1024;

/**
 * The capture environment's page size. LMDB keeps a value of up to about half a page in its leaf and puts
 * a larger one in overflow pages of its own. At 4 KiB a capture of a 1 KiB exchange (~2.5 KiB) took an
 * overflow page, and its commit wrote that page and a copy of the leaf holding its key. At 8 KiB it lives
 * in the leaf: one page written, not two. That matters most when a commit's captures are spread over many
 * rings (a leaf each). Measured with 200 tunnels × 2 connections (bench/RESULTS.md, issue 25's tuning
 * log): the edge's CPU per request fell by 2-5 µs, and by ~2 µs with one tunnel.
 */
export const CAPTURE_PAGE_BYTES = 8192;

type Header = [
  number, string, number, string, string, string, string, string, string, number, number, number,
  string | null, string | null, number, boolean, number, boolean, string[] | null, string[] | null,
  number, number, number, number,
];

function readHeader(bytes: Uint8Array): { header: Header; end: number } {
  const length = bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16) | (bytes[3]! << 24);
  const header = recordUnpackr.unpack(bytes.subarray(4, 4 + length) as Buffer) as Header;
  if (header[0] !== FORMAT && header[0] !== FORMAT_IN_BLOCKS) throw new Error(`unknown capture format ${String(header[0])}`);
  return { header, end: 4 + length };
}

/** Whether a record's header starts as every record this version writes does (see `seqOf`), with `format`. */
function headerOfFormat(bytes: Uint8Array, format: number): boolean {
  return bytes.length >= 33 && bytes[4] === 0xdc && bytes[5] === 0x00 && bytes[6] === 0x18 && bytes[7] === format && bytes[8] === 0xb8;
}

/** Whether a slot holds a stub, its record in blocks. */
function isStub(bytes: Uint8Array): boolean {
  return headerOfFormat(bytes, FORMAT_IN_BLOCKS);
}

/** The bytes of the record a slot's value stands for: its own length, or a stub's record's. */
function recordSize(bytes: Uint8Array): number {
  // `length`, not `byteLength`: getBinaryFast's buffer is a shared one, longer than the value it holds.
  if (!isStub(bytes)) return bytes.length;
  const at = 4 + (bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16) | (bytes[3]! << 24));
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16)) + bytes[at + 3]! * 0x1000000;
}

/** The stub of a record of `length` bytes that starts with `head` (its length and header, of this version's shape: `headerOfFormat(head, FORMAT)`). */
function stubOf(head: Buffer, length: number): Buffer {
  const headerEnd = 4 + head.readUInt32LE(0);
  const stub = Buffer.allocUnsafe(headerEnd + 4);
  head.copy(stub, 0, 0, headerEnd);
  stub[7] = FORMAT_IN_BLOCKS;
  stub.writeUInt32LE(length, headerEnd);
  return stub;
}

/** The stored capture in `bytes`; its sections are views of `bytes`. */
export function decodeStoredCapture(bytes: Uint8Array): StoredCapture {
  const { header: h, end } = readHeader(bytes);
  if (h[0] === FORMAT_IN_BLOCKS) throw new Error('decodeStoredCapture: a stub; its record is in the blocks file');
  let offset = end;
  const section = (length: number): Uint8Array | null => {
    if (length < 0) return null;
    const view = bytes.subarray(offset, offset + length);
    offset += length;
    return view;
  };
  const open = section(h[20]);
  const response = section(h[21]);
  const requestBody = section(h[22]);
  const responseBody = section(h[23]);
  return {
    id: h[1], seq: h[2], subdomain: h[3], accountId: h[4], tokenId: h[5], clientAddress: h[6], method: h[7],
    path: h[8], status: h[9], receivedAt: h[10], durationMs: h[11], error: h[12], replayOf: h[13],
    requestBodySize: h[14], requestTruncated: h[15], responseBodySize: h[16], responseTruncated: h[17],
    requestHeaders: h[18], responseHeaders: h[19], open, response, requestBody, responseBody,
  };
}

/**
 * The sequence number of a stored capture, read from the digits of its id without decoding the header:
 * recovery and the late-capture check read many slots for this one number. The header starts with a
 * msgpack array of 24 (dc 00 18), the format (01) and the id as a 24-character string (b8); the last 12
 * characters of the id are the sequence in hex. Anything else is decoded the long way.
 */
function seqOf(bytes: Uint8Array): number {
  if (!headerOfFormat(bytes, FORMAT) && !headerOfFormat(bytes, FORMAT_IN_BLOCKS)) return readHeader(bytes).header[2];
  let seq = 0;
  for (let i = 33 - SEQ_DIGITS; i < 33; i++) {
    const c = bytes[i]!;
    seq = seq * 16 + (c <= 0x39 ? c - 0x30 : c - 0x57);
  }
  return seq;
}

/** The fields a listing needs, read from the header alone. */
function summaryOf(bytes: Uint8Array): CaptureSummary & { seq: number } {
  const { header: h } = readHeader(bytes);
  return { id: h[1], seq: h[2], method: h[7], path: h[8], status: h[9], receivedAt: h[10], durationMs: h[11], error: h[12] };
}

type RingKey = [string, string];
type SlotKey = [number, number];

const SEQ_DIGITS = 12;
const RING_DIGITS = 8;
/** Ring ids are 8 hex digits in a request id. */
const MAX_RING_ID = 0xffffffff;
/** In cluster mode each edge numbers its rings in its own span, so request ids never collide across edges. */
const CLUSTER_RING_SPAN = 1 << 20;
export const MAX_CLUSTER_NODE_NUMBER = Math.floor(MAX_RING_ID / CLUSTER_RING_SPAN) - 1;

/** The ring ids a capture store may hand out: all of them on a single edge, one span per edge in a cluster. */
export interface RingIdSpace {
  first: number;
  last: number;
}

/**
 * Edge number `n` (1 to MAX_CLUSTER_NODE_NUMBER, given by the cluster's registry) numbers its rings from
 * n × 2^20: a request id then names the edge that stored it. Rings made before the data directory joined
 * a cluster keep their ids (below 2^20, edge number 0).
 */
export function clusterRingIds(nodeNumber: number): RingIdSpace {
  if (!Number.isInteger(nodeNumber) || nodeNumber < 1 || nodeNumber > MAX_CLUSTER_NODE_NUMBER) {
    throw new Error(`a cluster edge number must be 1 to ${MAX_CLUSTER_NODE_NUMBER}, not ${nodeNumber}`);
  }
  return { first: nodeNumber * CLUSTER_RING_SPAN, last: (nodeNumber + 1) * CLUSTER_RING_SPAN - 1 };
}

/** The cluster edge number a request id was stored by (0 for ids from before cluster mode), or null when it is not an id. */
export function nodeNumberOfCaptureId(id: string): number | null {
  const parsed = parseCaptureId(id);
  return parsed === null ? null : Math.floor(parsed.ringId / CLUSTER_RING_SPAN);
}

const ID_PATTERN = /^req_([0-9a-f]{8})([0-9a-f]{12})$/;

export function captureId(ringId: number, seq: number): string {
  return `req_${ringId.toString(16).padStart(RING_DIGITS, '0')}${seq.toString(16).padStart(SEQ_DIGITS, '0')}`;
}

export function parseCaptureId(id: string): { ringId: number; seq: number } | null {
  const match = ID_PATTERN.exec(id);
  if (match === null) return null;
  return { ringId: parseInt(match[1]!, 16), seq: parseInt(match[2]!, 16) };
}

/**
 * The bytes each slot of a ring holds, in an array grown as slots are filled (a ring fills from slot 0
 * up) instead of one Uint32 per slot from the start: a PRO ring has 10,000 slots, and 40 KB per ring
 * was 39 of the 40 KiB each idle tunnel cost the edge (issue 25). Slots past the array hold nothing.
 */
export class SlotSizes {
  private sizes: Uint32Array;

  constructor(
    readonly capacity: number,
    sizes: Uint32Array = new Uint32Array(0),
  ) {
    let held = sizes.length;
    while (held > 0 && sizes[held - 1] === 0) held--;
    this.sizes = held === sizes.length ? sizes : sizes.slice(0, held);
  }

  get(slot: number): number {
    return slot < this.sizes.length ? this.sizes[slot]! : 0;
  }

  set(slot: number, size: number): void {
    if (slot >= this.sizes.length) {
      if (size === 0) return;
      const grown = new Uint32Array(Math.min(this.capacity, Math.max(slot + 1, this.sizes.length * 2, 64)));
      grown.set(this.sizes);
      this.sizes = grown;
    }
    this.sizes[slot] = size;
  }

  total(): number {
    let total = 0;
    for (const size of this.sizes) total += size;
    return total;
  }

  /** What this ring's sizes take in memory, in bytes. */
  get heldBytes(): number {
    return this.sizes.byteLength;
  }

  /** As a clean close saves them: Uint32s from slot 0, as many as are held (fewer than the ring's slots when it never filled). */
  toBuffer(): Buffer {
    return Buffer.from(this.sizes.buffer, this.sizes.byteOffset, this.sizes.byteLength);
  }
}

/** A ring as this process uses it. */
class OpenRing implements RingHandle {
  readonly ringId: number;
  readonly accountId: string;
  readonly subdomain: string;
  readonly capacity: number;
  /** The next sequence to hand out. */
  head: number;
  /** Every sequence below this was swept. */
  swept: number;
  /** This process may write captures to the ring: it is marked not clean in LMDB until close(). */
  writing = false;
  counted: boolean;
  /** The bytes each slot holds, known once the ring is taken for writing (or read after a crash). */
  sizes: SlotSizes | null;
  private readonly idPrefix: string;

  constructor(
    stored: RingRecord,
    head: number,
    /** The saved head was exact when the ring was loaded (a clean close before). */
    readonly loadedClean: boolean,
    sizes: SlotSizes | null,
  ) {
    this.ringId = stored.ringId;
    this.accountId = stored.accountId;
    this.subdomain = stored.subdomain;
    this.capacity = stored.capacity;
    this.head = head;
    this.swept = stored.swept;
    this.counted = stored.counted === true;
    this.sizes = sizes;
    this.idPrefix = captureId(stored.ringId, 0).slice(0, 4 + RING_DIGITS);
  }

  /** Ring id 0 is never stored: the ring of a tunnel whose ring could not be made (a full disk). */
  get detached(): boolean {
    return this.ringId === 0;
  }

  next(): { seq: number; id: string } {
    const seq = this.head++;
    return { seq, id: this.idPrefix + seq.toString(16).padStart(SEQ_DIGITS, '0') };
  }

  /** The ring's record as it is saved; `clean` only by close(), and for a ring this process never wrote. */
  record(clean = !this.writing && this.loadedClean, counted = this.counted): RingRecord {
    return { ringId: this.ringId, accountId: this.accountId, subdomain: this.subdomain, capacity: this.capacity, head: this.head, swept: this.swept, clean, counted };
  }
}

/** Saved slot sizes are Uint32s from slot 0, at most one per slot (a clean close before issue 25 saved one for every slot). */
function savedSizesFit(saved: Buffer, capacity: number): boolean {
  return saved.byteLength % 4 === 0 && saved.byteLength <= capacity * 4;
}

/** An account's captures on this edge, as committed: the bytes its counted rings' slots hold. */
interface AccountCaptures {
  readonly accountId: string;
  bytes: number;
  /** The plan's capture quota its latest ring was taken with; Infinity until one is. */
  quota: number;
  /** The commit that last changed `bytes` in memory (each account's counter is written once a commit). */
  commit: number;
  /** `bytes` before that commit, restored if it fails. */
  before: number;
  /** When the log last said this account is at its quota (once an hour at most). */
  toldFullAt: number;
}

const QUOTA_NOTICE_MS = 3_600_000;

/** A capture whose frames and bodies come to this many bytes or more is not journaled: its turn commits at once (`journalAll`). */
export const JOURNAL_MAX_CAPTURE_BYTES = 64 * 1024;
/** The capture journal's file in the store's directory (src/store/capture-journal.ts). */
export const JOURNAL_FILE = 'journal-v2';

/** Captures not written, by why (burrow_captures_skipped_total). */
export interface SkippedCaptures {
  /** Over the account's capture quota. */
  quota: number;
  /** The file system below the free-space floor. */
  disk: number;
  /** The commit failed, or the ring could not be taken for writing. */
  error: number;
}

/** What the capture store reads of the free-space floor (src/store/free-space.ts). */
export interface SpaceGauge {
  readonly low: boolean;
  spent(bytes: number): void;
}

/** A capture on its way to LMDB, as `journalAll` hands it over: `bytes` null when it is not written (over quota). */
export interface JournaledCapture {
  readonly ring: RingHandle;
  readonly seq: number;
  /** In parts: a big capture of a turn committed at once, whose record goes to blocks (never journaled). */
  readonly bytes: Buffer | RecordInParts | null;
}

/** What `writeAll` and `journalAll` take: the exchange's capture, asked for only when it is written. */
export interface PendingCapture {
  readonly ring: RingHandle;
  readonly seq: number;
  storedCapture(): CaptureToStore;
}

/**
 * What a write transaction did to the blocks (`putRecord`, `removeRecord`): blocks it took for new
 * records, blocks whose stubs it overwrote or removed, and the index entries it changed in memory, as
 * (ring id, slot, blocks before) to put back if the commit fails.
 */
class BlockChange {
  readonly taken: Uint32Array[] = [];
  readonly freed: Uint32Array[] = [];
  readonly undo: (number | Uint32Array | undefined)[] = [];
}

export interface CaptureStoreOptions {
  /** fsync every commit (`--capture-fsync`); there is no journal then (a commit is the durable step). */
  fsync?: boolean;
  /** The most the capture journal holds between commits (JOURNAL_CAPACITY; tests make it small). */
  journalCapacity?: number;
  ringIds?: RingIdSpace;
  /** Where failed writes are counted and logged; by default a reporter of the store's own. */
  failures?: WriteFailures;
  /** The free-space floor; none by default. */
  space?: SpaceGauge;
  /** Where an account reaching its capture quota is said (once an hour per account). */
  log?: (line: string) => void;
}

export class CaptureStore {
  private readonly rings: Database<RingRecord, RingKey>;
  private readonly ringsById: Database<RingKey, number>;
  private readonly slots: Database<Buffer, SlotKey>;
  private readonly meta: Database<number, string>;
  /** Each account's capture bytes (the quota's counter), committed with the captures themselves. */
  private readonly accountBytes: Database<number, string>;
  /** The slot sizes of a ring closed cleanly, by ring id (Uint32 per slot): loaded when it is written again. */
  private readonly slotSizes: Database<Buffer, number>;
  /** The blocks of each slot whose record is in the blocks file (Uint32 per block), committed with its stub. */
  private readonly blockIndex: Database<Buffer, SlotKey>;
  /** The block index as committed, by ring id then slot. */
  private readonly blocksOf = new Map<number, Map<number, Uint32Array>>();
  /** Big records' blocks (src/store/capture-blocks.ts); null for a store made on a root directly, whose records all stay in LMDB. */
  private readonly blocks: CaptureBlocks | null;
  /** Every commit fsyncs (`--capture-fsync`): the blocks a commit wrote are synced before it. */
  private readonly fsync: boolean;
  /** Rings in use by this process, by ring id: their heads live here, saved by close(). */
  private readonly open = new Map<number, OpenRing>();
  /** Accounts whose counter this process has read, by id. */
  private readonly accounts = new Map<string, AccountCaptures>();
  private commits = 0;
  /** Bytes of every account's captures on this edge. */
  storedBytes = 0;
  readonly skipped: SkippedCaptures = { quota: 0, disk: 0, error: 0 };
  readonly failures: WriteFailures;
  private readonly space: SpaceGauge | null;
  private readonly ringIds: RingIdSpace;
  private readonly log: (line: string) => void;

  /**
   * Opens the capture log in its own LMDB environment in `dir` (DESIGN.md section 3, with one measured
   * change, docs/architecture.md "Capture durability"). Accounts and tokens keep LMDB's full sync in
   * the main environment; captures, written for every request, commit without an fsync (`noSync`)
   * unless `fsync` is set. A committed capture is then in the operating system's hands, which is what
   * surviving a kill -9 of the edge needs; `sync()` (the edge calls it every second) bounds what a
   * power loss could take. Measured here: a commit with fsync costs 0.4-1.4 ms, without ~20 µs.
   *
   * Pages are written with pwrite, never through a writable memory map (`useWritemap`): LMDB grows a
   * mapped file sparsely, and a page the file system cannot back once the disk is full kills the process
   * with SIGBUS (issue 23). Without the map, a full disk fails the one commit.
   *
   * A new environment gets pages of CAPTURE_PAGE_BYTES; one made before keeps the size it was made with.
   */
  static open(dir: string, options: CaptureStoreOptions = {}): CaptureStore {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    guardLmdbRejections();
    const root = open({ path: dir, noSubdir: false, maxDbs: 8, compression: false, noSync: options.fsync !== true, pageSize: CAPTURE_PAGE_BYTES });
    root.readerCheck();
    // `journal` is where a version before the journal's laps kept it: read once, removed after its replay.
    const journal = options.fsync === true ? null : new CaptureJournal(join(dir, JOURNAL_FILE), join(dir, 'journal'), options.journalCapacity);
    return new CaptureStore(root, options, journal, join(dir, BLOCKS_FILE));
  }

  /**
   * Where the records of a turn committed at once are encoded (`journalAll`), reused from one such turn
   * to the next instead of a fresh buffer per record: at POST 64 KiB @100 those buffers were half the
   * edge's large allocations, and V8 answers large allocations with scavenges and mark-compacts of their
   * own (bench/RESULTS.md, tuning log). Made at the first big capture; `used` is 0 when nothing queued
   * lives in it.
   */
  private arena: RecordArena | null = null;

  /** The arena, empty, or null while queued records still live in it (then each record gets its own buffer). */
  private freeArena(): RecordArena | null {
    const arena = (this.arena ??= { buffer: Buffer.allocUnsafe(RECORD_ARENA_BYTES), used: 0 });
    return arena.used === 0 ? arena : null;
  }

  /** The journal (src/store/capture-journal.ts); null with `fsync`, and for a store made on a root directly. */
  private readonly journal: CaptureJournal | null;
  /** A commit (or the replay) failed after its captures were journaled: the journal is kept until a commit that works writes it (`recommitJournal`) or a restart replays it. */
  private journalHoldsUncommitted = false;
  /** The last `commitCaptures` failed (and was reported). */
  private lastCommitFailed = false;
  /** Journaled captures not yet committed to LMDB (`journalAll`, `commitQueued`). */
  private queue: JournaledCapture[] = [];
  private queueBytes = 0;
  /**
   * After a replay that could not commit (a full disk at start): per ring id, the sequence after the
   * newest one the journal holds. Those captures were answered, so their ids are never handed out again.
   */
  private readonly journaledHeads = new Map<number, number>();

  constructor(
    private readonly root: RootDatabase,
    options: Pick<CaptureStoreOptions, 'ringIds' | 'failures' | 'space' | 'log' | 'fsync'> = {},
    journal: CaptureJournal | null = null,
    /** Where big records go (src/store/capture-blocks.ts); without it they stay whole in LMDB. */
    blocksPath: string | null = null,
  ) {
    this.fsync = options.fsync === true;
    this.log = options.log ?? (() => {});
    this.ringIds = options.ringIds ?? { first: 1, last: MAX_RING_ID };
    this.failures = options.failures ?? new WriteFailures();
    this.space = options.space ?? null;
    this.rings = root.openDB({ name: 'capture-rings', encoding: 'msgpack' });
    this.ringsById = root.openDB({ name: 'capture-rings-by-id', encoding: 'msgpack' });
    this.slots = root.openDB({ name: 'capture-slots', encoding: 'binary' });
    this.meta = root.openDB({ name: 'capture-meta', encoding: 'msgpack' });
    this.accountBytes = root.openDB({ name: 'capture-account-bytes', encoding: 'msgpack' });
    this.slotSizes = root.openDB({ name: 'capture-slot-sizes', encoding: 'binary' });
    this.blockIndex = root.openDB({ name: 'capture-blocks', encoding: 'binary' });
    const owned: Uint32Array[] = [];
    for (const { key, value } of this.blockIndex.getRange()) {
      const [ringId, slot] = key as SlotKey;
      const blocks = new Uint32Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
      this.ownedBy(ringId).set(slot, blocks);
      owned.push(blocks);
    }
    this.blocks = blocksPath === null ? null : new CaptureBlocks(blocksPath, owned);
    this.journal = journal;
    if (journal !== null) this.replay(journal);
    for (const { value } of this.accountBytes.getRange()) this.storedBytes += value;
  }

  /**
   * Writes what the journal holds and LMDB does not (the process died between a journal write and its
   * commit), in one commit, then empties the journal. A record whose slot holds the same or a newer
   * capture is skipped; a replayed capture moves its account's bytes as a commit would, and marks its ring
   * not clean, so that loading it reads its head and sizes from its slots. The quota is not applied: what
   * was journaled was under it when it was written. When the commit fails the journal stays for the next
   * start.
   */
  private replay(journal: CaptureJournal): void {
    const records = journal.existing();
    if (records.length > 0) {
      const change = new BlockChange();
      try {
        this.root.transactionSync(() => {
          const added = new Map<string, number>();
          for (const record of records) {
            if (!holdsSeq(record)) break;
            const missing = this.missingFromSlot(record);
            if (missing === null) continue;
            const { key, stored, slot, oldSize } = missing;
            this.putRecord(slot[0], slot[1], record.seq, record.bytes, change);
            if (stored.counted === true) added.set(stored.accountId, (added.get(stored.accountId) ?? 0) + record.bytes.byteLength - oldSize);
            if (stored.clean === true) this.rings.put(key, { ...stored, clean: false });
          }
          for (const [accountId, delta] of added) this.accountBytes.put(accountId, (this.accountBytes.get(accountId) ?? 0) + delta);
          this.blocksWritten(change);
        });
        this.committed(change);
      } catch (error) {
        this.failed(change);
        if (!isWriteFailure(error) && !isFileWriteFailure(error)) throw error;
        this.failures.report('captures', error);
        // Kept for the next start; meanwhile no id of theirs is handed out again.
        this.journalHoldsUncommitted = true;
        for (const record of records) {
          if (!holdsSeq(record)) break;
          this.journaledHeads.set(record.ringId, Math.max(this.journaledHeads.get(record.ringId) ?? 0, record.seq + 1));
        }
        return;
      }
    }
    journal.empty();
  }

  /**
   * A journal record's ring and slot when the slot does not hold its capture or a newer one (what the
   * replay and `recommitJournal` write); null when it does, or when the ring is gone.
   */
  private missingFromSlot(record: JournalRecord): { key: RingKey; stored: RingRecord; slot: SlotKey; oldSize: number } | null {
    const key = this.ringsById.get(record.ringId);
    const stored = key === undefined ? undefined : this.rings.get(key);
    if (key === undefined || stored === undefined) return null;
    const slot: SlotKey = [record.ringId, record.seq % stored.capacity];
    const existing = this.slots.getBinaryFast(slot);
    if (existing !== undefined && seqOf(existing) >= record.seq) return null;
    return { key, stored, slot, oldSize: existing === undefined ? 0 : recordSize(existing) };
  }

  /**
   * The ring of (account, subdomain) to write captures to, created with `capacity` slots when it does
   * not exist yet; `quotaBytes` is the account's capture quota (its plan's, read at connect as
   * `capacity` is). Synchronous: a tunnel connect needs its ring before the upgrade completes. The first
   * call for a ring in this process marks it not clean in one small synchronous commit, before any of
   * its captures can be written (see `load`). Never throws for the disk: when the ring cannot be made
   * (a full disk) the tunnel gets a detached ring, whose captures are skipped, and when it cannot be
   * marked its captures are skipped until a later commit marks it.
   */
  ring(accountId: string, subdomain: string, capacity: number, quotaBytes = Infinity): RingHandle {
    this.accountOf(accountId).quota = quotaBytes;
    let createdNow = false;
    let record: RingRecord;
    try {
      record =
        this.rings.get([accountId, subdomain]) ??
        this.root.transactionSync(() => {
          const existing = this.rings.get([accountId, subdomain]);
          if (existing !== undefined) return existing;
          const ringId = Math.max(this.meta.get('next-ring-id') ?? 1, this.ringIds.first);
          if (ringId > this.ringIds.last) throw new Error(`no ring ids left in ${this.ringIds.first}-${this.ringIds.last}`);
          const created: RingRecord = { ringId, accountId, subdomain, capacity, head: 0, swept: 0, clean: false, counted: true };
          this.meta.put('next-ring-id', ringId + 1);
          this.rings.put([accountId, subdomain], created);
          this.ringsById.put(ringId, [accountId, subdomain]);
          createdNow = true;
          return created;
        });
    } catch (error) {
      if (!isWriteFailure(error)) throw error;
      this.failures.report('captures', error);
      return new OpenRing({ ringId: 0, accountId, subdomain, capacity, head: 0, swept: 0 }, 0, false, null);
    }
    const ring = this.load(record, createdNow);
    // Below the free-space floor nothing is written; the first capture after it marks the ring.
    if (this.space?.low !== true) this.startWriting(ring);
    return ring;
  }

  /**
   * The ring as this process uses it, loaded once. A ring closed cleanly has its head saved. Any other
   * may have been written up to a crash: its head follows the newest sequence in its slots, found by
   * reading every slot (each names the sequence it holds, read from its id's digits without decoding
   * the rest), or the swept mark if it is higher; the same pass notes each slot's size. Measured
   * (docs/architecture.md, "Capture durability"): 5.8 ms for a FREE ring of 1,000, 92 ms for a PRO ring
   * of 10,000 (a page fault a slot after a restart), only after a crash and only for the rings that were
   * being written. Nothing is added to a commit: saving the head in commits, even once in 256 sequences,
   * cost every lone commit ~0.9 µs. A sequence handed out to a request whose capture never committed (in
   * flight at the crash) may be handed out again; a committed one never is.
   */
  private load(stored: RingRecord, createdNow = false): OpenRing {
    const cached = this.open.get(stored.ringId);
    if (cached !== undefined) return cached;
    const clean = stored.clean === true;
    let head = stored.head;
    let sizes: SlotSizes | null = null;
    // A ring this process has just created has a ring id never used before: none of its slots can hold
    // anything, and reading all of them (10,000 for a PRO ring) made a first connect cost ~3.5 ms of CPU.
    if (createdNow) sizes = new SlotSizes(stored.capacity);
    else if (!clean) {
      head = stored.swept;
      sizes = new SlotSizes(stored.capacity);
      for (let slot = 0; slot < stored.capacity; slot++) {
        const bytes = this.slots.getBinaryFast([stored.ringId, slot]);
        if (bytes === undefined) continue;
        sizes.set(slot, recordSize(bytes));
        const seq = seqOf(bytes);
        if (seq >= head) head = seq + 1;
      }
    }
    head = Math.max(head, this.journaledHeads.get(stored.ringId) ?? 0);
    const ring = new OpenRing(stored, head, clean, sizes);
    this.open.set(ring.ringId, ring);
    return ring;
  }

  /**
   * Takes a ring for writing: its slot sizes known (saved by its last clean close, else read from its
   * slots), its record marked not clean, and a ring from before the quota added to its account's bytes,
   * in one small commit when there is anything to mark. False when that commit fails.
   */
  private startWriting(ring: OpenRing): boolean {
    if (ring.writing) return true;
    if (ring.detached) return false;
    ring.sizes ??= this.savedSizes(ring) ?? this.readSizes(ring);
    if (ring.loadedClean || !ring.counted) {
      const account = this.accountOf(ring.accountId);
      let added = 0;
      if (!ring.counted) added = ring.sizes.total();
      try {
        this.root.transactionSync(() => {
          this.rings.put([ring.accountId, ring.subdomain], ring.record(false, true));
          if (added > 0) this.accountBytes.put(ring.accountId, account.bytes + added);
        });
      } catch (error) {
        if (!isWriteFailure(error)) throw error;
        this.failures.report('captures', error);
        return false;
      }
      account.bytes += added;
      this.storedBytes += added;
      ring.counted = true;
    }
    ring.writing = true;
    return true;
  }

  /** The slot sizes a clean close saved, when the ring was loaded clean and counted. */
  private savedSizes(ring: OpenRing): SlotSizes | null {
    if (!ring.loadedClean || !ring.counted) return null;
    const saved = this.slotSizes.getBinary(ring.ringId);
    if (saved === undefined || !savedSizesFit(saved, ring.capacity)) return null;
    return new SlotSizes(ring.capacity, new Uint32Array(saved.buffer.slice(saved.byteOffset, saved.byteOffset + saved.byteLength)));
  }

  /** Says, once an hour per account, that an account's captures are being skipped for its quota. */
  private overQuota(account: AccountCaptures): void {
    const now = Date.now();
    if (now - account.toldFullAt < QUOTA_NOTICE_MS) return;
    account.toldFullAt = now;
    this.log(
      `captures: account ${account.accountId} holds ${formatBytes(account.bytes)} of captures, its plan's quota of ${formatBytes(account.quota)} on this edge: ` +
        'its new captures are skipped (requests are still forwarded) until older ones expire or are overwritten',
    );
  }

  /** Each slot's size, read from the slots (`length`, not the buffer's: a getBinaryFast buffer is a shared one, longer than its value). */
  private readSizes(ring: OpenRing): SlotSizes {
    const sizes = new SlotSizes(ring.capacity);
    for (let slot = 0; slot < ring.capacity; slot++) {
      const bytes = this.slots.getBinaryFast([ring.ringId, slot]);
      sizes.set(slot, bytes === undefined ? 0 : recordSize(bytes));
    }
    return sizes;
  }

  /** The account's capture bytes as this process knows them (read from LMDB the first time). */
  private accountOf(accountId: string): AccountCaptures {
    let account = this.accounts.get(accountId);
    if (account === undefined) {
      const bytes = this.accountBytes.get(accountId) ?? 0;
      account = { accountId, bytes, quota: Infinity, commit: 0, before: bytes, toldFullAt: -Infinity };
      this.accounts.set(accountId, account);
    }
    return account;
  }

  /**
   * Writes captures into their slots in one synchronous transaction and returns how many it wrote. When
   * it returns they are committed: a kill -9 of the process cannot lose them. Each write moves its
   * account's bytes by its size less the size of what it overwrites (one counter put per account per
   * commit). Not written, and counted in `skipped`: every capture while the file system is below its
   * free-space floor (nothing is written then); a capture that would take its account past its quota
   * (the slot's older capture goes all the same, as an overwrite would take it, so the account's bytes
   * only fall); all of them when the commit fails (reported, never thrown: the requests are answered
   * regardless). A capture that completes after a newer one took its slot (a request slower than
   * `capacity` later ones) is not written over it.
   */
  writeAll(batch: readonly PendingCapture[]): number {
    if (this.space?.low === true) {
      this.skipped.disk += batch.length;
      return 0;
    }
    this.markRings(batch);
    return this.commitCaptures(batch, (item) => this.encodeForCommit(item.storedCapture(), null));
  }

  /** A capture's record for a commit: in parts when it will go to blocks, else whole (in `arena` when it fits). */
  private encodeForCommit(capture: CaptureToStore, arena: RecordArena | null): Buffer | RecordInParts {
    if (this.blocks !== null && sectionsLength(capture) >= BLOCK_RECORD_MIN_BYTES) return encodeInParts(capture);
    return encodeStoredCaptureInto(capture, arena);
  }

  /** Whether `journalAll` is in use: captures reach LMDB after their answers, through the journal. */
  get journaling(): boolean {
    return this.journal !== null;
  }

  /** Journaled captures waiting for `commitQueued`. */
  get queuedCaptures(): number {
    return this.queue.length;
  }

  /** The bytes of the journaled captures waiting for `commitQueued`. */
  get queuedBytes(): number {
    return this.queueBytes;
  }

  /**
   * The durable step of a journaled write, before the answers go out: the captures that will be written
   * (under their account's quota) are encoded once and written to the journal in one write(). When it
   * returns they survive a kill -9 as committed ones do. They wait in a queue for `commitQueued`, which
   * the edge calls a few milliseconds later (one LMDB commit for many turns), and which every read of
   * this store calls first: a read never misses a capture whose answer went out. Skipped (and counted)
   * as `writeAll` skips: below the free-space floor, and all of them when the journal cannot be written.
   *
   * A turn holding a capture whose frames and bodies come to JOURNAL_MAX_CAPTURE_BYTES or more is not
   * journaled: writing a big body twice (the journal, then LMDB) cost more than the commit the journal
   * saves (A/B: a 1 MiB upload cost the edge 3.06 ms of CPU with the journal, 2.71 without), and such a
   * capture has LMDB pages of its own, so it gains nothing from sharing a later commit. The turn is
   * queued all the same, its records in the arena, and `journalAll` returns true: the caller must
   * `commitQueued()` before the answers go out, as without a journal (and before the next turn's
   * `journalAll`, or that turn's records get buffers of their own). Many small captures stay journaled
   * however many bytes they make together: their commit is cheaper shared (a commit of captures of 200
   * rings writes a page per ring). Up to a lap of the journal (JOURNAL_CAPACITY): a turn that does not
   * fit in what is left of it commits what waits first (a new lap), and one larger than a whole lap
   * returns true, as a large capture does.
   */
  journalAll(batch: readonly PendingCapture[]): boolean {
    const journal = this.journal;
    if (journal === null) throw new Error('journalAll: this capture store has no journal (fsync)');
    if (this.space?.low === true) {
      this.skipped.disk += batch.length;
      return false;
    }
    this.markRings(batch);
    // What would be written (the exact check is the commit's; this one spares encoding and journaling
    // what cannot be), and whether a big capture makes the turn commit at once.
    const captures: (CaptureToStore | null)[] = [];
    let largest = 0;
    for (const item of batch) {
      const ring = item.ring as OpenRing;
      let capture: CaptureToStore | null = null;
      if (ring.writing) {
        const account = this.accountOf(ring.accountId);
        if (account.bytes - ring.sizes!.get(item.seq % ring.capacity) < account.quota) capture = item.storedCapture();
      }
      captures.push(capture);
      if (capture !== null) largest = Math.max(largest, sectionsLength(capture));
    }
    const commitNow = largest >= JOURNAL_MAX_CAPTURE_BYTES;
    // Records committed at once are put by the caller's `commitQueued` before anything else is queued:
    // they go into the arena, which LMDB copies them out of (a put inside a synchronous transaction
    // writes its value before it returns), instead of a fresh allocation of up to a few MiB each.
    const arena = commitNow ? this.freeArena() : null;
    const journaled: JournaledCapture[] = [];
    const records: JournalRecord[] = [];
    let bytesJournaled = 0;
    for (let i = 0; i < batch.length; i++) {
      const item = batch[i]!;
      const capture = captures[i]!;
      const bytes = capture === null ? null : commitNow ? this.encodeForCommit(capture, arena) : encodeStoredCaptureInto(capture, null);
      journaled.push({ ring: item.ring, seq: item.seq, bytes });
      if (bytes !== null) {
        // Only a turn that is not committed at once is journaled, and its records are whole.
        if (bytes instanceof Uint8Array) records.push({ ringId: (item.ring as OpenRing).ringId, seq: item.seq, bytes });
        bytesJournaled += bytes.byteLength;
      }
    }
    let commitFirst = commitNow;
    if (records.length > 0 && !commitNow) {
      // A lap the batch does not fit in ends with a commit of what waits (a new lap starts); a batch
      // larger than a whole lap is committed before its answers with what waits, as a large capture is.
      const size = batchSize(records);
      if (!journal.fits(size) && journal.fitsInNewLap(size) && !this.journalHoldsUncommitted) this.commitQueued();
      if (!journal.fits(size)) commitFirst = true;
      else {
        try {
          journal.append(records, size);
        } catch (error) {
          if (!isFileWriteFailure(error)) throw error;
          this.failures.report('captures', error);
          this.skipped.error += batch.length;
          return false;
        }
      }
    }
    for (const item of journaled) this.queue.push(item);
    this.queueBytes += bytesJournaled;
    return commitFirst;
  }

  /**
   * Commits the queued captures to LMDB in one transaction, as `writeAll` commits (quota, overwrites,
   * failures); returns how many it wrote. Everything in the journal is committed then, so it starts a new
   * lap from its first byte.
   */
  commitQueued(): number {
    if (this.queue.length === 0) return 0;
    const queue = this.queue;
    this.queue = [];
    this.queueBytes = 0;
    const written = this.commitCaptures(queue, journaledBytes);
    // The records in the arena are LMDB's now (or lost with a failed commit): it may be filled again.
    if (this.arena !== null) this.arena.used = 0;
    if (this.lastCommitFailed) this.journalHoldsUncommitted = true;
    else if (this.journalHoldsUncommitted) this.recommitJournal();
    else this.journal?.committed();
    return written;
  }

  /**
   * After a failed commit (or replay) and a commit that worked: what the journal holds and LMDB does
   * not is committed now, so the journal can be emptied again instead of growing until a restart (a
   * disk that filled and then had room again). As the replay does, a record whose slot holds the same
   * or a newer capture is skipped; the rest go through the commit's own checks (quota, sizes).
   */
  private recommitJournal(): void {
    const journal = this.journal;
    if (journal === null) return;
    const items: JournaledCapture[] = [];
    for (const record of journal.existing()) {
      if (!holdsSeq(record)) break;
      const missing = this.missingFromSlot(record);
      if (missing !== null) items.push({ ring: this.load(missing.stored), seq: record.seq, bytes: record.bytes });
    }
    this.markRings(items);
    if (items.length > 0) {
      this.commitCaptures(items, journaledBytes);
      if (this.lastCommitFailed) return;
    }
    this.journalHoldsUncommitted = false;
    this.journaledHeads.clear();
    journal.empty();
  }

  /** A ring whose mark failed at connect is marked now, in a commit of its own, before the batch's. */
  private markRings(batch: readonly { ring: RingHandle }[]): void {
    for (const item of batch) {
      const ring = item.ring as OpenRing;
      if (!ring.writing) this.startWriting(ring);
    }
  }

  private commitCaptures<T extends { ring: RingHandle; seq: number }>(batch: readonly T[], encode: (item: T) => Buffer | RecordInParts | null): number {
    this.lastCommitFailed = false;
    const commit = ++this.commits;
    const accounts: AccountCaptures[] = [];
    // Slot sizes as they were, (ring, slot, size) in order, to put back if the commit fails.
    const previous: (OpenRing | number)[] = [];
    let written = 0;
    let overQuota = 0;
    const change = new BlockChange();
    try {
      this.root.transactionSync(() => {
        for (const item of batch) {
          const ring = item.ring as OpenRing;
          if (!ring.writing) {
            this.skipped.error++;
            continue;
          }
          const slot = item.seq % ring.capacity;
          if (item.seq + ring.capacity < ring.head && this.holdsNewer(ring, slot, item.seq)) continue;
          const account = this.accountOf(ring.accountId);
          if (account.commit !== commit) {
            account.commit = commit;
            account.before = account.bytes;
            accounts.push(account);
          }
          const sizes = ring.sizes!;
          const old = sizes.get(slot);
          let bytes: Buffer | RecordInParts | null = account.bytes - old < account.quota ? encode(item) : null;
          if (bytes !== null && account.bytes - old + bytes.byteLength > account.quota) bytes = null;
          const size = bytes === null ? 0 : bytes.byteLength;
          if (bytes === null) {
            overQuota++;
            this.overQuota(account);
            if (old === 0) continue;
            this.removeRecord(ring.ringId, slot, change);
          } else {
            // Counted first: a failed block write throws out of the commit, and the capture is skipped.
            written++;
            this.putRecord(ring.ringId, slot, item.seq, bytes, change);
          }
          previous.push(ring, slot, old);
          sizes.set(slot, size);
          account.bytes += size - old;
        }
        for (const account of accounts) this.accountBytes.put(account.accountId, account.bytes);
        this.blocksWritten(change);
      });
      this.committed(change);
    } catch (error) {
      this.failed(change);
      if (!isWriteFailure(error) && !isFileWriteFailure(error)) throw error;
      for (let i = previous.length - 3; i >= 0; i -= 3) (previous[i] as OpenRing).sizes!.set(previous[i + 1] as number, previous[i + 2] as number);
      for (const account of accounts) account.bytes = account.before;
      this.skipped.error += written + overQuota;
      this.failures.report('captures', error);
      this.lastCommitFailed = true;
      return 0;
    }
    let grown = 0;
    for (const account of accounts) grown += account.bytes - account.before;
    this.storedBytes += grown;
    this.skipped.quota += overQuota;
    if (grown > 0) this.space?.spent(grown);
    return written;
  }

  /** The slots of a ring whose records are in blocks, by slot. */
  private ownedBy(ringId: number): Map<number, Uint32Array> {
    let owned = this.blocksOf.get(ringId);
    if (owned === undefined) this.blocksOf.set(ringId, (owned = new Map()));
    return owned;
  }

  /**
   * Inside a write transaction: `record` into the slot. One of BLOCK_RECORD_MIN_BYTES or more is written
   * to blocks first, and the slot gets its stub and the index its blocks. The blocks of what the slot
   * held are freed once the commit returns (`committed`).
   */
  private putRecord(ringId: number, slot: number, seq: number, record: Buffer | RecordInParts, change: BlockChange): void {
    this.releaseBlocks(ringId, slot, change);
    const head = record instanceof Uint8Array ? record : (record.parts[0] as Buffer);
    if (this.blocks === null || record.byteLength < BLOCK_RECORD_MIN_BYTES || !headerOfFormat(head, FORMAT)) {
      this.slots.put([ringId, slot], record instanceof Uint8Array ? record : Buffer.concat(record.parts));
      return;
    }
    const blocks = this.blocks.take(blocksFor(record.byteLength));
    change.taken.push(blocks);
    this.blocks.write(blocks, ringId, seq, record instanceof Uint8Array ? [record] : record.parts);
    this.blockIndex.put([ringId, slot], Buffer.from(blocks.buffer, blocks.byteOffset, blocks.byteLength));
    const owned = this.ownedBy(ringId);
    change.undo.push(ringId, slot, owned.get(slot));
    owned.set(slot, blocks);
    this.slots.put([ringId, slot], stubOf(head, record.byteLength));
  }

  /** Inside a write transaction: empties the slot (its blocks freed once the commit returns). */
  private removeRecord(ringId: number, slot: number, change: BlockChange): void {
    this.releaseBlocks(ringId, slot, change);
    this.slots.remove([ringId, slot]);
  }

  private releaseBlocks(ringId: number, slot: number, change: BlockChange): void {
    const owned = this.blocksOf.get(ringId);
    const blocks = owned?.get(slot);
    if (blocks === undefined) return;
    this.blockIndex.remove([ringId, slot]);
    change.freed.push(blocks);
    change.undo.push(ringId, slot, blocks);
    owned!.delete(slot);
  }

  /** At the end of a write transaction that fsyncs: the blocks it wrote reach the disk before it commits. */
  private blocksWritten(change: BlockChange): void {
    if (this.fsync && change.taken.length > 0) this.blocks?.syncNow();
  }

  /** After a commit: the blocks it freed may be taken again. */
  private committed(change: BlockChange): void {
    for (const blocks of change.freed) this.blocks!.give(blocks);
  }

  /** After a failed commit: the index in memory as it was, and the blocks it took free again. */
  private failed(change: BlockChange): void {
    const undo = change.undo;
    for (let i = undo.length - 3; i >= 0; i -= 3) {
      const owned = this.ownedBy(undo[i] as number);
      const before = undo[i + 2] as Uint32Array | undefined;
      if (before === undefined) owned.delete(undo[i + 1] as number);
      else owned.set(undo[i + 1] as number, before);
    }
    for (const blocks of change.taken) this.blocks!.give(blocks);
  }

  /**
   * The record a slot's value stands for: the value itself, or a stub's record read from its blocks. Null
   * when the blocks do not hold it (see src/store/capture-blocks.ts, crash rules). `bytes` may be
   * getBinaryFast's shared buffer: nothing reads LMDB between.
   */
  private recordOf(ringId: number, slot: number, bytes: Buffer): Buffer | null {
    if (!isStub(bytes)) return bytes;
    const blocks = this.blocksOf.get(ringId)?.get(slot);
    if (blocks === undefined || this.blocks === null) return null;
    return this.blocks.read(blocks, ringId, seqOf(bytes), recordSize(bytes));
  }

  /** Whether the slot holds a capture newer than `seq` (read inside the writing transaction). */
  private holdsNewer(ring: OpenRing, slot: number, seq: number): boolean {
    const bytes = this.slots.getBinaryFast([ring.ringId, slot]);
    return bytes !== undefined && seqOf(bytes) > seq;
  }

  /** Newest first; null when the account never had this subdomain. */
  list(accountId: string, subdomain: string, options: ListOptions): CaptureSummary[] | null {
    this.commitQueued();
    const ring = this.currentRing(accountId, subdomain);
    if (ring === undefined) return null;
    const now = options.now ?? Date.now();
    const oldest = Math.max(0, ring.head - ring.capacity, ring.swept);
    let seq = Math.min(ring.head, options.beforeSeq ?? Infinity) - 1;
    const list: CaptureSummary[] = [];
    for (; seq >= oldest && list.length < options.limit; seq--) {
      const bytes = this.slots.getBinaryFast([ring.ringId, seq % ring.capacity]);
      if (bytes === undefined) continue;
      const capture = summaryOf(bytes);
      if (capture.seq !== seq) continue;
      if (now - capture.receivedAt > options.retentionMs) break;
      list.push({
        id: capture.id,
        method: capture.method,
        path: capture.path,
        status: capture.status,
        durationMs: capture.durationMs,
        receivedAt: capture.receivedAt,
        error: capture.error,
      });
    }
    return list;
  }

  /**
   * The captures of (account, subdomain) holding `query` (see `storedCaptureMatches`), newest first, from
   * `beforeSeq`, looking at `maxScanned` captures and about `maxBodyBytes` of bodies at most. Null when the
   * account never had this subdomain.
   */
  search(accountId: string, subdomain: string, query: string, options: SearchOptions): SearchResult | null {
    this.commitQueued();
    const ring = this.currentRing(accountId, subdomain);
    if (ring === undefined) return null;
    const now = options.now ?? Date.now();
    const needle = query.toLowerCase();
    const asciiNeedle = /^[\x00-\x7f]*$/.test(needle);
    const oldest = Math.max(0, ring.head - ring.capacity, ring.swept);
    const matches: CaptureSummary[] = [];
    let scanned = 0;
    let bodyBytes = 0;
    let lastScanned: string | null = null;
    let resumeBefore: string | null = null;
    for (let seq = Math.min(ring.head, options.beforeSeq ?? Infinity) - 1; seq >= oldest; seq--) {
      if (matches.length === options.limit) {
        resumeBefore = matches[matches.length - 1]!.id;
        break;
      }
      if (scanned === options.maxScanned || bodyBytes >= options.maxBodyBytes) {
        resumeBefore = lastScanned;
        break;
      }
      const slot = seq % ring.capacity;
      const bytes = this.slots.getBinaryFast([ring.ringId, slot]);
      if (bytes === undefined || seqOf(bytes) !== seq) continue;
      if (now - summaryOf(bytes).receivedAt > options.retentionMs) break;
      const record = this.recordOf(ring.ringId, slot, bytes);
      if (record === null) continue;
      const capture = decodeStoredCapture(record);
      scanned++;
      lastScanned = capture.id;
      const match = captureMatch(capture, needle, asciiNeedle);
      bodyBytes += match.bodyBytes;
      if (!match.found) continue;
      matches.push({ id: capture.id, method: capture.method, path: capture.path, status: capture.status, durationMs: capture.durationMs, receivedAt: capture.receivedAt, error: capture.error });
    }
    return { matches, scanned, resumeBefore };
  }

  /** A capture of the account by id, or null when it is unknown, another account's, overwritten or expired. */
  get(accountId: string, id: string, retentionMs: number, now = Date.now()): CaptureRecord | null {
    this.commitQueued();
    const parsed = parseCaptureId(id);
    if (parsed === null) return null;
    const owner = this.ringsById.get(parsed.ringId);
    if (owner === undefined || owner[0] !== accountId) return null;
    const ring = this.currentRing(owner[0], owner[1]);
    if (ring === undefined) return null;
    const slot = parsed.seq % ring.capacity;
    const bytes = this.slots.getBinary([parsed.ringId, slot]);
    if (bytes === undefined || seqOf(bytes) !== parsed.seq) return null;
    const record = this.recordOf(parsed.ringId, slot, bytes);
    if (record === null) return null;
    const capture = decodeStoredCapture(record);
    if (capture.seq !== parsed.seq || capture.accountId !== accountId) return null;
    if (now - capture.receivedAt > retentionMs) return null;
    return expandCapture(capture);
  }

  /** Whether `id` names a capture in this account's ring for `subdomain` (for the `before` cursor). */
  seqInRing(accountId: string, subdomain: string, id: string): number | null {
    const parsed = parseCaptureId(id);
    if (parsed === null) return null;
    const ring = this.currentRing(accountId, subdomain);
    if (ring === undefined || ring.ringId !== parsed.ringId) return null;
    return parsed.seq;
  }

  /** The accounts that have a ring here (each once), for the sweep to look up their retention. */
  accountIds(): string[] {
    const ids = new Set<string>();
    for (const { key } of this.rings.getRange()) ids.add((key as [string, string])[0]);
    return [...ids];
  }

  /**
   * Removes captures older than their account's retention window, oldest first, ring by ring.
   * `retentionOf` maps an account id to its window (or undefined to leave the account alone).
   */
  async sweep(retentionOf: (accountId: string) => number | undefined, now = Date.now()): Promise<number> {
    this.commitQueued();
    let removed = 0;
    const rings = [...this.rings.getRange()].map(({ value }) => value);
    for (const stored of rings) {
      const retention = retentionOf(stored.accountId);
      if (retention === undefined) continue;
      removed += this.sweepRing(this.load(stored), now - retention);
      // One ring per turn: a sweep of many rings never holds the event loop for long.
      await new Promise((resolve) => setImmediate(resolve));
    }
    return removed;
  }

  /**
   * Removes the ring's captures received before `cutoff`, oldest first, in one synchronous transaction
   * (so a slot a new capture has just taken over is never removed by mistake), giving their bytes back
   * to the account when the ring is counted. A failed commit is reported and changes nothing.
   */
  private sweepRing(ring: OpenRing, cutoff: number): number {
    this.commitQueued();
    const start = Math.max(ring.swept, ring.head - ring.capacity, 0);
    const removedSlots: number[] = [];
    let removedBytes = 0;
    let seq = start;
    const swept = ring.swept;
    const change = new BlockChange();
    try {
      this.root.transactionSync(() => {
        for (; seq < ring.head; seq++) {
          const slot: SlotKey = [ring.ringId, seq % ring.capacity];
          const bytes = this.slots.getBinaryFast(slot);
          if (bytes === undefined) continue;
          const capture = summaryOf(bytes);
          if (capture.seq !== seq) continue;
          if (capture.receivedAt >= cutoff) break;
          removedBytes += recordSize(bytes);
          this.removeRecord(slot[0], slot[1], change);
          removedSlots.push(slot[1]);
        }
        if (seq === start) return;
        ring.swept = seq;
        this.rings.put([ring.accountId, ring.subdomain], ring.record());
        if (!ring.counted || removedSlots.length === 0) return;
        this.accountBytes.put(ring.accountId, this.accountOf(ring.accountId).bytes - removedBytes);
        // Sizes saved by a clean close must not name the removed captures when the ring is written again.
        if (ring.sizes === null) {
          const saved = this.slotSizes.getBinary(ring.ringId);
          if (saved !== undefined && savedSizesFit(saved, ring.capacity)) {
            for (const slot of removedSlots) if (slot * 4 < saved.byteLength) saved.writeUInt32LE(0, slot * 4);
            this.slotSizes.put(ring.ringId, saved);
          }
        }
      });
      this.committed(change);
    } catch (error) {
      ring.swept = swept;
      this.failed(change);
      if (!isWriteFailure(error)) throw error;
      this.failures.report('captures', error);
      return 0;
    }
    if (ring.counted && removedSlots.length > 0) {
      this.accountOf(ring.accountId).bytes -= removedBytes;
      this.storedBytes -= removedBytes;
      if (ring.sizes !== null) for (const slot of removedSlots) ring.sizes.set(slot, 0);
    }
    return removedSlots.length;
  }

  private currentRing(accountId: string, subdomain: string): OpenRing | undefined {
    const stored = this.rings.get([accountId, subdomain]);
    return stored === undefined ? undefined : this.load(stored);
  }

  /** Asks the operating system to write committed captures to disk (asynchronously); a failure is reported. */
  sync(): Promise<void> {
    // RootDatabase.sync exists in lmdb-js (open.js) but not in its typings.
    const root = this.root as unknown as { sync(callback: (error?: Error) => void): void };
    const environment = new Promise<void>((resolve) => {
      root.sync((error?: Error) => {
        if (error) this.failures.report('captures', error);
        resolve();
      });
    });
    const blocks = this.blocks?.sync().catch((error: unknown) => this.failures.report('captures', error));
    return Promise.all([environment, blocks]).then(() => undefined);
  }

  /** Accounts' capture use for /metrics: bytes stored, and how many accounts that wrote since the start are at 90% of their quota or more. */
  quotaUse(): { storedBytes: number; accountsOver90Percent: number } {
    let over = 0;
    for (const account of this.accounts.values()) if (account.bytes >= account.quota * 0.9) over++;
    return { storedBytes: this.storedBytes, accountsOver90Percent: over };
  }

  /** The blocks file's size and its free blocks, in bytes (blocks of BLOCK_BYTES; zeros for a store without one). */
  blocksUse(): { fileBytes: number; freeBytes: number } {
    if (this.blocks === null) return { fileBytes: 0, freeBytes: 0 };
    return { fileBytes: this.blocks.blocks * BLOCK_BYTES, freeBytes: this.blocks.freeBlocks * BLOCK_BYTES };
  }

  /** The account's capture bytes on this edge. */
  bytesOf(accountId: string): number {
    return this.accountOf(accountId).bytes;
  }

  /**
   * Saves the head (and slot sizes) of every ring this process wrote or recovered, marked clean, in one
   * commit; writes everything to disk; closes the environment. The edge calls it when no capture can
   * follow. When that commit fails (a full disk), the rings stay marked not clean and the next start
   * recovers their heads and sizes from their slots.
   */
  async close(): Promise<void> {
    this.commitQueued();
    try {
      this.root.transactionSync(() => {
        // A ring recovered from its slots and not written since has an exact head too.
        for (const ring of this.open.values()) {
          if (!ring.writing && ring.loadedClean) continue;
          this.rings.put([ring.accountId, ring.subdomain], ring.record(true));
          if (ring.sizes !== null && ring.counted) this.slotSizes.put(ring.ringId, ring.sizes.toBuffer());
        }
      });
    } catch (error) {
      if (!isWriteFailure(error)) throw error;
      this.failures.report('captures', error);
    }
    await this.sync().catch(() => undefined);
    if (this.journal !== null) {
      // Every journaled capture is committed, unless a commit failed: then the next start replays them.
      try {
        if (!this.journalHoldsUncommitted) this.journal.empty();
      } catch (error) {
        this.failures.report('captures', error);
      }
      this.journal.close();
    }
    await closeAfterWrites(this.root);
    this.blocks?.close();
  }
}

function journaledBytes(item: JournaledCapture): Buffer | RecordInParts | null {
  return item.bytes;
}

/** Whether a journal record holds a capture of its sequence (anything else ends a replay). */
function holdsSeq(record: JournalRecord): boolean {
  try {
    return seqOf(record.bytes) === record.seq;
  } catch {
    return false;
  }
}

/** A write to a file that failed for the disk's sake (full, failing, read-only, over quota). */
function isFileWriteFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ['ENOSPC', 'EIO', 'EDQUOT', 'EFBIG', 'EROFS'].includes(code);
}
