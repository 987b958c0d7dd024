/**
 * `burrow queue`: the webhooks held for a reserved subdomain in `queue` mode while its tunnel is
 * offline (docs/offline.md), through /api/v1/queue.
 */
import { CONNECTION_HELP, CONNECTION_OPTIONS, edgeApiClient } from '../api-client.js';
import { noExtraPositionals, parse, requirePositional, UsageError } from '../args.js';
import { printJson, printTable, shortTime } from '../output.js';

const QUEUE_HELP = `
Usage: burrow queue [list] NAME
       burrow queue deliver ID [NAME]
       burrow queue discard ID [NAME]
       burrow queue pause NAME
       burrow queue resume NAME

The webhooks held for the reserved subdomain NAME while its tunnel was offline (burrow reserve NAME
--offline queue). They are delivered to the local server in arrival order when the tunnel connects;
one the local server refused (non-2xx) after its retries is parked as failed.

  list      the held events: id, state (queued, delivering, delivered, failed), attempts, size
  deliver   delivers a failed (or delivered) event again, before the others still queued
  discard   drops an event
  pause     holds delivery (and queues live requests too) until resume
  resume    delivers what is held, then lets live requests through again

Options:
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

/** Each action's own usage line (the help's lines): a usage error names the form of the action given. */
const ACTION_USAGE: Record<string, string> = Object.fromEntries(
  [...QUEUE_HELP.matchAll(/^(?:Usage:)?\s+burrow queue (\[list\]|\w+) (.*)$/gm)].map(([line, action]) => [action === '[list]' ? 'list' : action!, line.replace(/^(Usage:)?\s+/, 'Usage: ')]),
);

export async function queueCommand(args: string[]): Promise<number> {
  const parsed = parse(args, CONNECTION_OPTIONS, QUEUE_HELP);
  if (parsed === null) return 0;
  const first = requirePositional(parsed, 0, 'NAME', QUEUE_HELP);
  const action = Object.hasOwn(ACTION_USAGE, first) ? first : 'list';
  const usage = ACTION_USAGE[action]!;
  const at = { positionals: action === first ? parsed.positionals.slice(1) : parsed.positionals };
  // The arguments first: a missing ID is a usage error before any token or edge is looked for.
  const target = requirePositional(at, 0, action === 'deliver' || action === 'discard' ? 'ID' : 'NAME', usage);
  noExtraPositionals(at, action === 'deliver' || action === 'discard' ? 2 : 1, usage);
  const api = edgeApiClient(parsed.values);
  const json = parsed.values.json === true;
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
