/**
 * A route table matched by method and path segments: a small trie, no regular expressions, no framework.
 *
 * A path that matches a route with another method answers 405 with the methods it does allow; a path
 * that matches nothing answers 404. Parameters (`:id`) match one whole non-empty segment.
 */

export interface RouteMatch<H> {
  handler: H;
  params: Record<string, string>;
}

export type RouteLookup<H> =
  | { kind: 'found'; match: RouteMatch<H> }
  | { kind: 'method-not-allowed'; allow: string[] }
  | { kind: 'not-found' };

class Node<H> {
  readonly children = new Map<string, Node<H>>();
  param: { name: string; node: Node<H> } | null = null;
  readonly handlers = new Map<string, H>();
}

export class Router<H> {
  private readonly root = new Node<H>();
  private readonly table: { method: string; pattern: string }[] = [];

  /** Every route added, in order: what the docs test holds docs/api.md against. */
  get routes(): readonly { method: string; pattern: string }[] {
    return this.table;
  }

  /** Adds `METHOD /a/:b/c`; a method is matched case-sensitively in upper case. */
  add(method: string, pattern: string, handler: H): this {
    let node = this.root;
    for (const segment of splitPath(pattern)) {
      if (segment.startsWith(':')) {
        const name = segment.slice(1);
        if (node.param === null) node.param = { name, node: new Node<H>() };
        else if (node.param.name !== name) throw new Error(`route ${pattern}: parameter :${name} clashes with :${node.param.name}`);
        node = node.param.node;
      } else {
        let child = node.children.get(segment);
        if (child === undefined) {
          child = new Node<H>();
          node.children.set(segment, child);
        }
        node = child;
      }
    }
    if (node.handlers.has(method)) throw new Error(`route ${method} ${pattern} is defined twice`);
    node.handlers.set(method, handler);
    this.table.push({ method, pattern });
    return this;
  }

  /** Looks up a raw path (no query). A single trailing slash is ignored; percent-escapes in parameters are decoded. */
  lookup(method: string, path: string): RouteLookup<H> {
    if (path.length === 0 || path.charCodeAt(0) !== 47 /* / */) return NOT_FOUND;
    const end = path.length > 1 && path.charCodeAt(path.length - 1) === 47 ? path.length - 1 : path.length;
    let node = this.root;
    let params: Record<string, string> | null = null;
    let start = 1;
    while (start <= end && end > 1) {
      let slash = path.indexOf('/', start);
      if (slash === -1 || slash > end) slash = end;
      const segment = path.slice(start, slash);
      if (segment.length === 0) return NOT_FOUND;
      const child = node.children.get(segment);
      if (child !== undefined) {
        node = child;
      } else if (node.param !== null) {
        const value = decodeSegment(segment);
        if (value === null) return NOT_FOUND;
        params ??= {};
        params[node.param.name] = value;
        node = node.param.node;
      } else {
        return NOT_FOUND;
      }
      start = slash + 1;
    }
    if (node.handlers.size === 0) return NOT_FOUND;
    const handler = node.handlers.get(method) ?? (method === 'HEAD' ? node.handlers.get('GET') : undefined);
    if (handler === undefined) {
      const allow = [...node.handlers.keys()];
      if (allow.includes('GET')) allow.push('HEAD');
      return { kind: 'method-not-allowed', allow: allow.sort() };
    }
    return { kind: 'found', match: { handler, params: params ?? EMPTY_PARAMS } };
  }
}

const NOT_FOUND = { kind: 'not-found' } as const;
const EMPTY_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

function splitPath(pattern: string): string[] {
  return pattern.split('/').filter((segment) => segment.length > 0);
}

function decodeSegment(segment: string): string | null {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}
