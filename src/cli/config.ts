/**
 * The client's configuration: `$XDG_CONFIG_HOME/burrow/config.json` (else ~/.config/burrow), mode 0600,
 * written atomically. Token, edge and CA come from flags first, then BURROW_TOKEN / BURROW_EDGE /
 * BURROW_CA, then burrow.yml's shared settings (config-file.ts), then here. Several edges (failover
 * order) come from repeated --edge, a comma-separated BURROW_EDGE, burrow.yml's `edge` list, or the
 * file's `edges` list beside its `edge` (the first of them, for older versions).
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseResolveRule, type ResolveRule } from '../client/resolve-rules.js';
import { CliError, UsageError } from './args.js';
import { configDir, formatProblem, loadConfig, type ConfigFile } from './config-file.js';
import { normaliseEdge } from './edge-url.js';

export interface ClientConfig {
  edge?: string;
  /** Several edges in failover order; `edge` is then the first of them. */
  edges?: string[];
  token?: string;
  /** An absolute path to a PEM CA certificate the edge's certificate is checked against ("burrow login --ca"). */
  ca?: string;
}

export const DEFAULT_EDGE = 'http://localhost:8080';

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(configDir(env), 'config.json');
}

export function readConfig(path = configPath()): ClientConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not a JSON object');
    const { edge, edges, token, ca } = parsed as Record<string, unknown>;
    const edgeList = Array.isArray(edges) ? edges.filter((item): item is string => typeof item === 'string' && item !== '') : [];
    return {
      ...(typeof edge === 'string' ? { edge } : {}),
      ...(edgeList.length > 0 ? { edges: edgeList } : {}),
      ...(typeof token === 'string' ? { token } : {}),
      ...(typeof ca === 'string' ? { ca } : {}),
    };
  } catch (error) {
    throw new CliError(`${path} is not valid: ${(error as Error).message}; fix it or run "burrow login" again`);
  }
}

export function writeConfig(config: ClientConfig, path = configPath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
}

/** A CA file to trust and where its name came from, so a bad file is reported by the name the user gave. */
export interface CaSource {
  path: string;
  /** "--ca", "BURROW_CA", or the config file's path. */
  from: string;
}

export interface Credentials {
  /** The first edge: the one names are remembered for and single-edge messages name. */
  edge: string;
  /** Every edge in failover order (at least one; `edge` first). */
  edges: string[];
  token: string | undefined;
  ca: CaSource | undefined;
  /** `--resolve HOST:PORT:ADDRESS` rules (else BURROW_RESOLVE, comma-separated): addresses to dial without DNS. */
  resolve: ResolveRule[];
}

/**
 * Flags, then environment, then burrow.yml (`project`: the file --config names, else the one found),
 * then the saved login, then the default edge (and no extra CA). The saved login's token goes only to the
 * edges it was saved with: a burrow.yml naming other edges brings its own token (token_env, token), or
 * the command stops and says so, so a burrow.yml in a directory someone else wrote cannot lead the
 * token elsewhere (as npm binds a registry's token to that registry).
 */
export function resolveCredentials(
  flags: { edge?: string | string[] | undefined; token?: string | undefined; ca?: string | undefined; resolve?: string[] | undefined },
  env: NodeJS.ProcessEnv = process.env,
  project: ConfigFile | null = projectConfig(env),
): Credentials {
  const caFromEnv = nonEmpty(env.BURROW_CA);
  const flagEdges = typeof flags.edge === 'string' ? [flags.edge] : flags.edge !== undefined && flags.edge.length > 0 ? flags.edge : undefined;
  const envEdges = nonEmpty(env.BURROW_EDGE)
    ?.split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  const chosenEdges = flagEdges ?? (envEdges !== undefined && envEdges.length > 0 ? envEdges : undefined);
  const projectEdges = chosenEdges === undefined ? project?.edges : undefined;
  const chosenToken = flags.token ?? nonEmpty(env.BURROW_TOKEN) ?? (project === null ? undefined : projectToken(project, env));
  const chosenCa = flags.ca !== undefined || caFromEnv !== undefined || project?.ca !== undefined;
  const needsFile = (chosenEdges ?? projectEdges) === undefined || chosenToken === undefined || !chosenCa;
  const path = configPath(env);
  const file = needsFile ? readConfig(path) : {};
  const fileEdges = file.edges ?? (file.edge === undefined ? undefined : [file.edge]);
  const given = chosenEdges ?? projectEdges ?? fileEdges ?? [DEFAULT_EDGE];
  // The same edge twice would only slow a failover down.
  const edges = [...new Set(given.map(normaliseEdge))];
  const token = chosenToken ?? file.token;
  if (chosenToken === undefined && token !== undefined && projectEdges !== undefined) {
    const saved = new Set((fileEdges ?? [DEFAULT_EDGE]).map(normaliseEdge));
    const elsewhere = edges.filter((edge) => !saved.has(edge));
    if (elsewhere.length > 0) {
      throw new CliError(
        `${project!.path} names the edge ${elsewhere.join(', ')} but no token, and the token "burrow login" saved is sent only to ${[...saved].join(', ')}: add token_env: NAME to ${project!.path}, set BURROW_TOKEN, pass --token, or run "burrow login TOKEN --edge ${elsewhere[0]}"`,
        1,
        'UNAUTHORIZED',
      );
    }
  }
  const ca: CaSource | undefined =
    flags.ca !== undefined
      ? { path: flags.ca, from: '--ca' }
      : caFromEnv !== undefined
        ? { path: caFromEnv, from: 'BURROW_CA' }
        : project?.ca !== undefined
          ? { path: project.ca, from: project.path }
          : file.ca === undefined
            ? undefined
            : { path: file.ca, from: path };
  return { edge: edges[0]!, edges, token, ca, resolve: resolveRules(flags.resolve, env) };
}

/** --resolve (repeatable), else BURROW_RESOLVE; never the config file (it is for trying out, not for good). */
function resolveRules(flags: string[] | undefined, env: NodeJS.ProcessEnv): ResolveRule[] {
  const fromFlags = flags !== undefined && flags.length > 0;
  const texts = fromFlags ? flags : (nonEmpty(env.BURROW_RESOLVE)?.split(',').map((item) => item.trim()).filter((item) => item !== '') ?? []);
  return texts.map((text) => {
    const rule = parseResolveRule(text);
    if (typeof rule === 'string') throw new UsageError(`${fromFlags ? '--resolve' : 'BURROW_RESOLVE'} ${rule}`);
    return rule;
  });
}

/** burrow.yml's token: written in it, or read from the variable its token_env names (which must be set). */
function projectToken(project: ConfigFile, env: NodeJS.ProcessEnv): string | undefined {
  if (project.token !== undefined) return project.token;
  if (project.tokenEnv === undefined) return undefined;
  const value = nonEmpty(env[project.tokenEnv]);
  if (value === undefined) {
    throw new CliError(`${project.path} takes the token from ${project.tokenEnv} (token_env), which is not set; set it, or pass --token`, 1, 'UNAUTHORIZED');
  }
  return value;
}

/** Files whose warnings were printed: once per command is enough. */
const warned = new Set<string>();

/** burrow.yml's shared settings for a command without --config: its warnings go to stderr, once. */
export function projectConfig(env: NodeJS.ProcessEnv = process.env): ConfigFile | null {
  const loaded = loadConfig(undefined, env);
  if (loaded.config !== null && !warned.has(loaded.config.path)) {
    warned.add(loaded.config.path);
    for (const warning of loaded.warnings) process.stderr.write(`burrow: warning: ${formatProblem(warning)}\n`);
  }
  return loaded.config;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

export function requireToken(credentials: Credentials): string {
  if (credentials.token === undefined) {
    throw new CliError('no token: pass --token, set BURROW_TOKEN, or run "burrow login TOKEN" ("burrow edge --dev" prints a dev token)', 1, 'UNAUTHORIZED');
  }
  return credentials.token;
}

/**
 * The generated subdomain each local port got from each edge, remembered next to config.json
 * (`names.json`), so a restarted `burrow http PORT` asks for it again and keeps its URL.
 */
export function namesPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(dirname(configPath(env)), 'names.json');
}

function nameKey(edge: string, port: number): string {
  return `${edge} ${port}`;
}

function readNames(path: string): Record<string, string> {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, string>;
  } catch {
    // Missing or damaged: a memory of names only, nothing is lost by starting over.
  }
  return {};
}

export function rememberedName(edge: string, port: number, path = namesPath()): string | undefined {
  const name = readNames(path)[nameKey(edge, port)];
  return typeof name === 'string' ? name : undefined;
}

export function rememberName(edge: string, port: number, name: string, path = namesPath()): void {
  const names = readNames(path);
  if (names[nameKey(edge, port)] === name) return;
  names[nameKey(edge, port)] = name;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(names, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, path);
}
