/**
 * Output: aligned tables for people, the API's JSON for machines (--json). Both carry text that clients
 * of a tunnel chose (paths, headers): control characters are escaped in both (src/control-chars.ts).
 */
import { controlSafeJson, escapeControls } from '../control-chars.js';

export function printJson(value: unknown): void {
  process.stdout.write(`${controlSafeJson(value, 2)}\n`);
}

/** Prints rows under headers, columns padded to their widest cell; `empty` when there are no rows. */
export function printTable(headers: string[], rows: (string | number | boolean | null | undefined)[][], empty: string): void {
  if (rows.length === 0) {
    process.stdout.write(`${empty}\n`);
    return;
  }
  const cells = rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '-' : escapeControls(String(cell)))));
  const widths = headers.map((header, column) => Math.max(header.length, ...cells.map((row) => row[column]!.length)));
  const line = (row: string[]): string =>
    row
      .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd();
  process.stdout.write(`${[line(headers), ...cells.map(line)].join('\n')}\n`);
}

/** "2026-11-21T20:44:29.123Z" → "2026-11-21 20:44:29Z", shorter in tables. */
export function shortTime(iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '-';
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}
