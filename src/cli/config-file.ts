/**
 * `burrow.yml` (docs/config.md): the edge, the token reference, the CA, the inspector's address, the log
 * format and named tunnels, for `burrow start NAME... | --all`; `burrow http` and the other commands read
 * only the shared settings. Found through `--config FILE`, else `BURROW_CONFIG`, else `./burrow.yml`,
 * else `burrow.yml` in the user config directory (beside config.json).
 *
 * Parsed with the `yaml` package (YAML 1.2, so JSON too) keeping every node's position, and checked here
 * key by key: a problem names the file, line, column and key path (`tunnels.web.routes["/api"]`), every
 * problem of the file is reported at once, and an unknown key is a problem, never ignored. Values are
 * taken as written: `${NAME}` is not expanded (the token comes from a variable through `token_env`).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import { parseHostHeader, type HostHeader } from '../client/host-header.js';
import { parseRoute, parseTarget, type LocalTarget, type Route } from '../client/routes.js';
import { parseToken } from '../ids.js';
import { parseInspectAddress, type InspectAddress } from '../inspector/address.js';
import { subdomainProblem } from '../subdomain.js';
import { encodePolicyHeader, POLICY_FIELDS, policySpecFromFlags } from '../protocol/policy.js';
import { CliError } from './args.js';
import { edgeProblem } from './edge-url.js';

export const CONFIG_FILE_NAME = 'burrow.yml';

/** The user's config directory: `$XDG_CONFIG_HOME/burrow`, else `~/.config/burrow`. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME !== undefined && env.XDG_CONFIG_HOME !== '' ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'burrow');
}

// ---- what a file holds ----------------------------------------------------------------------------------

/** A problem (or a warning) in a file: where, which key, and what is wrong. */
export interface ConfigProblem {
  file: string;
  /** 1-based; absent for a problem of the whole file (it cannot be read, its mode). */
  line?: number;
  column?: number;
  /** The key path, e.g. `tunnels.web.routes["/api"].target`; "" for the document itself. */
  key: string;
  message: string;
}

/** A route as `burrow http --route PREFIX=TARGET [--strip-prefix]` gives it. */
export type RouteConfig = Route & { stripPrefix: boolean };

/**
 * The policy keys of a tunnel as the flags of `burrow http` would give them (issue 26, DESIGN.md 5b):
 * the same shape as node:util parseArgs's values for POLICY_FLAG_OPTIONS (src/protocol/policy.ts), so
 * the policy module's `policySpecFromFlags` builds and checks the spec from either.
 */
export interface PolicyFlags {
  'basic-auth'?: string[];
  'basic-auth-forward'?: boolean;
  'allow-cidr'?: string[];
  'deny-cidr'?: string[];
  oidc?: string;
  'oidc-client-id'?: string;
  'oidc-client-secret'?: string;
  'oidc-allow-email'?: string[];
  'oidc-allow-domain'?: string[];
  'verify-webhook'?: string[];
  'request-header-add'?: string[];
  'request-header-remove'?: string[];
  'response-header-add'?: string[];
  'response-header-remove'?: string[];
  'rate-limit'?: string;
}

/** Where in the file each policy flag came from, so a policy error can name the line and key. */
export type PolicySource = Partial<Record<keyof PolicyFlags, { line: number; column: number; key: string }>>;

interface TunnelBase {
  name: string;
  subdomain?: string;
}

export interface HttpTunnelConfig extends TunnelBase {
  kind: 'http';
  target: LocalTarget;
  routes: RouteConfig[];
  hostHeader: HostHeader;
  localInsecure: boolean;
  /** Undefined when the tunnel has no policy key. */
  policy?: { flags: PolicyFlags; source: PolicySource };
}

/** `tcp:` and `tls:` tunnels (docs/tcp.md): their local server, and the keys of `burrow tcp`/`burrow tls`'s flags. */
export interface StreamTunnelConfig extends TunnelBase {
  kind: 'tcp' | 'tls';
  host: string;
  port: number;
  /** `remote_port` (tcp only): the public port to ask for; absent: a free one. */
  remotePort?: number;
  /** `proxy_protocol`: a PROXY v2 header before each connection's bytes. */
  proxyProtocol: boolean;
  /** `allow_cidr`/`deny_cidr`, the only policy such a tunnel takes; undefined without them. */
  policy?: { flags: PolicyFlags; source: PolicySource };
}

export type TunnelConfig = HttpTunnelConfig | StreamTunnelConfig;

export interface ConfigFile {
  path: string;
  /** Normalised origins, failover order. */
  edges?: string[];
  /** A literal token (discouraged: the file becomes a secret). */
  token?: string;
  /** The environment variable holding the token. */
  tokenEnv?: string;
  /** Absolute path of a PEM CA (relative paths are relative to the file). */
  ca?: string;
  /** null: `inspect: off`. */
  inspect?: InspectAddress | null;
  log?: 'text' | 'json';
  /** `edges`: how many edges of a cluster each tunnel is attached to (`--edges K`). */
  edgesPerTunnel?: number;
  /** In file order. */
  tunnels: TunnelConfig[];
  /** Keys holding secrets in clear (token, basic_auth...): the file's mode is checked when any does. */
  secrets: string[];
}

export interface ParsedConfig {
  /** Null when there are problems. */
  config: ConfigFile | null;
  problems: ConfigProblem[];
  warnings: ConfigProblem[];
}

/** "burrow.yml:12:5: tunnels.web.http: ...": what editors and terminals know how to jump to. */
export function formatProblem(problem: ConfigProblem): string {
  const where = problem.line === undefined ? problem.file : `${problem.file}:${problem.line}:${problem.column ?? 1}`;
  return `${where}: ${problem.key === '' ? '' : `${problem.key}: `}${problem.message}`;
}

/** A file with problems: the first in the message (one line), all of them in `problems`. */
export class ConfigFileError extends CliError {
  constructor(readonly problems: ConfigProblem[]) {
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more: "burrow config check" lists them)` : '';
    super(`${formatProblem(problems[0]!)}${more}`, 1, 'INVALID_REQUEST');
    this.name = 'ConfigFileError';
  }
}

// ---- finding and reading ----------------------------------------------------------------------------------

type Place = '--config' | 'BURROW_CONFIG' | 'working directory' | 'user config directory';

export interface ConfigLookup {
  /** The file in use, or null when none was given and none exists. */
  path: string | null;
  /** How it was chosen. */
  from: Place | null;
  /** Every place looked at, in order, whether a file is there (the first one there is used). */
  looked: { path: string; place: Place; exists: boolean }[];
}

/** `--config FILE`, else BURROW_CONFIG, else ./burrow.yml, else burrow.yml in the user config directory. */
export function findConfigFile(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): ConfigLookup {
  const given = explicit ?? (env.BURROW_CONFIG === '' ? undefined : env.BURROW_CONFIG);
  if (given !== undefined) {
    const path = resolve(cwd, given);
    const place = explicit !== undefined ? '--config' : 'BURROW_CONFIG';
    return { path, from: place, looked: [{ path, place, exists: isFile(path) }] };
  }
  const looked: ConfigLookup['looked'] = [];
  for (const [path, place] of [
    [join(cwd, CONFIG_FILE_NAME), 'working directory'],
    [join(configDir(env), CONFIG_FILE_NAME), 'user config directory'],
  ] as const) {
    if (!looked.some((other) => other.path === path)) looked.push({ path, place, exists: isFile(path) });
  }
  const used = looked.find((place) => place.exists);
  return { path: used?.path ?? null, from: used?.place ?? null, looked };
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Reads and checks a file; a file that cannot be read is one problem without a line. */
export function readConfigFile(path: string): ParsedConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory, not a file' : (error as Error).message;
    return { config: null, problems: [{ file: path, key: '', message: `cannot read it: ${message}` }], warnings: [] };
  }
  const parsed = parseConfigText(text, path);
  if (parsed.config !== null && parsed.config.secrets.length > 0) {
    const warning = modeWarning(path, parsed.config.secrets);
    if (warning !== null) parsed.warnings.push(warning);
  }
  return parsed;
}

/** A file holding secrets that others may read, said once with the fix. */
function modeWarning(path: string, secrets: string[]): ConfigProblem | null {
  if (process.platform === 'win32') return null;
  let mode: number;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    return null;
  }
  if ((mode & 0o077) === 0) return null;
  const who = (mode & 0o007) !== 0 ? 'everyone on this machine' : 'its group';
  return {
    file: path,
    key: '',
    message: `holds secrets (${secrets.join(', ')}) and is readable by ${who} (mode ${mode.toString(8).padStart(4, '0')}): run "chmod 600 ${path}", or take the token from the environment (token_env: NAME)`,
  };
}

export interface LoadedConfig {
  lookup: ConfigLookup;
  /** Null when no file was given and none exists. */
  config: ConfigFile | null;
  warnings: ConfigProblem[];
}

/**
 * The config file in use, checked: null when there is none; a ConfigFileError when it has problems, or
 * when the file that --config or BURROW_CONFIG names is missing.
 */
export function loadConfig(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): LoadedConfig {
  const lookup = findConfigFile(explicit, env, cwd);
  if (lookup.path === null) return { lookup, config: null, warnings: [] };
  const parsed = readConfigFile(lookup.path);
  if (parsed.config === null) {
    const problems = parsed.problems.map((problem) =>
      problem.line === undefined && (lookup.from === '--config' || lookup.from === 'BURROW_CONFIG') ? { ...problem, message: `${problem.message} (given by ${lookup.from})` } : problem,
    );
    throw new ConfigFileError(problems);
  }
  return { lookup, config: parsed.config, warnings: parsed.warnings };
}

// ---- checking -----------------------------------------------------------------------------------------------

const TOP_KEYS = ['version', 'edge', 'edges', 'token', 'token_env', 'ca', 'inspect', 'log', 'tunnels'] as const;
/** The most edges one tunnel is attached to (src/client/multi-edge.ts MAX_EDGES_PER_TUNNEL). */
const MAX_EDGES = 8;
const POLICY_KEYS = POLICY_FIELDS;
const HTTP_KEYS = ['http', 'subdomain', 'routes', 'host_header', 'local_insecure', ...POLICY_KEYS] as const;
const KINDS = ['http', 'tcp', 'tls'] as const;
const STREAM_KEYS = ['remote_port', 'proxy_protocol', 'allow_cidr', 'deny_cidr'] as const;
const TCP_KEYS = ['tcp', ...STREAM_KEYS] as const;
const TLS_KEYS = ['tls', 'subdomain', ...STREAM_KEYS.filter((key) => key !== 'remote_port')] as const;
const OIDC_KEYS = ['issuer', 'client_id', 'client_secret', 'allow_email', 'allow_domain'] as const;
const ROUTE_KEYS = ['target', 'strip_prefix'] as const;
/**
 * Settings a file may not give, and why. --resolve rules redirect the connection that carries the token:
 * a file in a directory someone else wrote must not choose that address (with a plain http:// edge the
 * token would go there in clear text), as it may not send the saved token to another edge.
 */
const NOT_FILE_KEYS: Readonly<Record<string, string>> = {
  resolve: '--resolve rules are not read from a file (a file must not choose the address your token is sent to); pass --resolve HOST:PORT:ADDRESS or set BURROW_RESOLVE',
};
/** Every key the file may hold, by where: docs/config.md lists the same (test/cli/config-docs.test.ts). */
export const KNOWN_KEYS = { top: TOP_KEYS, http: HTTP_KEYS, kinds: KINDS, route: ROUTE_KEYS, oidc: OIDC_KEYS, tcp: TCP_KEYS, tls: TLS_KEYS } as const;
const TUNNEL_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Aliases resolved per file: a few share values; thousands would be an alias bomb. */
const MAX_ALIASES = 100;

/** Parses and checks a file's text; `path` names it in problems and anchors a relative `ca`. */
export function parseConfigText(text: string, path: string): ParsedConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: false, prettyErrors: false, strict: true });
  const reader = new Reader(path, doc, lines);
  for (const error of doc.errors) reader.problemAt(error.pos[0], '', yamlMessage(error.code, error.message));
  if (reader.problems.length > 0) return { config: null, problems: reader.problems, warnings: reader.warnings };
  const config = readTop(reader, doc.contents, path);
  const byPlace = (a: ConfigProblem, b: ConfigProblem): number => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0);
  return { config: reader.problems.length === 0 ? config : null, problems: reader.problems.sort(byPlace), warnings: reader.warnings.sort(byPlace) };
}

function yamlMessage(code: string, message: string): string {
  if (code === 'TAB_AS_INDENT') return 'a tab in the indentation: YAML indents with spaces only';
  if (code === 'MULTIPLE_DOCS') return 'several YAML documents ("---"): burrow.yml is one';
  return `not valid YAML: ${message}`;
}

interface Entry {
  name: string;
  keyNode: unknown;
  value: unknown;
  /** The key path of the value. */
  key: string;
}

/** Walks the document, recording problems where they are; each reader returns undefined on a problem. */
class Reader {
  readonly problems: ConfigProblem[] = [];
  readonly warnings: ConfigProblem[] = [];
  private aliases = 0;

  constructor(
    private readonly file: string,
    private readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
  ) {}

  position(node: unknown): { line: number; column: number } {
    const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
    const { line, col } = this.lines.linePos(range?.[0] ?? 0);
    return { line, column: col };
  }

  problem(node: unknown, key: string, message: string): undefined {
    this.problems.push({ file: this.file, ...this.position(node), key, message });
    return undefined;
  }

  problemAt(offset: number, key: string, message: string): void {
    const { line, col } = this.lines.linePos(offset);
    this.problems.push({ file: this.file, line, column: col, key, message });
  }

  problemAtLine(line: number, column: number, key: string, message: string): void {
    this.problems.push({ file: this.file, line, column, key, message });
  }

  warn(node: unknown, key: string, message: string): void {
    this.warnings.push({ file: this.file, ...this.position(node), key, message });
  }

  /** The node an alias stands for. */
  deref(node: unknown, key: string): unknown {
    if (!isAlias(node)) return node;
    if (++this.aliases > MAX_ALIASES) return this.problem(node, key, `more than ${MAX_ALIASES} aliases in one file`);
    const target = node.resolve(this.doc);
    if (target === undefined) return this.problem(node, key, `the alias *${node.source} names no anchor set before it`);
    return target;
  }

  /** A scalar's value; undefined (with the problem) for a mapping or a list. */
  private scalar(node: unknown, key: string, expected: string): unknown {
    if (isScalar(node)) return node.value;
    if (node === null || node === undefined) return null;
    return this.problem(node, key, `must be ${expected}, not a ${isMap(node) ? 'mapping' : isSeq(node) ? 'list' : 'value of another kind'}`);
  }

  /** The entries of a mapping, each key once; `what` names a repeated key ("tunnel name", "key"). */
  mapping(node: unknown, key: string, expected: string, what = 'key'): Entry[] | undefined {
    if (!isMap(node)) {
      if (isScalar(node) && node.value === null) return [];
      return this.problem(node, key, `must be ${expected}`);
    }
    const seen = new Map<string, unknown>();
    const entries: Entry[] = [];
    for (const pair of node.items) {
      const keyNode = this.deref(pair.key, key);
      if (keyNode === undefined) continue;
      if (!isScalar(keyNode) || keyNode.value === null || typeof keyNode.value === 'object') {
        this.problem(keyNode ?? node, key, 'a key must be a plain name');
        continue;
      }
      const name = String(keyNode.value);
      const entryKey = childKey(key, name);
      const first = seen.get(name);
      if (first !== undefined) {
        this.problem(keyNode, entryKey, `the ${what} "${name}" is given twice (first on line ${this.position(first).line})`);
        continue;
      }
      seen.set(name, keyNode);
      const value = this.deref(pair.value, entryKey);
      if (value === undefined && pair.value !== null && pair.value !== undefined) continue;
      entries.push({ name, keyNode, value: value ?? null, key: entryKey });
    }
    return entries;
  }

  /** Problems for keys not in `known`, with the likely one when a key is misspelt (or why one is not here, `refused`). */
  onlyKnown(entries: Entry[], known: readonly string[], where: string, refused: Readonly<Record<string, string>> = {}): void {
    for (const entry of entries) {
      if (known.includes(entry.name)) continue;
      if (Object.hasOwn(refused, entry.name)) {
        this.problem(entry.keyNode, entry.key, `unknown key: ${refused[entry.name]}`);
        continue;
      }
      const guess = closest(entry.name, known);
      this.problem(entry.keyNode, entry.key, guess === null ? `unknown key (${where} takes ${known.join(', ')})` : `unknown key; did you mean "${guess}"?`);
    }
  }

  text(node: unknown, key: string, expected = 'a string'): string | undefined {
    const value = this.scalar(node, key, expected);
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || value === '') {
      const hint = typeof value === 'number' || typeof value === 'boolean' ? ` (quote it: "${String(value)}")` : '';
      return this.problem(node, key, `must be ${expected}${value === null || value === '' ? ', not empty' : `, not ${describe(value)}${hint}`}`);
    }
    if (/\$\{[^}]*\}/.test(value)) this.warn(node, key, `"${value}": \${...} is not expanded in burrow.yml; the value is used as written (docs/config.md)`);
    return value;
  }

  bool(node: unknown, key: string): boolean | undefined {
    const value = this.scalar(node, key, 'true or false');
    if (value === undefined) return undefined;
    if (typeof value !== 'boolean') return this.problem(node, key, `must be true or false, not ${describe(value)}`);
    return value;
  }

  /** One string or a list of them (a repeatable flag). */
  texts(node: unknown, key: string, what: string): string[] | undefined {
    if (!isSeq(node)) {
      const one = this.text(node, key, `${what}, or a list of them`);
      return one === undefined ? undefined : [one];
    }
    const values: string[] = [];
    let ok = true;
    node.items.forEach((item, index) => {
      const itemKey = `${key}[${index}]`;
      const resolved = this.deref(item, itemKey);
      const value = resolved === undefined && isAlias(item) ? undefined : this.text(resolved, itemKey, what);
      if (value === undefined) ok = false;
      else values.push(value);
    });
    return ok ? values : undefined;
  }

  /**
   * A list of "A<separator>B" strings (USER:PASSWORD, 'Name: value', PROVIDER:SECRET), or a mapping A → B
   * when `mapped` (basic_auth as {user: password}, header rules as {Name: value}), as the strings.
   */
  pairs(node: unknown, key: string, what: string, separator: string, mapped: boolean): string[] | undefined {
    if (mapped && isMap(node)) {
      const entries = this.mapping(node, key, `a mapping of ${what}`);
      if (entries === undefined) return undefined;
      const values: string[] = [];
      for (const entry of entries) {
        const value = this.scalar(entry.value, entry.key, 'a string');
        if (value === undefined) continue;
        if (value === null || typeof value === 'object') this.problem(entry.value ?? entry.keyNode, entry.key, 'must be a string');
        else values.push(`${entry.name}${separator}${String(value)}`);
      }
      return values.length === entries.length ? values : undefined;
    }
    const values = this.texts(node, key, what);
    if (values === undefined) return undefined;
    let ok = true;
    values.forEach((value, index) => {
      if (value.indexOf(separator.trim()) > 0) return;
      ok = false;
      this.problem(isSeq(node) ? node.items[index] : node, isSeq(node) ? `${key}[${index}]` : key, `"${value.slice(0, 24)}" is not ${what}`);
    });
    return ok ? values : undefined;
  }
}

function describe(value: unknown): string {
  if (value === null) return 'empty';
  if (typeof value === 'string') return `"${value}"`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return 'a value of another kind';
}

/** `tunnels` + `web` → `tunnels.web`; names that are not plain words are quoted: `routes["/api"]`. */
function childKey(parent: string, name: string): string {
  const part = /^[A-Za-z0-9_-]+$/.test(name) ? name : `[${JSON.stringify(name)}]`;
  if (parent === '') return part;
  return part.startsWith('[') ? `${parent}${part}` : `${parent}.${part}`;
}

/** The known key a misspelt one most likely meant (edit distance at most 2), or null. */
function closest(name: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = 3;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase().replace(/-/g, '_'), candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

function readTop(reader: Reader, contents: unknown, path: string): ConfigFile {
  const config: ConfigFile = { path, tunnels: [], secrets: [] };
  const entries = reader.mapping(contents, '', 'a mapping of settings (edge, token_env, tunnels, ...)');
  if (entries === undefined) return config;
  // `x-` keys hold nothing but anchors for aliases elsewhere (as in Compose files): known, and unread.
  reader.onlyKnown(entries.filter((entry) => !entry.name.startsWith('x-')), TOP_KEYS, 'burrow.yml', NOT_FILE_KEYS);
  const byName = new Map(entries.map((entry) => [entry.name, entry]));
  const version = byName.get('version');
  if (version !== undefined && !(isScalar(version.value) && version.value.value === 1)) reader.problem(version.value, version.key, 'must be 1 (the only format so far)');
  const edge = byName.get('edge');
  if (edge !== undefined) {
    const edges: string[] = [];
    const given = reader.texts(edge.value, edge.key, 'an edge URL');
    given?.forEach((text, index) => {
      const origin = edgeProblem(text);
      const node = isSeq(edge.value) ? edge.value.items[index] : edge.value;
      if (typeof origin === 'object') reader.problem(node, isSeq(edge.value) ? `${edge.key}[${index}]` : edge.key, origin.error);
      else if (!edges.includes(origin)) edges.push(origin);
    });
    if (given !== undefined && given.length === 0) reader.problem(edge.value, edge.key, 'must name at least one edge');
    if (edges.length > 0) config.edges = edges;
  }
  const token = byName.get('token');
  const tokenEnv = byName.get('token_env');
  if (token !== undefined) {
    const value = reader.text(token.value, token.key, 'a token');
    if (value !== undefined && parseToken(value) === null) {
      const hint = value.includes('${') ? '; to take it from the environment write token_env: NAME' : '';
      reader.problem(token.value, token.key, `is not a Burrow token (svc_pat_<8 hex>_<36 hex>)${hint}`);
    } else if (value !== undefined) {
      config.token = value;
      config.secrets.push('token');
    }
    if (tokenEnv !== undefined) reader.problem(tokenEnv.keyNode, tokenEnv.key, 'give token or token_env, not both');
  } else if (tokenEnv !== undefined) {
    const value = reader.text(tokenEnv.value, tokenEnv.key, 'the name of an environment variable');
    if (value !== undefined && !ENV_NAME.test(value)) reader.problem(tokenEnv.value, tokenEnv.key, `"${value}" is not an environment variable name (letters, digits, _)`);
    else if (value !== undefined) config.tokenEnv = value;
  }
  const ca = byName.get('ca');
  if (ca !== undefined) {
    const value = reader.text(ca.value, ca.key, 'the path of a PEM CA certificate');
    if (value !== undefined) {
      const absolute = resolve(dirname(path), value);
      const problem = caProblem(absolute);
      if (problem !== null) reader.problem(ca.value, ca.key, problem);
      else config.ca = absolute;
    }
  }
  const inspect = byName.get('inspect');
  if (inspect !== undefined) {
    const value = isScalar(inspect.value) ? inspect.value.value : undefined;
    if (value === false || value === 'off') config.inspect = null;
    else if ((typeof value === 'number' && Number.isInteger(value)) || (typeof value === 'string' && value !== '')) {
      const address = parseInspectAddress(String(value));
      if (typeof address === 'string') reader.problem(inspect.value, inspect.key, address);
      else config.inspect = address;
    } else reader.problem(inspect.value, inspect.key, 'must be PORT, HOST:PORT (a loopback address) or off');
  }
  const log = byName.get('log');
  if (log !== undefined) {
    const value = reader.text(log.value, log.key, 'text or json');
    if (value !== undefined && value !== 'text' && value !== 'json') reader.problem(log.value, log.key, `must be text or json, not "${value}"`);
    else if (value !== undefined) config.log = value;
  }
  const edges = byName.get('edges');
  if (edges !== undefined) {
    const value = isScalar(edges.value) ? edges.value.value : undefined;
    if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_EDGES) config.edgesPerTunnel = value;
    else reader.problem(edges.value, edges.key, `must be a whole number from 1 to ${MAX_EDGES}: how many edges of a cluster each tunnel is attached to`);
  }
  const tunnels = byName.get('tunnels');
  if (tunnels !== undefined) config.tunnels = readTunnels(reader, tunnels, config.secrets);
  return config;
}

function caProblem(path: string): string | null {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    return `cannot read ${path}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}`;
  }
  try {
    new X509Certificate(pem);
  } catch {
    return `${path} is not a PEM certificate`;
  }
  return null;
}

function readTunnels(reader: Reader, tunnels: Entry, secrets: string[]): TunnelConfig[] {
  const entries = reader.mapping(tunnels.value, tunnels.key, 'a mapping of tunnel names to tunnels', 'tunnel name');
  if (entries === undefined) return [];
  const result: TunnelConfig[] = [];
  const subdomains = new Map<string, { tunnel: string; node: unknown }>();
  for (const entry of entries) {
    if (!TUNNEL_NAME.test(entry.name)) {
      reader.problem(entry.keyNode, entry.key, 'a tunnel name is 1 to 63 of A-Z, a-z, 0-9, "_" and "-", starting with a letter or digit');
      continue;
    }
    const tunnel = readTunnel(reader, entry, secrets);
    if (tunnel === undefined) continue;
    if (tunnel.subdomain !== undefined) {
      const other = subdomains.get(tunnel.subdomain);
      if (other !== undefined) {
        reader.problem(entry.keyNode, `${entry.key}.subdomain`, `"${tunnel.subdomain}" is also the subdomain of tunnel ${other.tunnel} (line ${reader.position(other.node).line}); one name serves one tunnel`);
        continue;
      }
      subdomains.set(tunnel.subdomain, { tunnel: entry.name, node: entry.keyNode });
    }
    result.push(tunnel);
  }
  return result;
}

function readTunnel(reader: Reader, tunnel: Entry, secrets: string[]): TunnelConfig | undefined {
  const entries = reader.mapping(tunnel.value, tunnel.key, 'a mapping with the tunnel\'s kind (http: PORT) and its settings');
  if (entries === undefined) return undefined;
  const kinds = entries.filter((entry) => (KINDS as readonly string[]).includes(entry.name));
  if (kinds.length !== 1) {
    if (kinds.length === 0) reader.onlyKnown(entries, [...HTTP_KEYS, 'tcp', 'tls'], 'a tunnel');
    const node = kinds[1]?.keyNode ?? tunnel.keyNode;
    return reader.problem(node, tunnel.key, kinds.length === 0 ? 'needs its kind: http: PORT (or tcp: / tls:)' : `has both ${kinds[0]!.name} and ${kinds[1]!.name}; a tunnel is one kind`);
  }
  const kind = kinds[0]!;
  const byName = new Map(entries.map((entry) => [entry.name, entry]));
  const problemsBefore = reader.problems.length;
  let subdomain: string | undefined;
  const subdomainEntry = byName.get('subdomain');
  if (subdomainEntry !== undefined && kind.name !== 'tcp') {
    const value = reader.text(subdomainEntry.value, subdomainEntry.key, 'a subdomain name');
    const problem = value === undefined ? null : subdomainProblem(value.toLowerCase());
    if (problem !== null) reader.problem(subdomainEntry.value, subdomainEntry.key, problem);
    else if (value !== undefined) subdomain = value.toLowerCase();
  }
  if (kind.name !== 'http') {
    const streamKind = kind.name as 'tcp' | 'tls';
    reader.onlyKnown(entries, streamKind === 'tls' ? TLS_KEYS : TCP_KEYS, `a ${streamKind} tunnel`, httpOnlyKeys(streamKind));
    const address = streamAddress(reader, kind);
    const remoteEntry = byName.get('remote_port');
    const remotePort = remoteEntry === undefined || streamKind !== 'tcp' ? undefined : portValue(reader, remoteEntry);
    const proxyEntry = byName.get('proxy_protocol');
    const proxyProtocol = proxyEntry === undefined ? false : reader.bool(proxyEntry.value, proxyEntry.key);
    const policy = policyFlags(reader, byName, secrets);
    if (address === undefined || reader.problems.length > problemsBefore) return undefined;
    return {
      name: tunnel.name,
      kind: streamKind,
      ...address,
      proxyProtocol: proxyProtocol === true,
      ...(remotePort === undefined ? {} : { remotePort }),
      ...(subdomain === undefined ? {} : { subdomain }),
      ...(policy === undefined ? {} : { policy }),
    };
  }
  reader.onlyKnown(entries, HTTP_KEYS, 'an http tunnel');
  const target = httpTarget(reader, kind.value, kind.key);
  const routes = readRoutes(reader, byName.get('routes'));
  let hostHeader: HostHeader = 'keep';
  const hostEntry = byName.get('host_header');
  if (hostEntry !== undefined) {
    const value = reader.text(hostEntry.value, hostEntry.key, 'rewrite or a Host value');
    const parsed = value === undefined ? undefined : parseHostHeader(value);
    if (typeof parsed === 'object' && 'error' in parsed) reader.problem(hostEntry.value, hostEntry.key, parsed.error);
    else if (parsed !== undefined) hostHeader = parsed;
  }
  const insecureEntry = byName.get('local_insecure');
  const localInsecure = insecureEntry === undefined ? false : reader.bool(insecureEntry.value, insecureEntry.key);
  const policy = policyFlags(reader, byName, secrets);
  if (target === undefined || reader.problems.length > problemsBefore) return undefined;
  return {
    name: tunnel.name,
    kind: 'http',
    target,
    routes: routes ?? [],
    hostHeader,
    localInsecure: localInsecure === true,
    ...(subdomain === undefined ? {} : { subdomain }),
    ...(policy === undefined ? {} : { policy }),
  };
}

/** `http: 3000`, `http: "192.168.1.5:8080"`, `http: https://localhost:8443`. */
function httpTarget(reader: Reader, node: unknown, key: string): LocalTarget | undefined {
  const value = isScalar(node) ? node.value : undefined;
  if (typeof value !== 'number' && (typeof value !== 'string' || value === '')) {
    return reader.problem(node, key, 'must be a port (3000) or [scheme://]host:port');
  }
  if (typeof value === 'number' && portProblem(value) !== null) return reader.problem(node, key, portProblem(value)!);
  const target = parseTarget(String(value));
  if (typeof target === 'string') return reader.problem(node, key, target);
  return target;
}

function portProblem(value: number): string | null {
  return Number.isInteger(value) && value >= 1 && value <= 65535 ? null : `a port is a whole number from 1 to 65535, not ${value}`;
}

/** The keys of an http tunnel that a tcp or tls tunnel refuses, each saying why. */
function httpOnlyKeys(kind: 'tcp' | 'tls'): Record<string, string> {
  const refused: Record<string, string> = {};
  for (const key of HTTP_KEYS) {
    if (key === 'http' || key === 'allow_cidr' || key === 'deny_cidr' || (key === 'subdomain' && kind === 'tls')) continue;
    refused[key] = `${key} is for http tunnels; a ${kind} tunnel takes ${(kind === 'tls' ? TLS_KEYS : TCP_KEYS).join(', ')}`;
  }
  if (kind === 'tls') refused.remote_port = 'a tls tunnel is reached on the edge\'s HTTPS port by its subdomain; remote_port is for tcp tunnels';
  else refused.subdomain = 'a tcp tunnel has a public port, not a subdomain: remote_port: PORT';
  return refused;
}

/** `remote_port: 20042`. */
function portValue(reader: Reader, entry: Entry): number | undefined {
  const value = isScalar(entry.value) ? entry.value.value : undefined;
  if (typeof value !== 'number') return reader.problem(entry.value, entry.key, 'must be a port (20042)');
  const problem = portProblem(value);
  return problem === null ? value : reader.problem(entry.value, entry.key, problem);
}

/** `tcp: 5432`, `tcp: db.internal:5432`, `tls: 8443`. */
function streamAddress(reader: Reader, kind: Entry): { host: string; port: number } | undefined {
  const value = isScalar(kind.value) ? kind.value.value : undefined;
  if ((typeof value !== 'number' && (typeof value !== 'string' || value === '')) || (typeof value === 'string' && value.includes('://'))) {
    return reader.problem(kind.value, kind.key, 'must be a port (5432) or host:port');
  }
  if (typeof value === 'number' && portProblem(value) !== null) return reader.problem(kind.value, kind.key, portProblem(value)!);
  const target = parseTarget(String(value));
  if (typeof target === 'string') return reader.problem(kind.value, kind.key, target);
  return { host: target.host, port: target.port };
}

/** `routes: { /api: 4000, /static: { target: 5000, strip_prefix: true } }`. */
function readRoutes(reader: Reader, routes: Entry | undefined): RouteConfig[] | undefined {
  if (routes === undefined) return [];
  const entries = reader.mapping(routes.value, routes.key, 'a mapping of path prefixes to targets (/api: 4000)', 'route prefix');
  if (entries === undefined) return undefined;
  const result: RouteConfig[] = [];
  for (const entry of entries) {
    let targetNode = entry.value;
    let targetKey = entry.key;
    let stripPrefix = false;
    if (isMap(entry.value)) {
      const fields = reader.mapping(entry.value, entry.key, 'a target or { target, strip_prefix }');
      if (fields === undefined) continue;
      reader.onlyKnown(fields, ROUTE_KEYS, 'a route');
      const target = fields.find((field) => field.name === 'target');
      if (target === undefined) {
        reader.problem(entry.keyNode, entry.key, 'needs target: PORT (or [scheme://]host:port)');
        continue;
      }
      targetNode = target.value;
      targetKey = target.key;
      const strip = fields.find((field) => field.name === 'strip_prefix');
      if (strip !== undefined) stripPrefix = reader.bool(strip.value, strip.key) === true;
    }
    const target = httpTarget(reader, targetNode, targetKey);
    if (target === undefined) continue;
    const route = parseRoute(`${entry.name}=${target.origin}`);
    if (typeof route === 'string') {
      reader.problem(entry.keyNode, entry.key, route);
      continue;
    }
    if (result.some((other) => other.prefix === route.prefix)) {
      reader.problem(entry.keyNode, entry.key, `the route prefix "${route.prefix}" is given twice`);
      continue;
    }
    result.push({ prefix: route.prefix, port: target.port, target, stripPrefix });
  }
  return result;
}

/**
 * The YAML → flags mapping of the policy keys (issue 26): each key becomes the `burrow http` flag of the
 * same name in kebab case, with the flag's value syntax, so the policy module checks a file's policy and
 * a command line's alike. YAML forms are accepted where they read better: basic_auth as
 * `{user: password}`, header rules as `{Name: value}`, any repeatable key as one value or a list.
 */
function policyFlags(reader: Reader, byName: Map<string, Entry>, secrets: string[]): { flags: PolicyFlags; source: PolicySource } | undefined {
  const flags: PolicyFlags = {};
  const source: PolicySource = {};
  const take = <F extends keyof PolicyFlags>(name: (typeof POLICY_KEYS)[number], flag: F, read: (entry: Entry) => PolicyFlags[F] | undefined, secret = false): void => {
    const entry = byName.get(name);
    const value = entry === undefined ? undefined : read(entry);
    if (entry === undefined || value === undefined) return;
    flags[flag] = value;
    source[flag] = { ...reader.position(entry.value ?? entry.keyNode), key: entry.key };
    if (secret) secrets.push(entry.key);
  };
  const texts = (what: string) => (entry: Entry) => reader.texts(entry.value, entry.key, what);
  const headers = (entry: Entry): string[] | undefined => reader.pairs(entry.value, entry.key, "'Name: value'", ': ', true);
  take('basic_auth', 'basic-auth', (entry) => reader.pairs(entry.value, entry.key, 'USER:PASSWORD', ':', true), true);
  take('basic_auth_forward', 'basic-auth-forward', (entry) => reader.bool(entry.value, entry.key));
  take('allow_cidr', 'allow-cidr', texts('a CIDR block (10.0.0.0/8)'));
  take('deny_cidr', 'deny-cidr', texts('a CIDR block (10.0.0.0/8)'));
  take('oidc', 'oidc', (entry) => oidcFlags(reader, entry, flags, secrets));
  take('verify_webhook', 'verify-webhook', (entry) => reader.pairs(entry.value, entry.key, 'PROVIDER:SECRET (github:..., stripe:..., hmac-sha256:HEADER:SECRET)', ':', false), true);
  take('request_header_add', 'request-header-add', headers);
  take('request_header_remove', 'request-header-remove', texts('a header name'));
  take('response_header_add', 'response-header-add', headers);
  take('response_header_remove', 'response-header-remove', texts('a header name'));
  take('rate_limit', 'rate-limit', (entry) => reader.text(entry.value, entry.key, 'N/PERIOD (100/m, 10/1s, 1000/hour)'));
  if (Object.keys(source).length === 0) return undefined;
  try {
    // The checks burrow http runs on its flags (and the size the connect header may take), so a file's
    // policy mistake is a FILE:LINE:COL problem here, never a refusal by the edge later.
    encodePolicyHeader(policySpecFromFlags(flags)!);
  } catch (error) {
    const problem = policyProblem((error as Error).message, source);
    reader.problemAtLine(problem.line, problem.column, problem.key, problem.message);
    return undefined;
  }
  return { flags, source };
}

/**
 * A refusal of the policy module's flag checks (`policySpecFromFlags`: "--basic-auth #2 user ...",
 * "--rate-limit ...") placed at the key the flag came from, so a policy mistake in the file names its
 * line and key like any other (`tunnels.api.basic_auth[1]: user ...`).
 */
export function policyProblem(message: string, source: PolicySource): { line: number; column: number; key: string; message: string } {
  const match = /^--([a-z-]+)(?: #(\d+))?[ :]*([\s\S]*)$/.exec(message);
  const flag = match?.[1] as keyof PolicyFlags | undefined;
  // The --oidc-* flags all come from the one `oidc` mapping.
  const at = (flag === undefined ? undefined : (source[flag] ?? (flag.startsWith('oidc') ? source.oidc : undefined))) ?? Object.values(source)[0]!;
  const entry = match?.[2] === undefined ? '' : `[${Number(match[2]) - 1}]`;
  const rest = match?.[3] || message;
  // "--oidc allow_domain[0]: ..." names the field inside the mapping.
  const field = flag === 'oidc' ? /^([a-z_]+)(\[\d+\])?(?: |: )([\s\S]+)$/.exec(rest) : null;
  if (field !== null && (OIDC_KEYS as readonly string[]).includes(field[1]!)) return { line: at.line, column: at.column, key: `${at.key}.${field[1]}${field[2] ?? ''}`, message: field[3]! };
  return { line: at.line, column: at.column, key: `${at.key}${entry}`, message: rest };
}

/** `oidc: {issuer, client_id, client_secret, allow_email, allow_domain}`: sets the other --oidc-* flags, returns the issuer. */
function oidcFlags(reader: Reader, oidc: Entry, flags: PolicyFlags, secrets: string[]): string | undefined {
  const fields = reader.mapping(oidc.value, oidc.key, 'a mapping: issuer, client_id, client_secret, allow_email, allow_domain');
  if (fields === undefined) return undefined;
  reader.onlyKnown(fields, OIDC_KEYS, 'oidc');
  const field = new Map(fields.map((entry) => [entry.name, entry]));
  const missing = ['issuer', 'client_id', 'client_secret'].filter((name) => !field.has(name));
  if (missing.length > 0) return reader.problem(oidc.keyNode, oidc.key, `needs ${missing.join(', ')}`);
  const text = (name: string, what: string): string | undefined => reader.text(field.get(name)!.value, field.get(name)!.key, what);
  const list = (name: string, what: string): string[] | undefined => (field.has(name) ? reader.texts(field.get(name)!.value, field.get(name)!.key, what) : undefined);
  const issuer = text('issuer', 'the issuer URL');
  const clientId = text('client_id', 'the client id');
  const clientSecret = text('client_secret', 'the client secret');
  const emails = list('allow_email', 'an e-mail address');
  const domains = list('allow_domain', 'a domain');
  if (clientId !== undefined) flags['oidc-client-id'] = clientId;
  if (clientSecret !== undefined) {
    flags['oidc-client-secret'] = clientSecret;
    secrets.push(`${oidc.key}.client_secret`);
  }
  if (emails !== undefined) flags['oidc-allow-email'] = emails;
  if (domains !== undefined) flags['oidc-allow-domain'] = domains;
  return issuer;
}

// ---- the example `burrow config edit` starts from ----------------------------------------------------------

/** A commented example: valid as it stands (one tunnel), every other key shown commented out. */
export const EXAMPLE_CONFIG = `# burrow.yml: named tunnels for "burrow start NAME..." and "burrow start --all".
# Every key is described in docs/config.md; an unknown key is an error, and
# "burrow config check" names its line. Values are used as written (\${...} is not expanded).

# The edge; a list is tried in order (failover). Default: BURROW_EDGE, then "burrow login"'s.
# edge: https://tunnels.example.com

# The token, read from this environment variable. (token: svc_pat_... works too, but then
# this file is a secret: keep it chmod 600 and out of version control.)
# token_env: BURROW_TOKEN

# ca: ./private-ca.pem       # trust this CA for an https:// edge (relative to this file)
# inspect: 4040              # the inspector: PORT or HOST:PORT (loopback), or off
# log: text                  # one line per request: text or json
# edges: 2                   # in a cluster, each tunnel is attached to this many edges (1 to 8)

tunnels:
  web:
    http: 3000               # a port, host:port, or http(s)://host:port
    # subdomain: my-app      # default: a name the edge makes up
    # host_header: rewrite   # the Host the local server sees: rewrite (its own) or a value
    # local_insecure: true   # accept a self-signed certificate from an https:// target
    # routes:
    #   /api: 4000           # paths under /api go to port 4000
    #   /static:
    #     target: 5000
    #     strip_prefix: true # port 5000 sees /static/app.js as /app.js

  # api:
  #   http: 8000
  #   basic_auth:
  #     alice: correct-horse  # a secret: see the token's note above
  #   allow_cidr: [203.0.113.0/24]
  #   request_header_add:
  #     X-Environment: dev
  #   rate_limit: 100/m

  # ssh:
  #   tcp: 22                  # a TCP tunnel (the edge needs --tcp-ports); tls: 8443 for TLS passthrough
  #   remote_port: 20042       # this public port (keep it: burrow reserve --tcp 20042); default a free one
  #   proxy_protocol: true     # PROXY v2 before each connection, for a local server that reads it
  #   allow_cidr: [203.0.113.0/24]
  #   deny_cidr: 203.0.113.66     # checked on each connection, as on http tunnels
`;
