/**
 * An edge URL as given (`--edge`, BURROW_EDGE, the saved login, burrow.yml's `edge`) reduced to its
 * origin: one spelling per edge, so lists compare and deduplicate.
 */
import { CliError } from './args.js';

/** The origin of an http(s) edge URL ("localhost:8080" means http://localhost:8080); throws a usage CliError. */
export function normaliseEdge(edge: string): string {
  const problem = edgeProblem(edge);
  if (typeof problem === 'object') throw new CliError(problem.error, 2);
  return problem;
}

/** The origin, or why `edge` is not an edge URL. */
export function edgeProblem(edge: string): string | { error: string } {
  let url: URL;
  try {
    url = new URL(edge.includes('://') ? edge : `http://${edge}`);
  } catch {
    return { error: `"${edge}" is not an edge URL; use e.g. http://localhost:8080` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { error: `the edge URL must be http or https, not ${url.protocol}` };
  return url.origin;
}
