/**
 * `--ca FILE` and `--resolve HOST:PORT:ADDRESS` for the commands that talk to an edge: the CA file checked
 * once, and a dispatcher for undici requests (the API client's; the inspector's through the global one)
 * that trusts it beside the public roots, dials a resolve rule's address for its host and port, and
 * resolves localhost names to loopback itself (src/client/edge-lookup.ts).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, buildConnector, setGlobalDispatcher } from 'undici';
import { edgeLookup } from '../client/edge-lookup.js';
import { trustedCas } from '../client/edge-trust.js';
import { resolveRuleFor, type ResolveRule } from '../client/resolve-rules.js';
import { CliError } from './args.js';

/**
 * Reads a PEM CA certificate; a missing or wrong file is named before any connection, with where the
 * name came from (`from`: "--ca", "BURROW_CA" or the config file's path).
 */
export function readCaFile(path: string, from = '--ca'): string {
  const named = from.startsWith('-') || from === 'BURROW_CA' ? `${from} ${path}` : `the CA ${path} saved in ${from}`;
  const remedy = from.startsWith('-') || from === 'BURROW_CA' ? '' : ' (run "burrow login --ca FILE" again)';
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${named}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}${remedy}`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new CliError(`${named} is not a PEM certificate${remedy}`);
  }
  return pem;
}

/**
 * A dispatcher for requests to the edge: localhost names are loopback without a resolver, `pem` is
 * trusted as well as the public roots when given, and a `--resolve` rule's address is dialled when the
 * request's host and port match it (the name stays the TLS server name and the certificate's subject, as
 * with curl --resolve).
 */
export function edgeDispatcher(pem: string | undefined, rules: readonly ResolveRule[] = []): Agent {
  const connect = { lookup: edgeLookup, ...(pem === undefined ? {} : { ca: trustedCas(pem) }) };
  if (rules.length === 0) return new Agent({ connect });
  const connector = buildConnector(connect);
  return new Agent({
    connect: (options, callback) => {
      const rule = resolveRuleFor(rules, new URL(`${options.protocol}//${options.host}`));
      // `host` (name:port) keeps deciding the TLS server name; only the address dialled changes.
      connector(rule === undefined ? options : { ...options, hostname: rule.address.address }, callback);
    },
  });
}

/** Requests made through undici's global dispatcher (the inspector's to the edge) follow `edgeDispatcher`. */
export function useForEdgeRequests(pem: string | undefined, rules: readonly ResolveRule[]): void {
  setGlobalDispatcher(edgeDispatcher(pem, rules));
}
