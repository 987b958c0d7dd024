/**
 * The `burrow` command: one entry, a sub-command per job (DESIGN.md section 5). Exit 0 on success;
 * otherwise a one-line reason on stderr and exit 1 (2 for a usage error).
 */
import { CliError, noExtraPositionals, parse, UsageError } from './args.js';
import { tuneHeapForTraffic } from './heap.js';
import { VERSION } from '../version.js';

const HELP = `
Usage: burrow <command> [options]

Expose a local port on a public subdomain; capture, inspect and replay every request.

Commands:
  http PORT                 open a tunnel to localhost:PORT (see burrow http --help)
  tcp [HOST:]PORT           a TCP tunnel: a public port of the edge to HOST:PORT (see burrow tcp --help)
  tls [HOST:]PORT           a TLS passthrough tunnel: NAME.DOMAIN on the edge's HTTPS port, unterminated
  start (NAME... | --all)   run the named tunnels of burrow.yml in one process (docs/config.md)
  config check|path|edit    check burrow.yml, say which file is used, or edit it (its edge, token
                            and ca come after the flags and variables, before "burrow login"'s)
  replay (--last | REQ_ID)  replay a captured request through the local inspector
  login TOKEN               save a token and edge URL for later commands
  tokens list|create|revoke manage personal access tokens
  tunnels list|show|close   see and close the account's tunnels
  requests SUBDOMAIN        list the requests captured on a tunnel
  requests show REQ_ID      one captured request: headers, bodies, timing (--raw: the body's bytes)
  reserve NAME [--offline queue|reject|off]
                            reserve a subdomain for the account; what it answers while offline
  reservations [list|release NAME]
                            list or release the account's reserved subdomains
  queue [list|deliver ID|discard ID|pause|resume] NAME
                            webhooks held for a reserved subdomain while its tunnel is offline
  edge                      run the edge server (burrow edge --dev: what "npm start" runs)
  admin ...                 create-account, token create, set-plan, accounts list (on --data)
  version                   print Burrow's version (the same as burrow --version)

burrow --version (or -v) prints the version; burrow help (or --help, -h) prints this.
Every command takes --help and --json (machine-readable output; errors as {"error":{"code","message"}}
on stderr). Token and edge come from --token/--edge, then BURROW_TOKEN/BURROW_EDGE, then the config
file written by "burrow login" (or by "burrow edge --dev"). Every command that sends the token takes
--ca FILE (a private CA for an https:// edge; then BURROW_CA, then the CA "burrow login --ca" saved)
and --resolve HOST:PORT:ADDRESS (dial ADDRESS for the edge's name without DNS, like curl --resolve;
then BURROW_RESOLVE), and refuses plain http:// to an edge not on this machine unless --insecure.
`;

type Command = (args: string[]) => Promise<number>;

// Loaded on demand: the edge's native server and LMDB are not worth loading for `burrow tokens list`.
const VERSION_HELP = `
Usage: burrow version [--json]

Prints Burrow's version: "burrow ${VERSION}", or {"version":"${VERSION}"} with --json (the build an
edge reports at GET /api/v1/instance).

Options:
  --json       print {"version":"..."}
  -h, --help   show this help
`;

async function versionCommand(args: string[]): Promise<number> {
  const parsed = parse(args, { json: { type: 'boolean' } }, VERSION_HELP);
  if (parsed === null) return 0;
  noExtraPositionals(parsed, 0, VERSION_HELP);
  process.stdout.write(parsed.values.json === true ? `${JSON.stringify({ version: VERSION })}\n` : `burrow ${VERSION}\n`);
  return 0;
}

const commands: Record<string, () => Promise<Command>> = {
  edge: async () => (await import('./commands/edge.js')).edgeCommand,
  admin: async () => (await import('./commands/admin.js')).adminCommand,
  login: async () => (await import('./commands/api-commands.js')).loginCommand,
  tokens: async () => (await import('./commands/api-commands.js')).tokensCommand,
  tunnels: async () => (await import('./commands/api-commands.js')).tunnelsCommand,
  requests: async () => (await import('./commands/api-commands.js')).requestsCommand,
  reserve: async () => (await import('./commands/api-commands.js')).reserveCommand,
  reservations: async () => (await import('./commands/api-commands.js')).reservationsCommand,
  queue: async () => (await import('./commands/queue.js')).queueCommand,
  start: async () => (await import('./commands/start.js')).startCommand,
  config: async () => (await import('./commands/config.js')).configCommand,
  http: async () => (await import('./commands/http.js')).httpCommand,
  tcp: async () => (await import('./commands/tcp.js')).tcpCommand,
  tls: async () => (await import('./commands/tcp.js')).tlsCommand,
  replay: async () => (await import('./commands/replay.js')).replayCommand,
  version: async () => versionCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) throw new UsageError('a command is required; run "burrow --help" to list them');
  if (name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${HELP.trim()}\n`);
    return 0;
  }
  if (name === '--version' || name === '-v') {
    process.stdout.write(`burrow ${VERSION}\n`);
    return 0;
  }
  const load = commands[name];
  if (load === undefined) throw new UsageError(`unknown command "${name}"; run "burrow --help"`);
  // The edge's and the tunnel client's heaps grow to suit bodies streaming through them (heap.ts).
  if (name === 'edge' || name === 'http' || name === 'tcp' || name === 'tls' || name === 'start') tuneHeapForTraffic();
  return (await load())(args);
}

const argv = process.argv.slice(2);
// Under --json an error is the spec's shape on stderr, one line, so a script reads it like the API's.
const json = argv.includes('--json');

function fail(code: string, message: string, exitCode: number): void {
  process.stderr.write(json ? `${JSON.stringify({ error: { code, message } })}\n` : `burrow: ${message}\n`);
  process.exitCode = exitCode;
}

main(argv).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError) fail('INVALID_REQUEST', error.message, 2);
    else if (error instanceof CliError) {
      if (json) fail(error.code, error.detail, error.exitCode);
      else fail(error.code, error.message, error.exitCode);
    } else if (json) fail('INTERNAL_ERROR', (error as Error)?.message ?? String(error), 1);
    else fail('INTERNAL_ERROR', (error as Error)?.stack ?? String(error), 1);
  },
);
