/**
 * `burrow admin ...`: the operator's commands, straight on the edge's data directory (LMDB allows a
 * second process, so they work while the edge runs), or with `--cluster redis://...` on a cluster's
 * shared Redis store (docs/cluster.md). They are the way back in for a user who revoked their last
 * token (issue 16), and the only way to change a plan. The commands talk to `AccountStore`, whichever
 * implementation is behind it.
 */
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BurrowError } from '../../errors.js';
import { nowIso } from '../../ids.js';
import { isPlanName } from '../../store/plans.js';
import type { AccountRecord, AccountStore } from '../../store/account-store.js';
import { RedisStore } from '../../store/redis-store.js';
import { redisTarget } from '../../store/redis-url.js';
import { defaultSecretKeyFile, SecretBox } from '../../store/secret-box.js';
import { namesUnderOldKeys, resealStoredPolicies, type ResealReport } from '../../store/secret-rotation.js';
import { Store } from '../../store/store.js';
import { CliError, noExtraPositionals, parse, usageHint, UsageError } from '../args.js';
import { printJson, printTable, shortTime } from '../output.js';

const HELP = `
Usage: burrow admin create-account | token create | set-plan | accounts list | backup | rotate-secret-key [options]

The operator's commands, on the edge's data directory or a cluster's Redis (they work while the edges run):
  create-account --email E [--plan FREE|PRO]   an account and its first token
  token create --email E [--label L]           a new token for an account (e.g. after revoking the last)
  set-plan --email E --plan FREE|PRO           move an account to another plan
  accounts list                                every account with its plan and active tokens
  backup --to DIR                              a consistent copy of accounts, tokens and reservations (LMDB)
  rotate-secret-key [--step add|reseal|drop]   replace the key that seals stored policies' secrets

Options:
  --data DIR     LMDB data directory (default ./.burrow)
  --cluster URL  a cluster's shared store instead: redis://HOST:PORT[/DB] or
                 redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
  --json         print JSON
  -h, --help     show this help
(burrow admin COMMAND --help shows each command's options)
`;

const CREATE_ACCOUNT_HELP = `
Usage: burrow admin create-account --email E [--plan FREE|PRO] [--data DIR | --cluster URL] [--json]

Creates an account and its first token directly in the data directory, or in the cluster's store with
--cluster (works while the edges run). The token is printed once; it is stored only as a SHA-256 hash.

Options:
  --email E      the account's e-mail address (unique)
  --plan NAME    FREE (default) or PRO
  --data DIR     LMDB data directory (default ./.burrow)
  --cluster URL  a cluster's shared store instead: redis://HOST:PORT[/DB] or
                 redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
  --json         print {"account":{...},"token":{...}}
  -h, --help     show this help
`;

const TOKEN_CREATE_HELP = `
Usage: burrow admin token create --email E [--label L] [--data DIR | --cluster URL] [--json]

Creates a token for an existing account directly in the data directory (or the cluster's store with
--cluster): the way back in after its last token was revoked. The token is printed once. The plan's
active-token cap applies.

Options:
  --email E      the account's e-mail address
  --label L      the token's label (default "admin")
  --data DIR     LMDB data directory (default ./.burrow)
  --cluster URL  a cluster's shared store instead: redis://HOST:PORT[/DB] or
                 redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
  --json         print {"account":{...},"token":{...}}
  -h, --help     show this help
`;

const SET_PLAN_HELP = `
Usage: burrow admin set-plan --email E --plan FREE|PRO [--data DIR | --cluster URL] [--json]

Moves an account to another plan; the new limits apply from its next request on (also on running
edges; with --cluster, on every edge of the cluster). What the limit errors' "upgrade" means.

Options:
  --email E      the account's e-mail address
  --plan NAME    FREE or PRO
  --data DIR     LMDB data directory (default ./.burrow)
  --cluster URL  a cluster's shared store instead: redis://HOST:PORT[/DB] or
                 redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
  --json         print {"account":{...}}
  -h, --help     show this help
`;

const ACCOUNTS_LIST_HELP = `
Usage: burrow admin accounts list [--data DIR | --cluster URL] [--json]

Lists every account of the data directory (or of the cluster's store with --cluster): id, e-mail,
plan, active tokens, created.

Options:
  --data DIR     LMDB data directory (default ./.burrow)
  --cluster URL  a cluster's shared store instead: redis://HOST:PORT[/DB] or
                 redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
  --json         print {"accounts":[...]}
  -h, --help     show this help
`;

const BACKUP_HELP = `
Usage: burrow admin backup --to DIR [--data DIR] [--json]

Copies the data directory's accounts, tokens, reserved names and usage (its data.mdb) to DIR, as one
consistent snapshot, also while the edge runs and writes (LMDB's own copy; a plain cp of a database being
written can be torn). Captures are not included: they expire within the plan's window, and a copy of
them needs the edge stopped (docs/deploy.md). To restore: stop the edge, use DIR as its --data.
LMDB only: a cluster's shared store is backed up with Redis's own persistence (BGSAVE and its dump.rdb,
or a copy of its append-only file; docs/cluster.md).

Options:
  --to DIR       where the copy goes: a new or empty directory
  --data DIR     LMDB data directory (default ./.burrow)
  --cluster URL  refused: a cluster's store is Redis's to back up (see above)
  --json         print {"backup":{"path","bytes"}}
  -h, --help     show this help
`;

const ROTATE_HELP = `
Usage: burrow admin rotate-secret-key [--data DIR | --cluster URL --secret-key-file FILE]
                                      [--step add|reseal|drop] [--json]

Replaces the edge's secret key, the one that seals stored policies' webhook and OIDC client secrets
and OIDC sign-in cookies (docs/policies.md). On one edge's data directory the three steps run at once,
also while the edge runs: a new current key is put first in the key file (the edge seals under it
from its next seal on), every stored secret is sealed again under it (a policy changed meanwhile
through the API is read again, never overwritten), then the old keys are dropped from the file.
People signed in through OIDC sign in again. A cluster's edges each hold a copy of the key file,
so with --cluster it takes steps, with the file copied to every edge between them:
  --step add      put a new current key first in FILE (the old ones stay); copy FILE to every edge
  --step reseal   seal every stored secret again under FILE's current key
  --step drop     check that nothing is sealed under an old key, then drop the old keys from FILE;
                  copy FILE to every edge again

Options:
  --data DIR               LMDB data directory (default ./.burrow); its key file is DIR/secret.key
  --cluster URL            a cluster's shared store instead: redis://HOST:PORT[/DB] or
                           redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER
  --secret-key-file FILE   the key file, as given to burrow edge --secret-key-file (default:
                           DIR/secret.key; required with --cluster)
  --step STEP              add, reseal or drop: one step only (required with --cluster)
  --json                   print {"rotation":{"key_file","current_key","dropped_keys","resealed":[...],
                           "resealed_secrets"}}
  -h, --help               show this help
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
  switch (sub) {
    case 'create-account':
      return createAccount(rest);
    case 'token': {
      const [action, ...options] = rest;
      if (action === '--help' || action === '-h') return createToken(['--help']);
      if (action !== 'create') throw new UsageError(`unknown admin token command "${action ?? ''}"; usage: burrow admin token create --email E (see --help)`);
      return createToken(options);
    }
    case 'set-plan':
      return setPlan(rest);
    case 'accounts': {
      const [action, ...options] = rest;
      if (action === '--help' || action === '-h') return listAccounts(['--help']);
      if (action !== 'list') throw new UsageError(`unknown admin accounts command "${action ?? ''}"; usage: burrow admin accounts list (see --help)`);
      return listAccounts(options);
    }
    case 'backup':
      return backup(rest);
    case 'rotate-secret-key':
      return rotateSecretKey(rest);
    default:
      throw new UsageError(`unknown admin command "${sub}"; ${usageHint(HELP)}`);
  }
}

interface StoreChoice {
  data?: string | undefined;
  cluster?: string | undefined;
}

/**
 * Opens the store for `work`: the cluster's Redis with --cluster, else the LMDB data directory. A store
 * error (Redis unreachable included) becomes a one-line CliError with its code.
 */
async function withStore<T>({ data, cluster }: StoreChoice, work: (store: AccountStore) => Promise<T>): Promise<T> {
  if (cluster !== undefined && data !== undefined) throw new UsageError('give either --data DIR (one edge) or --cluster URL (a cluster), not both');
  if (cluster !== undefined) {
    try {
      redisTarget(cluster);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  let store: AccountStore;
  try {
    store = cluster === undefined ? Store.open(resolve(data ?? '.burrow')) : await RedisStore.connect(cluster);
  } catch (error) {
    if (error instanceof BurrowError) throw new CliError(error.message, 1, error.code);
    throw error;
  }
  try {
    return await work(store);
  } catch (error) {
    if (error instanceof BurrowError) throw new CliError(error.message, 1, error.code);
    throw error;
  } finally {
    await store.close();
  }
}

function email(value: string | undefined): string {
  if (value === undefined || !EMAIL.test(value.trim())) throw new UsageError('--email must be an e-mail address');
  return value;
}

async function account(store: AccountStore, address: string): Promise<AccountRecord> {
  const found = await store.findAccountByEmail(address);
  const where = store.kind === 'redis' ? "in the cluster's store" : 'in this data directory';
  if (found === undefined) throw new CliError(`no account with e-mail ${address.trim().toLowerCase()} ${where} (burrow admin accounts list)`, 1, 'NOT_FOUND');
  return found;
}

function accountJson(record: AccountRecord): { id: string; email: string; plan: string } {
  return { id: record.id, email: record.email, plan: record.plan };
}

async function createAccount(args: string[]): Promise<number> {
  const parsed = parse(args, { email: { type: 'string' }, plan: { type: 'string' }, data: { type: 'string' }, cluster: { type: 'string' }, json: { type: 'boolean' } }, CREATE_ACCOUNT_HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, CREATE_ACCOUNT_HELP);
  const { plan = 'FREE', json } = parsed.values;
  const address = email(parsed.values.email);
  if (!isPlanName(plan)) throw new UsageError(`--plan must be FREE or PRO, not ${plan}`);
  return withStore(parsed.values, async (store) => {
    const { account: created, token } = await store.createAccount(address, plan, 'admin');
    const result = {
      account: accountJson(created),
      token: { id: token.id, label: token.label, prefix: token.prefix, token: token.token, created_at: nowIso(token.createdAt) },
    };
    if (json === true) printJson(result);
    else process.stdout.write(`created ${created.email} (${created.id}, plan ${created.plan})\ntoken (shown once): ${token.token}\n`);
    return 0;
  });
}

async function createToken(args: string[]): Promise<number> {
  const parsed = parse(args, { email: { type: 'string' }, label: { type: 'string' }, data: { type: 'string' }, cluster: { type: 'string' }, json: { type: 'boolean' } }, TOKEN_CREATE_HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, TOKEN_CREATE_HELP);
  const address = email(parsed.values.email);
  const label = parsed.values.label ?? 'admin';
  if (label.trim() === '' || [...label].length > 64) throw new UsageError('--label must be 1 to 64 characters');
  return withStore(parsed.values, async (store) => {
    const owner = await account(store, address);
    const token = await store.createToken(owner, label.trim());
    const result = {
      account: accountJson(owner),
      token: { id: token.id, label: token.label, prefix: token.prefix, token: token.token, created_at: nowIso(token.createdAt) },
    };
    if (parsed.values.json === true) printJson(result);
    else process.stdout.write(`created ${token.id} "${token.label}" for ${owner.email}\ntoken (shown once): ${token.token}\n`);
    return 0;
  });
}

async function setPlan(args: string[]): Promise<number> {
  const parsed = parse(args, { email: { type: 'string' }, plan: { type: 'string' }, data: { type: 'string' }, cluster: { type: 'string' }, json: { type: 'boolean' } }, SET_PLAN_HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, SET_PLAN_HELP);
  const address = email(parsed.values.email);
  const plan = parsed.values.plan;
  if (plan === undefined || !isPlanName(plan)) throw new UsageError(`--plan must be FREE or PRO${plan === undefined ? '' : `, not ${plan}`}`);
  return withStore(parsed.values, async (store) => {
    const updated = await store.setPlan((await account(store, address)).id, plan);
    if (updated === undefined) throw new CliError(`the account ${address} disappeared meanwhile`, 1, 'NOT_FOUND');
    if (parsed.values.json === true) printJson({ account: accountJson(updated) });
    else process.stdout.write(`${updated.email} (${updated.id}) is on plan ${updated.plan}\n`);
    return 0;
  });
}

async function listAccounts(args: string[]): Promise<number> {
  const parsed = parse(args, { data: { type: 'string' }, cluster: { type: 'string' }, json: { type: 'boolean' } }, ACCOUNTS_LIST_HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, ACCOUNTS_LIST_HELP);
  return withStore(parsed.values, async (store) => {
    const accounts = [];
    for (const record of await store.listAccounts()) {
      accounts.push({ ...accountJson(record), active_tokens: await store.countActiveTokens(record.id), created_at: nowIso(record.createdAt) });
    }
    if (parsed.values.json === true) printJson({ accounts });
    else
      printTable(
        ['ID', 'EMAIL', 'PLAN', 'TOKENS', 'CREATED'],
        accounts.map((a) => [a.id, a.email, a.plan, a.active_tokens, shortTime(a.created_at)]),
        store.kind === 'redis' ? "no accounts in the cluster's store" : 'no accounts in this data directory',
      );
    return 0;
  });
}

async function backup(args: string[]): Promise<number> {
  const parsed = parse(args, { to: { type: 'string' }, data: { type: 'string' }, cluster: { type: 'string' }, json: { type: 'boolean' } }, BACKUP_HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, BACKUP_HELP);
  if (parsed.values.cluster !== undefined) {
    throw new CliError(
      "admin backup copies an edge's LMDB data directory; a cluster's store lives in Redis: back it up with " +
        "Redis's own persistence (redis-cli -u URL BGSAVE, then copy its dump.rdb, or copy its append-only file; docs/cluster.md)",
      2,
    );
  }
  if (parsed.values.to === undefined || parsed.values.to === '') throw new UsageError('--to DIR is required: where the copy goes');
  const data = resolve(parsed.values.data ?? '.burrow');
  // Opening a directory that holds no store would create an empty one, and back that up.
  if (!existsSync(join(data, 'data.mdb'))) throw new CliError(`${data} holds no edge data (no data.mdb); give the edge's --data DIR`);
  const target = resolve(parsed.values.to);
  if (existsSync(target) && readdirSync(target).length > 0) throw new CliError(`${target} is not empty; back up into a new or empty directory`);
  mkdirSync(target, { recursive: true, mode: 0o700 });
  return withStore({ data }, async (store) => {
    if (!(store instanceof Store)) throw new CliError('admin backup needs an LMDB data directory');
    // mdb_env_copy under a read transaction: a snapshot, whatever the edge commits meanwhile.
    await store.root.backup(target, false);
    const path = join(target, 'data.mdb');
    const { size } = statSync(path);
    if (parsed.values.json === true) printJson({ backup: { path: target, bytes: size } });
    else process.stdout.write(`backed up accounts, tokens and reservations to ${target} (${size} bytes; captures not included)\n`);
    return 0;
  });
}

const ROTATION_STEPS = ['add', 'reseal', 'drop'] as const;

async function rotateSecretKey(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    { data: { type: 'string' }, cluster: { type: 'string' }, 'secret-key-file': { type: 'string' }, step: { type: 'string' }, json: { type: 'boolean' } },
    ROTATE_HELP,
  );
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, ROTATE_HELP);
  const { cluster, step } = parsed.values;
  if (step !== undefined && !(ROTATION_STEPS as readonly string[]).includes(step)) throw new UsageError(`--step must be add, reseal or drop, not ${step}`);
  if (cluster !== undefined && (step === undefined || parsed.values['secret-key-file'] === undefined)) {
    throw new UsageError(
      "with --cluster the rotation takes steps, each edge holding its own copy of the key file: --step add, copy the file to every edge, --step reseal, --step drop, copy it again (each with --secret-key-file FILE)",
    );
  }
  const keyFile = resolve(parsed.values['secret-key-file'] ?? defaultSecretKeyFile(resolve(parsed.values.data ?? '.burrow')));
  let box: SecretBox;
  try {
    box = SecretBox.open(keyFile, { create: false });
  } catch (error) {
    throw new CliError(`${(error as Error).message}${existsSync(keyFile) ? '' : ' The edge creates it when it first starts; there is nothing to rotate yet.'}`);
  }
  const steps = step === undefined ? ROTATION_STEPS : [step as (typeof ROTATION_STEPS)[number]];
  const run = async (store: AccountStore | null): Promise<number> => {
    let resealed: ResealReport = { names: [], secrets: 0 };
    let dropped: string[] = [];
    const lines: string[] = [];
    if (steps.includes('add')) {
      box.addKey();
      lines.push(`${keyFile}: new current key ${box.currentKeyId} (keys: ${box.keyIds.join(', ')})`);
    }
    if (steps.includes('reseal')) {
      resealed = await resealStoredPolicies(store!, box);
      const names = resealed.names.length;
      lines.push(`sealed ${resealed.secrets} secret${resealed.secrets === 1 ? '' : 's'} again under ${box.currentKeyId} (${names} reserved name${names === 1 ? '' : 's'})`);
    }
    if (steps.includes('drop')) {
      const left = await namesUnderOldKeys(store!, box);
      if (left.length > 0) {
        throw new CliError(`not dropping the old keys: the policies of ${left.join(', ')} still have secrets sealed under them; run --step reseal first`);
      }
      dropped = box.dropOldKeys();
      lines.push(`${dropped.length === 0 ? 'no old key to drop' : `dropped ${dropped.join(', ')}`}; ${keyFile} holds ${box.currentKeyId} only`);
    }
    if (cluster !== undefined && step !== 'reseal') lines.push(`now copy ${keyFile} to every edge (same path, mode 0600)${step === 'add' ? ', then run --step reseal' : ''}`);
    if (parsed.values.json === true) {
      printJson({ rotation: { key_file: keyFile, current_key: box.currentKeyId, dropped_keys: dropped, resealed: resealed.names, resealed_secrets: resealed.secrets } });
    } else process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  };
  // Adding a key alone needs no store.
  return steps.length === 1 && steps[0] === 'add' ? run(null) : withStore(parsed.values, run);
}
