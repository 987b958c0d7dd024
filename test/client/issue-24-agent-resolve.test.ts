/**
 * Issue 24 met issue 29's `--resolve`: the tunnel client is given the edge's URL and learns the agent
 * endpoint from GET /api/v1/instance, so a user's rule names the edge URL's HOST:PORT, never the agent
 * port. The names here (`*.burrow.invalid`) resolve nowhere: only the rules get the client anywhere.
 * - The agent endpoint on the edge's own name (another port): dialled at the address the edge URL's rule
 *   pinned.
 * - The agent endpoint on another name (`--agent-url`): it needs a rule of its own, which is used; without
 *   one the failure names that name.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { parseResolveRule, type ResolveRule } from '../../src/client/resolve-rules.js';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, freePort, startEdge, startLocal, type TestEdge } from '../helpers.js';

const DOMAIN = 'burrow.invalid';
const running: { close(): Promise<unknown> }[] = [];
after(async () => {
  for (const each of running.reverse()) await each.close();
});

function rules(...texts: string[]): ResolveRule[] {
  return texts.map((text) => {
    const rule = parseResolveRule(text);
    assert.notEqual(typeof rule, 'string', String(rule));
    return rule as ResolveRule;
  });
}

/** Starts a client on `edge` by name with these rules: its public URL, or the reason it could not start. */
async function connect(edge: TestEdge, token: string, localPort: number, resolve: ResolveRule[]): Promise<string> {
  const client = new TunnelClient({
    edge: `http://${DOMAIN}:${edge.port}`,
    token,
    routes: new RouteTable(localPort),
    resolve,
    // ws:// to a name that is not loopback: allowed for the test (the addresses are loopback).
    insecure: true,
    minBackoffMs: 50,
    maxBackoffMs: 200,
  });
  try {
    return (await client.start()).publicUrl;
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  } finally {
    await client.close();
  }
}

test("the agent port on the edge's own name is dialled at the address the edge URL's rule gives", async () => {
  const edge = await startEdge({ domain: DOMAIN });
  running.push(edge);
  const local = await startLocal((_req, res) => res.end('ok'));
  running.push(local);
  const account = await createAccount(edge);
  assert.notEqual(edge.edge.agentPort, edge.port);
  assert.equal(edge.edge.agentUrl(`${DOMAIN}:${edge.port}`), `ws://${DOMAIN}:${edge.edge.agentPort}/api/v1/connect`);
  // The rule names the edge URL's port only; the agent port is another one, on the same name.
  const publicUrl = await connect(edge, account.token, local.port, rules(`${DOMAIN}:${edge.port}:127.0.0.1`));
  assert.match(publicUrl, new RegExp(`^http://[a-z0-9-]+\\.${DOMAIN.replace('.', '\\.')}:${edge.port}$`));
  // Without the rule nothing is reached, and the reason is the name.
  assert.match(await connect(edge, account.token, local.port, []), /the name burrow\.invalid (does not resolve|could not be looked up)/);
});

test('an agent endpoint on a name of its own (--agent-url) is dialled by its own rule, and without one the failure names it', async () => {
  const agentPort = await freePort();
  const agentUrl = `ws://agent.${DOMAIN}:${agentPort}/api/v1/connect`;
  const edge = await startEdge({ domain: DOMAIN, agentPort, agentUrl });
  running.push(edge);
  const local = await startLocal((_req, res) => res.end('ok'));
  running.push(local);
  const account = await createAccount(edge);
  const edgeRule = `${DOMAIN}:${edge.port}:127.0.0.1`;
  // The edge URL's rule does not cover another name: it goes to DNS, which knows nothing of it.
  assert.match(await connect(edge, account.token, local.port, rules(edgeRule)), /the name agent\.burrow\.invalid (does not resolve|could not be looked up)/);
  // A rule for the agent endpoint's own host and port.
  const publicUrl = await connect(edge, account.token, local.port, rules(edgeRule, `agent.${DOMAIN}:${agentPort}:127.0.0.1`));
  assert.match(publicUrl, new RegExp(`\\.${DOMAIN.replace('.', '\\.')}:${edge.port}$`));
});
