import { resolve } from 'node:path';
import { BurrowError } from '../../errors.js';
import { nowIso } from '../../ids.js';
import { isPlanName } from '../../store/plans.js';
import { Store } from '../../store/store.js';
import { CliError, noExtraPositionals, parse, usageHint, UsageError } from '../args.js';
import { printJson } from '../output.js';

const HELP = `
Usage: burrow admin create-account --email E [--plan FREE|PRO] [--data DIR] [--json]

Creates an account and its first token directly in the data directory (works while the edge runs).
The token is printed once; it is stored only as a SHA-256 hash.

Options:
  --email E      the account's e-mail address (unique)
  --plan NAME    FREE (default) or PRO
  --data DIR     LMDB data directory (default ./.burrow)
  --json         print {"account":{...},"token":{...}}
  -h, --help     show this help
`;

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

export async function adminCommand(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === '--help' || sub === '-h') {
    process.stdout.write(`${HELP.trim()}\n`);
    return 0;
  }
  // A usage error is one line on stderr (DESIGN.md section 5), not the help on stdout.
  if (sub === undefined) throw new UsageError(`missing the admin command; ${usageHint(HELP)}`);
  if (sub !== 'create-account') throw new UsageError(`unknown admin command "${sub}"; ${usageHint(HELP)}`);
  const parsed = parse(rest, { email: { type: 'string' }, plan: { type: 'string' }, data: { type: 'string' }, json: { type: 'boolean' } }, HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, HELP);
  const { email, plan = 'FREE', data, json } = parsed.values;
  if (email === undefined || !EMAIL.test(email.trim())) throw new UsageError('--email must be an e-mail address');
  if (!isPlanName(plan)) throw new UsageError(`--plan must be FREE or PRO, not ${plan}`);
  const store = Store.open(resolve(data ?? '.burrow'));
  try {
    const { account, token } = await store.createAccount(email, plan, 'admin');
    const result = {
      account: { id: account.id, email: account.email, plan: account.plan },
      token: { id: token.id, label: token.label, prefix: token.prefix, token: token.token, created_at: nowIso(token.createdAt) },
    };
    if (json === true) printJson(result);
    else process.stdout.write(`created ${account.email} (${account.id}, plan ${account.plan})\ntoken (shown once): ${token.token}\n`);
    return 0;
  } catch (error) {
    if (error instanceof BurrowError) throw new CliError(error.message);
    throw error;
  } finally {
    await store.close();
  }
}
