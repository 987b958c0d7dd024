/**
 * `--ca FILE` for the commands that talk to an edge: the file checked once, and undici's global
 * dispatcher (the API client's and the inspector's requests) told to trust it beside the public roots.
 * Every dispatcher made here resolves localhost names to loopback itself (src/client/edge-lookup.ts).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setGlobalDispatcher, type Agent } from 'undici';
import { edgeDispatcher } from '../client/edge-lookup.js';
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

/** A dispatcher for undici requests that trusts `pem` as well as the public roots. */
export function dispatcherTrusting(pem: string): Agent {
  return edgeDispatcher(pem);
}

/**
 * Requests made through undici's global dispatcher (the inspector's, to the edge) resolve localhost names
 * to loopback, and trust `pem` as well as the public roots when given.
 */
export function useEdgeDispatcherForRequests(pem?: string): void {
  setGlobalDispatcher(edgeDispatcher(pem));
}
