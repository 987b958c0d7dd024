/**
 * `burrow config check|path|edit`: burrow.yml checked with every problem's file, line and key, the file
 * in use and the places looked at, and the file opened in the user's editor (created from a commented
 * example when there is none).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CliError, noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import {
  configDir,
  CONFIG_FILE_NAME,
  EXAMPLE_CONFIG,
  findConfigFile,
  formatProblem,
  readConfigFile,
  type ConfigFile,
  type ConfigLookup,
  type ConfigProblem,
  type TunnelConfig,
} from '../config-file.js';
import { printJson, printTable } from '../output.js';
import { urlHost } from '../../inspector/address.js';

const HELP = `
Usage: burrow config check | path | edit [--config FILE] [--json]

burrow.yml holds the edge, the token (or the variable it is in), the CA, the inspector's address, the
log format and named tunnels for "burrow start" (docs/config.md). The file used is --config FILE, else
BURROW_CONFIG, else ./burrow.yml, else burrow.yml in the user config directory
($XDG_CONFIG_HOME/burrow, else ~/.config/burrow). Its edge, token and ca apply to every command,
after the flags and BURROW_EDGE / BURROW_TOKEN / BURROW_CA and before what "burrow login" saved.

  check   checks the file: every problem as FILE:LINE:COLUMN: KEY: what is wrong (an unknown key is
          one), exit 1 when there is any; else a summary of its tunnels and settings
  path    prints the file in use on the first line, then every place looked at, in order (exit 1
          when there is none)
  edit    opens the file in $VISUAL, else $EDITOR, else vi, and checks it afterwards; with no file
          it first writes a commented example (to --config FILE, else the user config directory).
          Without a terminal it prints the path instead of opening an editor

Options:
  --config FILE   the file to check, show or edit
  --json          check: {"file","valid","problems","warnings","settings","tunnels"} (secrets
                  never shown); path: {"path","from","looked"}; edit: {"path","created"}, no editor
  -h, --help      show this help
`;

export async function configCommand(args: string[]): Promise<number> {
  const parsed = parse(args, { config: { type: 'string' }, json: { type: 'boolean' } }, HELP);
  if (parsed === null) return 0;
  const action = requirePositional(parsed, 0, 'check, path or edit', HELP);
  noExtraPositionals(parsed, 1, HELP);
  const json = parsed.values.json === true;
  const lookup = findConfigFile(parsed.values.config);
  switch (action) {
    case 'check':
      return check(lookup, json);
    case 'path':
      return path(lookup, json);
    case 'edit':
      return edit(lookup, json);
    default:
      throw new UsageError(`unknown action "${action}"; use check, path or edit`);
  }
}

function noFile(lookup: ConfigLookup): CliError {
  return new CliError(`no ${CONFIG_FILE_NAME}: looked at ${lookup.looked.map((place) => place.path).join(', ')}; "burrow config edit" creates one`);
}

// ---- check ----------------------------------------------------------------------------------------------

function check(lookup: ConfigLookup, json: boolean): number {
  if (lookup.path === null) throw noFile(lookup);
  const { config, problems, warnings } = readConfigFile(lookup.path);
  if (json) {
    printJson({
      file: lookup.path,
      valid: config !== null,
      problems: problems.map(problemJson),
      warnings: warnings.map(problemJson),
      settings: config === null ? null : settingsJson(config),
      tunnels: config === null ? [] : config.tunnels.map(tunnelJson),
    });
  } else {
    for (const problem of problems) process.stdout.write(`${formatProblem(problem)}\n`);
    for (const warning of warnings) process.stdout.write(`warning: ${formatProblem(warning)}\n`);
    if (config !== null) printSummary(config);
  }
  if (config === null) {
    throw new CliError(`${lookup.path} has ${problems.length === 1 ? 'a problem' : `${problems.length} problems`}`, 1, 'INVALID_REQUEST');
  }
  return 0;
}

function problemJson(problem: ConfigProblem): Record<string, unknown> {
  return { file: problem.file, line: problem.line ?? null, column: problem.column ?? null, key: problem.key, message: problem.message };
}

function settingsJson(config: ConfigFile): Record<string, unknown> {
  return {
    edges: config.edges ?? null,
    token: config.token !== undefined ? 'set' : null,
    token_env: config.tokenEnv ?? null,
    ca: config.ca ?? null,
    inspect: config.inspect === undefined ? null : config.inspect === null ? 'off' : inspectText(config.inspect),
    log: config.log ?? null,
    edges_per_tunnel: config.edgesPerTunnel ?? null,
  };
}

function inspectText(address: { host: string; port: number }): string {
  return `${urlHost(address.host)}:${address.port}`;
}

function tunnelJson(tunnel: TunnelConfig): Record<string, unknown> {
  if (tunnel.kind !== 'http') {
    return {
      name: tunnel.name,
      kind: tunnel.kind,
      target: `${tunnel.host}:${tunnel.port}`,
      subdomain: tunnel.subdomain ?? null,
      ...(tunnel.kind === 'tcp' ? { remote_port: tunnel.remotePort ?? null } : {}),
      proxy_protocol: tunnel.proxyProtocol,
      policy: policyKeys(tunnel),
    };
  }
  return {
    name: tunnel.name,
    kind: 'http',
    target: tunnel.target.origin,
    subdomain: tunnel.subdomain ?? null,
    routes: tunnel.routes.map((route) => ({ prefix: route.prefix, target: route.target!.origin, strip_prefix: route.stripPrefix })),
    host_header: tunnel.hostHeader === 'keep' ? null : tunnel.hostHeader === 'rewrite' ? 'rewrite' : tunnel.hostHeader.value,
    local_insecure: tunnel.localInsecure,
    policy: tunnel.policy === undefined ? [] : policyKeys(tunnel),
  };
}

/** The policy keys a tunnel sets, by their names in the file (never their values: some are secrets). */
function policyKeys(tunnel: TunnelConfig): string[] {
  if (tunnel.policy === undefined) return [];
  return Object.values(tunnel.policy.source).map((source) => source.key.split('.').pop()!);
}

function printSummary(config: ConfigFile): void {
  const count = config.tunnels.length;
  process.stdout.write(`${config.path} is valid: ${count === 1 ? '1 tunnel' : `${count} tunnels`}\n`);
  if (count > 0) {
    printTable(
      ['NAME', 'KIND', 'TARGET', 'SUBDOMAIN', 'ALSO'],
      config.tunnels.map((tunnel) => {
        if (tunnel.kind !== 'http') {
          const also = [...(tunnel.remotePort === undefined ? [] : [`remote_port ${tunnel.remotePort}`]), ...(tunnel.proxyProtocol ? ['proxy_protocol'] : []), ...policyKeys(tunnel)];
          return [tunnel.name, tunnel.kind, `${tunnel.host}:${tunnel.port}`, tunnel.subdomain, also.join(', ')];
        }
        const also = [
          ...tunnel.routes.map((route) => `${route.prefix} -> ${route.target!.origin}${route.stripPrefix ? ' (prefix stripped)' : ''}`),
          ...(tunnel.hostHeader === 'keep' ? [] : [`host_header ${tunnel.hostHeader === 'rewrite' ? 'rewrite' : tunnel.hostHeader.value}`]),
          ...(tunnel.localInsecure ? ['local_insecure'] : []),
          ...policyKeys(tunnel),
        ];
        return [tunnel.name, 'http', tunnel.target.origin, tunnel.subdomain, also.join(', ')];
      }),
      '',
    );
  }
  const settings = [
    `edge ${config.edges?.join(', ') ?? '(from BURROW_EDGE or "burrow login")'}`,
    `token ${config.token !== undefined ? 'in the file' : config.tokenEnv !== undefined ? `from $${config.tokenEnv}${process.env[config.tokenEnv] ? '' : ' (not set here)'}` : '(from BURROW_TOKEN or "burrow login")'}`,
    ...(config.ca === undefined ? [] : [`ca ${config.ca}`]),
    `inspector ${config.inspect === undefined ? '127.0.0.1:4040 (or the next free port)' : config.inspect === null ? 'off' : inspectText(config.inspect)}`,
    ...(config.log === undefined ? [] : [`log ${config.log}`]),
    ...(config.edgesPerTunnel === undefined ? [] : [`edges ${config.edgesPerTunnel} per tunnel in a cluster`]),
  ];
  process.stdout.write(`${settings.join('; ')}\n`);
}

// ---- path -----------------------------------------------------------------------------------------------

function path(lookup: ConfigLookup, json: boolean): number {
  if (json) {
    printJson({ path: lookup.path, from: lookup.from, looked: lookup.looked.map((place) => ({ path: place.path, place: place.place, exists: place.exists })) });
  } else {
    if (lookup.path !== null) process.stdout.write(`${lookup.path}\n`);
    lookup.looked.forEach((place, index) => {
      const state = place.path === lookup.path ? 'used' : place.exists ? 'exists, not used' : 'not there';
      process.stdout.write(`  ${index + 1}. ${place.path} (${place.place}): ${state}\n`);
    });
  }
  if (lookup.path === null) throw noFile(lookup);
  return 0;
}

// ---- edit -----------------------------------------------------------------------------------------------

function edit(lookup: ConfigLookup, json: boolean): number {
  let file = lookup.path;
  let created = false;
  if (file === null) {
    file = join(configDir(), CONFIG_FILE_NAME);
    create(file);
    created = true;
  } else if (!lookup.looked.find((place) => place.path === file)!.exists) {
    // --config or BURROW_CONFIG naming a file that is not there yet: it is made there.
    create(file);
    created = true;
  }
  if (json) {
    printJson({ path: file, created });
    return 0;
  }
  if (process.stdin.isTTY !== true || process.stdout.isTTY !== true) {
    if (created) process.stderr.write(`burrow: wrote an example to ${file}\n`);
    process.stdout.write(`${file}\n`);
    return 0;
  }
  const editor = nonEmpty(process.env.VISUAL) ?? nonEmpty(process.env.EDITOR) ?? 'vi';
  // As git runs it: the variable may carry arguments ("code --wait").
  const result = spawnSync('/bin/sh', ['-c', `${editor} "$1"`, editor, file], { stdio: 'inherit' });
  if (result.error !== undefined) throw new CliError(`cannot run the editor "${editor}": ${result.error.message}`);
  if (result.status !== 0) throw new CliError(`the editor "${editor}" exited with ${result.status ?? result.signal}; ${file} is as it left it`);
  const { config, problems, warnings } = readConfigFile(file);
  for (const problem of problems) process.stdout.write(`${formatProblem(problem)}\n`);
  for (const warning of warnings) process.stdout.write(`warning: ${formatProblem(warning)}\n`);
  if (config === null) throw new CliError(`${file} has ${problems.length === 1 ? 'a problem' : `${problems.length} problems`}; "burrow config edit" again to fix it`);
  printSummary(config);
  return 0;
}

/** The commented example, mode 0600 (the file may come to hold a token), in a 0700 directory. */
function create(file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, EXAMPLE_CONFIG, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new CliError(`cannot write ${file}: ${(error as Error).message}`);
    return;
  }
  chmodSync(file, 0o600);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
