import { ApiClient } from '../api-client.js';
import { noExtraPositionals, parse, UsageError } from '../args.js';
import { requireToken, resolveCredentials } from '../config.js';
import { printJson } from '../output.js';

const HELP = `
Usage: burrow replay REQ_ID [--header 'Name: value' ...] [--edge URL] [--token T] [--json]

Replays a captured request through its live tunnel to the local server, without the original sender.
The replay is captured as a new request.

Options:
  --header 'N: v'   replace (or add) a request header; repeatable
  --edge URL        the edge (default: BURROW_EDGE, the config file, http://localhost:8080)
  --token T         the token (default: BURROW_TOKEN, the config file)
  --json            print the new capture as JSON
  -h, --help        show this help
`;

export async function replayCommand(args: string[]): Promise<number> {
  const parsed = parse(
    args,
    { header: { type: 'string', multiple: true }, edge: { type: 'string' }, token: { type: 'string' }, json: { type: 'boolean' } },
    HELP,
  );
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 1, HELP);
  const id = parsed.positionals[0];
  if (id === undefined) throw new UsageError('give the id of the request to replay');
  const headers: Record<string, string> = {};
  for (const header of parsed.values.header ?? []) {
    const colon = header.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header "${header}" is not "Name: value"`);
    headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
  }
  const credentials = resolveCredentials(parsed.values);
  const api = new ApiClient(credentials.edge, requireToken(credentials));
  const body = Object.keys(headers).length > 0 ? { headers } : {};
  const replayed = await api.call<{ id: string; status: number; duration_ms: number }>('POST', `/api/v1/requests/${encodeURIComponent(id)}/replay`, body);
  if (parsed.values.json === true) printJson(replayed);
  else process.stdout.write(`replayed ${id} as ${replayed.id}: ${replayed.status} in ${replayed.duration_ms} ms\n`);
  return 0;
}
