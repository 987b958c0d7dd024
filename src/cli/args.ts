/**
 * Argument parsing for every command, on node:util parseArgs: `--help` everywhere, a one-line reason
 * and exit code 2 for a usage error (DESIGN.md section 5).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * A failure to report as one line on stderr and a non-zero exit; under --json as the spec's error shape
 * {"error":{"code","message"}}, `code` the API's code when the edge refused, else one of src/errors.ts.
 */
export class CliError extends Error {
  /** The message without a "CODE: " prefix, for the JSON shape. */
  readonly detail: string;

  constructor(
    message: string,
    readonly exitCode = 1,
    readonly code: string = 'INVALID_REQUEST',
    detail?: string,
  ) {
    super(message);
    this.name = 'CliError';
    this.detail = detail ?? (message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message);
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

export interface Parsed<O extends Options> {
  values: { [K in keyof O]?: O[K]['type'] extends 'boolean' ? (O[K]['multiple'] extends true ? boolean[] : boolean) : O[K]['multiple'] extends true ? string[] : string };
  positionals: string[];
}

/** The options and help of the last parse: test/cli/help-flags.test.ts checks every help lists exactly its flags. */
export let lastParse: { options: Options; help: string } | null = null;

/** Parses `args` against `options`; prints `help` and returns null for --help. */
export function parse<O extends Options>(args: string[], options: O, help: string): Parsed<O> | null {
  lastParse = { options, help };
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (error) {
    // Node's advice on positionals that start with '-' is noise here; the reason stays one line.
    const reason = ((error as Error).message.split('\n')[0] ?? '').replace(/\. To specify a positional argument.*$/, '');
    throw new UsageError(`${reason}; ${usageHint(help)}`);
  }
  if ((parsed.values as Record<string, unknown>).help === true) {
    process.stdout.write(`${help.trim()}\n`);
    return null;
  }
  return parsed as unknown as Parsed<O>;
}

/** "usage: burrow tokens list | ... (see --help)", from the help's first line: usage errors stay one line. */
export function usageHint(help: string): string {
  const usage = (help.trim().split('\n')[0] ?? '').replace(/^Usage:\s*/, '');
  return `usage: ${usage} (see --help)`;
}

export function requirePositional(parsed: { positionals: string[] }, index: number, name: string, help: string): string {
  const value = parsed.positionals[index];
  if (value === undefined) throw new UsageError(`missing ${name}; ${usageHint(help)}`);
  return value;
}

export function noExtraPositionals(parsed: { positionals: string[] }, count: number, help: string): void {
  if (parsed.positionals.length > count) {
    throw new UsageError(`unexpected argument "${parsed.positionals[count]}"; ${usageHint(help)}`);
  }
}

export function intOption(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^[0-9]+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max}`);
  }
  return Number(value);
}
