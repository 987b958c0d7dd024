/** A plain aligned text table for the terminal: numbers right-aligned, text left-aligned. */

export type Cell = string | number | null | undefined;

export function formatNumber(value: Cell, digits = 0): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value)) return '-';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function textTable(headers: readonly string[], rows: ReadonlyArray<readonly Cell[]>): string {
  const text = rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '-' : String(cell))));
  const numeric = headers.map((_, column) => rows.every((row) => typeof row[column] === 'number' || row[column] === null || row[column] === undefined || /^[-+]?[\d,.]+( ?[a-zµ%x]+)?$/i.test(String(row[column]))));
  const widths = headers.map((header, column) => Math.max(header.length, ...text.map((row) => row[column]?.length ?? 0)));
  const line = (cells: readonly string[]): string =>
    cells.map((cell, column) => (numeric[column] ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ').trimEnd();
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...text.map(line)].join('\n');
}
