/**
 * Network namespaces for bench/cluster-scale.ts: one namespace per edge, each with one address on a
 * private /24, all joined by a bridge on the host, which holds the subnet's first address (Redis, nginx
 * and the tunnel clients stay on the host side). Everything it makes is named with one prefix and
 * deleted by `remove()`, which also works on the leftovers of an earlier run that was killed.
 * Needs root (CAP_NET_ADMIN) and iproute2's `ip`.
 */
import { execFileSync } from 'node:child_process';

export interface NamespaceSet {
  /** The bridge's name on the host. */
  bridge: string;
  /** The host's address on the bridge (x.y.z.1). */
  hostAddress: string;
  /** One per edge: the namespace's name and its address. */
  namespaces: { name: string; address: string }[];
}

function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The plan for `count` namespaces named `<prefix>-e1...` on `subnet` (three octets, e.g. "10.231.28"). */
export function planNamespaces(prefix: string, subnet: string, count: number): NamespaceSet {
  if (!/^10\.\d{1,3}\.\d{1,3}$/.test(subnet)) throw new Error(`the subnet must be a private 10.x.y prefix, not "${subnet}"`);
  // Interface names are at most 15 bytes: the bridge and the host ends of the veth pairs use a short form.
  return {
    bridge: `${prefix.slice(0, 10)}-br`,
    hostAddress: `${subnet}.1`,
    namespaces: Array.from({ length: count }, (_, i) => ({ name: `${prefix}-e${i + 1}`, address: `${subnet}.${11 + i}` })),
  };
}

/** Whether any address or route of the host is already on the subnet (then the run picks none of it). */
export function subnetInUse(set: NamespaceSet): boolean {
  const prefix = set.hostAddress.slice(0, set.hostAddress.lastIndexOf('.') + 1);
  return ip(['-o', 'addr']).includes(` ${prefix}`) || ip(['route']).includes(prefix);
}

function hostEnd(set: NamespaceSet, index: number): string {
  return `${set.bridge.slice(0, 10)}${index + 1}h`;
}

export function createNamespaces(set: NamespaceSet): void {
  ip(['link', 'add', set.bridge, 'type', 'bridge']);
  ip(['addr', 'add', `${set.hostAddress}/24`, 'dev', set.bridge]);
  ip(['link', 'set', set.bridge, 'up']);
  set.namespaces.forEach((ns, index) => {
    const host = hostEnd(set, index);
    const inside = `${host.slice(0, -1)}n`;
    ip(['netns', 'add', ns.name]);
    ip(['link', 'add', host, 'type', 'veth', 'peer', 'name', inside]);
    ip(['link', 'set', inside, 'netns', ns.name]);
    ip(['link', 'set', host, 'master', set.bridge]);
    ip(['link', 'set', host, 'up']);
    ip(['-n', ns.name, 'addr', 'add', `${ns.address}/24`, 'dev', inside]);
    ip(['-n', ns.name, 'link', 'set', inside, 'up']);
    ip(['-n', ns.name, 'link', 'set', 'lo', 'up']);
  });
}

/**
 * Deletes the namespaces (their veth ends go with them) and the bridge; what is already gone is skipped.
 * Processes still inside a namespace keep it alive: stop them first.
 */
export function removeNamespaces(set: NamespaceSet): string[] {
  const problems: string[] = [];
  const existing = ip(['netns', 'list']);
  for (const ns of set.namespaces) {
    if (!new RegExp(`^${ns.name}( |$)`, 'm').test(existing)) continue;
    try {
      ip(['netns', 'del', ns.name]);
    } catch (error) {
      problems.push(`netns ${ns.name}: ${(error as Error).message.trim()}`);
    }
  }
  set.namespaces.forEach((_, index) => {
    try {
      ip(['link', 'del', hostEnd(set, index)]);
    } catch {
      // gone with its namespace
    }
  });
  try {
    ip(['link', 'show', set.bridge]);
    ip(['link', 'del', set.bridge]);
  } catch {
    // no bridge
  }
  return problems;
}

/** The namespaces of the set that still exist. */
export function remainingNamespaces(set: NamespaceSet): string[] {
  const existing = ip(['netns', 'list']);
  return set.namespaces.map((ns) => ns.name).filter((name) => new RegExp(`^${name}( |$)`, 'm').test(existing));
}
