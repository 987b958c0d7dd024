/**
 * curl (Debian's /usr/bin/curl) as a public client of a test edge: a real HTTP client other than Node's,
 * with its own Basic auth, Expect: 100-continue and keep-alive. The tunnel's host is sent as Host to the
 * edge on 127.0.0.1 (`--connect-to`), so no name needs to resolve.
 */
import { execFile } from 'node:child_process';

export interface CurlResult {
  status: number;
  /** Lower-case names; several values joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** Every status line curl printed (an interim 100 first when there was one). */
  statusLines: string[];
}

/** `curl -s -i` to `http://HOST/PATH` through the edge on `port`, with extra arguments (`-u`, `-H`, `--data-binary`). */
export function curl(port: number, host: string, path: string, args: string[] = []): Promise<CurlResult> {
  const url = `http://${host}${path}`;
  const name = host.replace(/:[0-9]+$/, '');
  const hostPort = /:([0-9]+)$/.exec(host)?.[1] ?? '80';
  return new Promise((resolve, reject) => {
    execFile(
      'curl',
      ['-s', '-i', '--max-time', '20', '--connect-to', `${name}:${hostPort}:127.0.0.1:${port}`, ...args, url],
      { encoding: 'latin1', maxBuffer: 8 * 1024 * 1024 },
      (error, stdout) => {
        if (error !== null && stdout === '') {
          reject(error);
          return;
        }
        const statusLines: string[] = [];
        let rest = stdout;
        let head = '';
        for (;;) {
          const end = rest.indexOf('\r\n\r\n');
          if (end < 0) break;
          head = rest.slice(0, end);
          rest = rest.slice(end + 4);
          statusLines.push(head.split('\r\n')[0]!);
          if (!/^HTTP\/1\.1 1[0-9][0-9]/.test(head)) break;
        }
        const headers: Record<string, string> = {};
        for (const line of head.split('\r\n').slice(1)) {
          const colon = line.indexOf(':');
          const key = line.slice(0, colon).trim().toLowerCase();
          const value = line.slice(colon + 1).trim();
          headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
        }
        resolve({ status: Number(/^HTTP\/1\.1 ([0-9]{3})/.exec(head)?.[1] ?? 0), headers, body: rest, statusLines });
      },
    );
  });
}
