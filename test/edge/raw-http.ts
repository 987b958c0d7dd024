/**
 * One HTTP/1.1 exchange over a raw TCP socket, for tests that need the bytes the public client really
 * gets (header values as bytes, how many status lines, a connection cut mid-body).
 */
import { connect } from 'node:net';

export interface RawResponse {
  /** Everything received until the edge closed the connection. */
  bytes: Buffer;
  /** The first status code, 0 when nothing parsable arrived. */
  status: number;
  /** The final head as latin1 text (one char per byte), without the blank line. */
  head: string;
  body: Buffer;
  /** Every status line received (more than one means the edge answered twice). */
  statusLines: string[];
}

/**
 * Sends one request with `Connection: close` and reads until the edge closes. `guardMs` only keeps a
 * broken edge from hanging the test: a healthy one answers long before.
 */
export function rawRequest(port: number, host: string, method: string, path: string, guardMs = 10_000, fields: string[] = []): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const guard = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end of the response within ${guardMs} ms: ${JSON.stringify(Buffer.concat(chunks).toString('latin1'))}`));
    }, guardMs);
    const extra = fields.map((field) => `${field}\r\n`).join('');
    const connection = fields.some((field) => /^connection:/i.test(field)) ? '' : 'Connection: close\r\n';
    socket.on('connect', () => socket.write(`${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n${connection}${extra}\r\n`));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {
      // A reset ends the response like a close does; 'close' follows.
    });
    socket.on('close', () => {
      clearTimeout(guard);
      const bytes = Buffer.concat(chunks);
      const text = bytes.toString('latin1');
      // Interim (1xx) heads come first: the final head is the first that is not one.
      let start = 0;
      while (/^HTTP\/1\.1 1\d\d/.test(text.slice(start)) && text.indexOf('\r\n\r\n', start) >= 0) start = text.indexOf('\r\n\r\n', start) + 4;
      const split = text.indexOf('\r\n\r\n', start);
      const head = split < 0 ? text.slice(start) : text.slice(start, split);
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve({
        bytes,
        status: match === null ? 0 : Number(match[1]),
        head,
        body: split < 0 ? Buffer.alloc(0) : bytes.subarray(split + 4),
        statusLines: text.match(/(?:^|\r\n)HTTP\/1\.1 \d{3}[^\r\n]*/g) ?? [],
      });
    });
  });
}

/** The value of a header in a raw head (latin1 text), or undefined; several values are joined with ", ". */
export function headerOf(head: string, name: string): string | undefined {
  const values: string[] = [];
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).toLowerCase() === name) values.push(line.slice(colon + 1).trim());
  }
  return values.length === 0 ? undefined : values.join(', ');
}
