/**
 * `--ca FILE` for the commands that talk to an edge: the file checked once, and undici's global
 * dispatcher (the API client's and the inspector's requests) told to trust it beside the public roots.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, setGlobalDispatcher } from 'undici';
import { trustedCas } from '../client/edge-trust.js';
import { CliError } from './args.js';

/** Reads a PEM CA certificate; a missing or wrong file is named before any connection. */
export function readCaFile(path: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read --ca ${path}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new CliError(`--ca ${path} is not a PEM certificate`);
  }
  return pem;
}

/** Requests made through undici's global dispatcher trust `pem` as well as the public roots. */
export function trustCaForRequests(pem: string): void {
  setGlobalDispatcher(new Agent({ connect: { ca: trustedCas(pem) } }));
}
