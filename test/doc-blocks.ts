/**
 * The shell blocks of the docs, read by the tests that run them as written (README's quick start,
 * deploy.md's recipes): each command with the comment that says what it prints.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after } from 'node:test';
import { ROOT } from './helpers.js';

export interface DocStep {
  command: string;
  /** What follows the command's "  #", trimmed ('' when none). */
  comment: string;
}

/** The first ```sh block after `heading` in `file` (under ROOT): continuation lines joined, blank lines dropped. */
export function docBlock(file: string, heading: string): DocStep[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const at = text.indexOf(heading);
  assert.ok(at >= 0, `${file} has "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const hash = line.indexOf('  #');
      return { command: (hash === -1 ? line : line.slice(0, hash)).trim(), comment: hash === -1 ? '' : line.slice(hash + 3).trim() };
    });
}

/**
 * The text a comment quotes ("..."), as a pattern: after `substitute`, placeholders such as `<name>`,
 * `req_...` and `...` match anything, and a space any run of spaces.
 */
export function printedPattern(comment: string, substitute: (text: string) => string): RegExp {
  const quoted = /"(.*)"/.exec(comment);
  assert.ok(quoted, `the comment says what it prints: ${comment}`);
  const text = substitute(quoted[1]!.replace(/\\"/g, '"'));
  const escaped = text
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    .replace(/<[a-z ]+>|req_\\\.\\\.\\\.|\\\.\\\.\\\./g, '.+?')
    .replace(/ /g, ' +');
  return new RegExp(escaped);
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A list for the long-running processes a block starts (edge, servers, tunnels): stopped with SIGINT, newest first, after the file's tests. */
export function stoppedAfterwards(): ChildProcess[] {
  const running: ChildProcess[] = [];
  after(async () => {
    for (const child of running.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill('SIGINT');
      await once(child, 'exit');
    }
  });
  return running;
}
