/**
 * The client's configuration: `$XDG_CONFIG_HOME/burrow/config.json` (else ~/.config/burrow), mode 0600,
 * written atomically. Token, edge and CA come from flags first, then BURROW_TOKEN / BURROW_EDGE /
 * BURROW_CA, then here. Several edges (failover order) come from repeated --edge, a comma-separated
 * BURROW_EDGE, or the file's `edges` list beside its `edge` (the first of them, for older versions).
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseResolveRule, type ResolveRule } from '../client/resolve-rules.js';
import { CliError, UsageError } from './args.js';

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
  const base = env.XDG_CONFIG_HOME !== undefined && env.XDG_CONFIG_HOME !== '' ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'burrow', 'config.json');
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

/** Flags, then environment, then the config file, then the default edge (and no extra CA). */
export function resolveCredentials(
  flags: { edge?: string | string[] | undefined; token?: string | undefined; ca?: string | undefined; resolve?: string[] | undefined },
  env: NodeJS.ProcessEnv = process.env,
): Credentials {
  const caFromEnv = nonEmpty(env.BURROW_CA);
  const flagEdges = typeof flags.edge === 'string' ? [flags.edge] : flags.edge !== undefined && flags.edge.length > 0 ? flags.edge : undefined;
  const needsFile = flagEdges === undefined || flags.token === undefined || (flags.ca === undefined && caFromEnv === undefined);
  const path = configPath(env);
  const file = needsFile ? readConfig(path) : {};
  const envEdges = nonEmpty(env.BURROW_EDGE)
    ?.split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  const fileEdges = file.edges ?? (file.edge === undefined ? undefined : [file.edge]);
  const given = flagEdges ?? (envEdges !== undefined && envEdges.length > 0 ? envEdges : undefined) ?? fileEdges ?? [DEFAULT_EDGE];
  // The same edge twice would only slow a failover down.
  const edges = [...new Set(given.map(normaliseEdge))];
  const token = flags.token ?? nonEmpty(env.BURROW_TOKEN) ?? file.token;
  const ca: CaSource | undefined =
    flags.ca !== undefined
      ? { path: flags.ca, from: '--ca' }
      : caFromEnv !== undefined
        ? { path: caFromEnv, from: 'BURROW_CA' }
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

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

export function normaliseEdge(edge: string): string {
  let url: URL;
  try {
    url = new URL(edge.includes('://') ? edge : `http://${edge}`);
  } catch {
    throw new CliError(`"${edge}" is not an edge URL; use e.g. http://localhost:8080`, 2);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`the edge URL must be http or https, not ${url.protocol}`, 2);
  return url.origin;
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
