/**
 * Every `--help` text lists exactly the flags its parser accepts (issue 16 acceptance): each command runs
 * in-process with --help, and the options it handed to parse() (args.ts records the last parse) are
 * compared with the flags of the help's Options section and of its usage line.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as args from '../../src/cli/args.js';
import { adminCommand } from '../../src/cli/commands/admin.js';
import { loginCommand, requestsCommand, reservationsCommand, reserveCommand, tokensCommand, tunnelsCommand } from '../../src/cli/commands/api-commands.js';
import { edgeCommand } from '../../src/cli/commands/edge.js';
import { httpCommand } from '../../src/cli/commands/http.js';
import { queueCommand } from '../../src/cli/commands/queue.js';
import { replayCommand } from '../../src/cli/commands/replay.js';
import { startCommand } from '../../src/cli/commands/start.js';
import { configCommand } from '../../src/cli/commands/config.js';

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: [string, Command, string[]][] = [
  ['edge', edgeCommand, []],
  ['admin create-account', adminCommand, ['create-account']],
  ['admin token create', adminCommand, ['token', 'create']],
  ['admin set-plan', adminCommand, ['set-plan']],
  ['admin accounts list', adminCommand, ['accounts', 'list']],
  ['admin backup', adminCommand, ['backup']],
  ['admin rotate-secret-key', adminCommand, ['rotate-secret-key']],
  ['login', loginCommand, []],
  ['tokens', tokensCommand, []],
  ['tunnels', tunnelsCommand, []],
  ['requests', requestsCommand, []],
  ['requests show', requestsCommand, ['show']],
  ['reserve', reserveCommand, []],
  ['reservations', reservationsCommand, []],
  ['queue', queueCommand, []],
  ['http', httpCommand, []],
  ['replay', replayCommand, []],
  ['start', startCommand, []],
  ['config', configCommand, []],
];

/** The flags an Options section lists: lines that start with "  --name" or "  -h, --name". */
function optionFlags(help: string): string[] {
  const section = help.slice(help.indexOf('\nOptions:'));
  return [...section.matchAll(/^ {2}(?:-\w, )?--([a-z][a-z-]*)/gm)].map((match) => match[1]!).sort();
}

/** The flags its usage line (the first lines, up to the first blank one) mentions. */
function usageFlags(help: string): string[] {
  const usage = help.trim().split('\n\n')[0]!;
  return [...new Set([...usage.matchAll(/--([a-z][a-z-]*)/g)].map((match) => match[1]!))].sort();
}

async function helpOf(command: Command, argv: string[]): Promise<{ printed: string; options: string[]; help: string }> {
  let printed = '';
  const write = process.stdout.write;
  process.stdout.write = ((chunk: string) => {
    printed += chunk;
    return true;
  }) as typeof process.stdout.write;
  try {
    assert.equal(await command([...argv, '--help']), 0);
  } finally {
    process.stdout.write = write;
  }
  const parse = args.lastParse;
  assert.ok(parse !== null, 'the command parsed its arguments');
  return { printed, options: [...Object.keys(parse.options), 'help'].sort(), help: parse.help };
}

for (const [name, command, argv] of COMMANDS) {
  test(`burrow ${name} --help lists exactly the flags the parser accepts`, async () => {
    const { printed, options, help } = await helpOf(command, argv);
    assert.equal(printed, `${help.trim()}\n`, 'the help printed is the one handed to the parser');
    assert.deepEqual(optionFlags(help), options);
    for (const flag of usageFlags(help)) assert.ok(options.includes(flag), `the usage line's --${flag} is accepted`);
    assert.ok(options.includes('json'), 'every command accepts --json (DESIGN.md 5b)');
  });
}
