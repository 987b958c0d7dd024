/**
 * `burrow edge --plans FILE` (docs/deploy.md, "Plans and quotas"): the limits of the FREE and PRO plans on
 * this edge, where an operator wants other numbers than src/store/plans.ts's defaults (a larger capture
 * quota, more tunnels). The file names the plans and the limits it changes; every other limit keeps its
 * default. YAML 1.2 (so JSON too), read with the `yaml` package keeping positions: each problem names the
 * file, line, column and key, all of them at once, and an unknown plan or key is a problem, never ignored.
 *
 *   PRO:
 *     capture_bytes: 16GiB
 *     active_tunnels: 100
 *   FREE:
 *     captured_requests: 500
 */
import { readFileSync } from 'node:fs';
import { isMap, isScalar, LineCounter, parseDocument, type Pair } from 'yaml';
import { parseByteSize } from '../store/free-space.js';
import { PLAN_NAMES, isPlanName, type PlanLimits, type PlanName } from '../store/plans.js';
import { formatProblem, type ConfigProblem } from './config-file.js';
import { CliError } from './args.js';

export type PlanOverrides = Partial<Record<PlanName, Partial<PlanLimits>>>;

type Kind = 'count' | 'bytes' | 'ms';

/** The file's keys, the PlanLimits field each sets, and how its value is written. */
const LIMITS: Readonly<Record<string, { field: keyof PlanLimits; kind: Kind }>> = {
  active_tokens: { field: 'activeTokens', kind: 'count' },
  active_tunnels: { field: 'activeTunnels', kind: 'count' },
  captured_requests: { field: 'capturedRequests', kind: 'count' },
  retention_ms: { field: 'retentionMs', kind: 'ms' },
  capture_bytes: { field: 'captureBytes', kind: 'bytes' },
  reserved_subdomains: { field: 'reservedSubdomains', kind: 'count' },
  queued_events: { field: 'queuedEvents', kind: 'count' },
  queued_bytes: { field: 'queuedBytes', kind: 'bytes' },
  queue_max_age_ms: { field: 'queueMaxAgeMs', kind: 'ms' },
  account_queued_events: { field: 'accountQueuedEvents', kind: 'count' },
  account_queued_bytes: { field: 'accountQueuedBytes', kind: 'bytes' },
};
export const PLAN_LIMIT_KEYS: readonly string[] = Object.keys(LIMITS);

/**
 * Ring slots are allocated per capture and a ring's slot count is fixed when it is made, so the count has
 * a ceiling; the others stop where a number stops meaning anything.
 */
const MAX: Readonly<Record<Kind, number>> = { count: 1_000_000, bytes: 2 ** 50, ms: 10 * 365 * 24 * 3600 * 1000 };
const CAPTURED_REQUESTS_MAX = 100_000;

/** Reads and checks `path`; throws a CliError naming every problem, one a line, or saying why it cannot be read. */
export function readPlansFile(path: string): PlanOverrides {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError(`--plans: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const { plans, problems } = parsePlansText(text, path);
  // Every problem on a line of its own: there is no `config check` for this file to list the rest.
  if (problems.length > 0) throw new CliError(problems.map(formatProblem).join('\n'), 1, 'INVALID_REQUEST');
  return plans;
}

export function parsePlansText(text: string, path: string): { plans: PlanOverrides; problems: ConfigProblem[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false, strict: true });
  const problems: ConfigProblem[] = [];
  const at = (node: unknown, key: string, message: string): void => {
    const offset = (node as { range?: [number, number, number] } | null)?.range?.[0] ?? 0;
    const { line, col } = lines.linePos(offset);
    problems.push({ file: path, line, column: col, key, message });
  };
  for (const error of doc.errors) at({ range: error.pos }, '', `not valid YAML: ${error.message}`);
  if (problems.length > 0) return { plans: {}, problems };
  const plans: PlanOverrides = {};
  if (!isMap(doc.contents)) {
    at(doc.contents, '', `a map of plans (${PLAN_NAMES.join(', ')}) to the limits they change`);
    return { plans, problems };
  }
  for (const planPair of doc.contents.items as Pair[]) {
    const name = isScalar(planPair.key) ? String(planPair.key.value) : '';
    if (!isPlanName(name)) {
      at(planPair.key, name, `not a plan: the plans are ${PLAN_NAMES.join(' and ')}`);
      continue;
    }
    if (!isMap(planPair.value)) {
      at(planPair.value ?? planPair.key, name, `a map of limits (${PLAN_LIMIT_KEYS.join(', ')})`);
      continue;
    }
    const limits: Partial<PlanLimits> = {};
    for (const pair of planPair.value.items as Pair[]) {
      const key = isScalar(pair.key) ? String(pair.key.value) : '';
      const keyPath = `${name}.${key}`;
      const limit = LIMITS[key];
      if (limit === undefined) {
        at(pair.key, keyPath, `not a plan limit: the limits are ${PLAN_LIMIT_KEYS.join(', ')}`);
        continue;
      }
      const raw = isScalar(pair.value) ? pair.value.value : undefined;
      const value = limitValue(raw, limit.kind);
      const max = limit.field === 'capturedRequests' ? CAPTURED_REQUESTS_MAX : MAX[limit.kind];
      if (typeof value === 'string') at(pair.value ?? pair.key, keyPath, value);
      else if (value < 1 || value > max) at(pair.value, keyPath, `must be 1 to ${max.toLocaleString('en-US')}, not ${value}`);
      else limits[limit.field] = value;
    }
    plans[name] = limits;
  }
  return { plans, problems };
}

function limitValue(raw: unknown, kind: Kind): number | string {
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) return raw;
  if (kind === 'bytes' && typeof raw === 'string') {
    const bytes = parseByteSize(raw);
    if (bytes !== null) return bytes;
  }
  const shape = kind === 'bytes' ? 'bytes: a whole number or a size such as 512MiB or 8GiB' : kind === 'ms' ? 'milliseconds: a whole number' : 'a whole number';
  return `must be ${shape}, not ${JSON.stringify(raw ?? null)}`;
}
