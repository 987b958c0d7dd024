/**
 * Who may reach a tunnel by address (`--allow-cidr`, `--deny-cidr`, docs/policies.md): a denied block
 * refuses, and with any allowed block only those are let in. The one decision for HTTP requests (through
 * CompiledPolicy) and for TCP and TLS passthrough connections, always on the client address the edge
 * believes (src/edge/client-address.ts: the TCP peer, or a trusted proxy's PROXY v2 header).
 */
import { addressBytes, cidrContains, parseCidr, type CidrBlock } from '../../protocol/cidr.js';

/** Addresses remembered per rule (clients repeat; parsing an address is the cost). */
const VERDICT_CACHE = 4096;

export class AddressRule {
  private readonly allowBlocks: CidrBlock[];
  private readonly denyBlocks: CidrBlock[];
  private readonly verdicts = new Map<string, boolean>();

  /** Blocks as stored (already checked when the policy was taken). */
  constructor(allow: readonly string[] = [], deny: readonly string[] = []) {
    this.allowBlocks = allow.map((text) => parseCidr(text) as CidrBlock);
    this.denyBlocks = deny.map((text) => parseCidr(text) as CidrBlock);
  }

  /** Whether the rule decides anything (a policy without CIDR blocks lets everyone in). */
  get active(): boolean {
    return this.allowBlocks.length > 0 || this.denyBlocks.length > 0;
  }

  allows(address: string): boolean {
    let verdict = this.verdicts.get(address);
    if (verdict === undefined) {
      const bytes = addressBytes(address);
      verdict =
        bytes !== null &&
        !this.denyBlocks.some((block) => cidrContains(block, bytes)) &&
        (this.allowBlocks.length === 0 || this.allowBlocks.some((block) => cidrContains(block, bytes)));
      if (this.verdicts.size >= VERDICT_CACHE) this.verdicts.clear();
      this.verdicts.set(address, verdict);
    }
    return verdict;
  }
}
