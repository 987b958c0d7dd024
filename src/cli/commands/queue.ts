/**
 * `burrow queue`: the webhooks held for a reserved subdomain in `queue` mode while its tunnel is
 * offline (docs/offline.md), through /api/v1/queue.
 */
import { CONNECTION_HELP, CONNECTION_OPTIONS, edgeApiClient, type ApiClient } from '../api-client.js';
import { noExtraPositionals, parse, requirePositional, usageHint, UsageError } from '../args.js';
import { printJson, printTable, shortTime } from '../output.js';

const QUEUE_HELP = `
Usage: burrow queue [list] NAME
       burrow queue deliver ID [NAME]
       burrow queue discard ID [NAME]
       burrow queue discard NAME (--all | --state queued|failed|delivered)
       burrow queue pause NAME
       burrow queue resume NAME

The webhooks held for the reserved subdomain NAME while its tunnel was offline (burrow reserve NAME
--offline queue). They are delivered to the local server in arrival order when the tunnel connects.
An answer a retry would not change (3xx, or 4xx other than 408 and 429) parks the event as failed at
once; a 5xx, 408, 429 or timeout sets it aside to be retried with backoff while the rest go on, and
parks it as failed after 5 attempts.

  list      the held events: id, state (queued, delivering, delivered, failed), attempts, size
  deliver   delivers a failed (or delivered) event again, before the others still queued
  discard   drops an event; with --all every event of NAME, with --state those in that state
            (queued includes events waiting for a retry)
  pause     holds delivery (and queues live requests too) until resume
  resume    delivers what is held, then lets live requests through again

Options:
  --all            discard: every event of NAME
  --state STATE    discard: the events of NAME in this state: queued, failed or delivered
${CONNECTION_HELP}
`;

interface EventJson {
  id: string;
  state: string;
  attempts: number;
  received_at: string;
  method: string;
  path: string;
  size: number;
  last_status: number | null;
}

interface QueueJson {
  subdomain: string;
  offline: string;
  paused: boolean;
  events: number;
  queue: EventJson[];
}

/**
 * Each action's own usage line (the help's lines): a usage error names the form of the action given. An
 * action with two forms (discard ID, discard NAME --all) keeps the first, the one without options.
 */
const ACTION_USAGE: Record<string, string> = {};
for (const [line, action] of QUEUE_HELP.matchAll(/^(?:Usage:)?\s+burrow queue (\[list\]|\w+) (.*)$/gm)) {
  const name = action === '[list]' ? 'list' : action!;
  ACTION_USAGE[name] ??= line.replace(/^(Usage:)?\s+/, 'Usage: ');
}
const QUEUE_OPTIONS = { ...CONNECTION_OPTIONS, all: { type: 'boolean' }, state: { type: 'string' } } as const;
const DISCARD_STATES = ['queued', 'failed', 'delivered'];

export async function queueCommand(args: string[]): Promise<number> {
  const parsed = parse(args, QUEUE_OPTIONS, QUEUE_HELP);
  if (parsed === null) return 0;
  const first = requirePositional(parsed, 0, 'NAME', QUEUE_HELP);
  const action = Object.hasOwn(ACTION_USAGE, first) ? first : 'list';
  const usage = ACTION_USAGE[action]!;
  const at = { positionals: action === first ? parsed.positionals.slice(1) : parsed.positionals };
  const json = parsed.values.json === true;
  const bulk = parsed.values.all === true || parsed.values.state !== undefined;
  if (bulk && action !== 'discard') throw new UsageError(`--all and --state go with discard only; ${usageHint(QUEUE_HELP)}`);
  if (bulk) {
    const { name, which } = bulkDiscardOf(at, parsed.values.all === true, parsed.values.state);
    return discardMany(edgeApiClient(parsed.values), name, which, json);
  }
  // The arguments first: a missing ID is a usage error before any token or edge is looked for.
  const target = requirePositional(at, 0, action === 'deliver' || action === 'discard' ? 'ID' : 'NAME', usage);
  noExtraPositionals(at, action === 'deliver' || action === 'discard' ? 2 : 1, usage);
  const api = edgeApiClient(parsed.values);
  switch (action) {
    case 'list': {
      const name = target;
      const result = await api.call<QueueJson>('GET', `/api/v1/queue?subdomain=${encodeURIComponent(name)}`);
      if (json) {
        printJson(result);
        return 0;
      }
      if (result.paused) process.stdout.write(`${result.subdomain}: delivery paused (burrow queue resume ${result.subdomain})\n`);
      printTable(
        ['EVENT', 'STATE', 'ATTEMPTS', 'RECEIVED', 'METHOD', 'PATH', 'SIZE', 'LAST'],
        result.queue.map((e) => [e.id, e.state, e.attempts, shortTime(e.received_at), e.method, e.path, e.size, e.last_status ?? '']),
        `no held events on ${result.subdomain} (offline mode: ${result.offline})`,
      );
      return 0;
    }
    case 'deliver':
    case 'discard': {
      const id = target;
      if (action === 'deliver') {
        const event = await api.call<EventJson>('POST', `/api/v1/queue/${encodeURIComponent(id)}/deliver`);
        if (json) printJson(event);
        else process.stdout.write(`${event.id} queued for delivery (attempts so far: ${event.attempts})\n`);
      } else {
        await api.call('DELETE', `/api/v1/queue/${encodeURIComponent(id)}`);
        if (json) printJson({ discarded: id });
        else process.stdout.write(`discarded ${id}\n`);
      }
      return 0;
    }
    case 'pause':
    case 'resume': {
      const name = target;
      const result = await api.call<QueueJson>('POST', `/api/v1/queue/${action}?subdomain=${encodeURIComponent(name)}`);
      if (json) printJson(result);
      else process.stdout.write(`${result.subdomain}: delivery ${result.paused ? 'paused' : 'resumed'} (${result.events} held)\n`);
      return 0;
    }
    default:
      throw new UsageError(`unknown queue action "${action}"`);
  }
}

/** The name and state of `burrow queue discard NAME --all | --state STATE`, checked before any call. */
function bulkDiscardOf(at: { positionals: string[] }, all: boolean, state: string | undefined): { name: string; which: string } {
  if (all && state !== undefined) throw new UsageError(`--all and --state do not go together; ${usageHint(QUEUE_HELP)}`);
  if (state !== undefined && !DISCARD_STATES.includes(state)) throw new UsageError(`--state must be one of ${DISCARD_STATES.join(', ')}; ${usageHint(QUEUE_HELP)}`);
  const name = requirePositional(at, 0, 'NAME', QUEUE_HELP);
  noExtraPositionals(at, 1, QUEUE_HELP);
  return { name, which: state ?? 'all' };
}

/** One API call, one transaction on the edge. */
async function discardMany(api: ApiClient, name: string, which: string, json: boolean): Promise<number> {
  const result = await api.call<QueueJson & { discarded: number }>('DELETE', `/api/v1/queue?subdomain=${encodeURIComponent(name)}&state=${which}`);
  if (json) printJson(result);
  else process.stdout.write(`discarded ${result.discarded} event${result.discarded === 1 ? '' : 's'} of ${result.subdomain}${which === 'all' ? '' : ` (${which})`}; ${result.events} held\n`);
  return 0;
}
