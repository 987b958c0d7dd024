/**
 * docs/config.md and README stay true to the checker: every YAML example in them checks clean, the
 * docs' key tables name exactly the keys the checker knows, and the example `burrow config edit`
 * writes mentions every key.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXAMPLE_CONFIG, formatProblem, KNOWN_KEYS, parseConfigText } from '../../src/cli/config-file.js';
import { ROOT } from '../helpers.js';

function yamlBlocks(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

test('every YAML example of docs/config.md and README.md is a valid burrow.yml', () => {
  const blocks = [...yamlBlocks('docs/config.md'), ...yamlBlocks('README.md')];
  assert.ok(blocks.length >= 3, 'the examples are found');
  for (const block of blocks) {
    const parsed = parseConfigText(block, 'example.yml');
    assert.deepEqual(parsed.problems.map(formatProblem), [], block);
    assert.ok(parsed.config !== null && parsed.config.tunnels.length > 0, block);
  }
});

test("docs/config.md's key tables list exactly the keys the checker knows", () => {
  const text = readFileSync(join(ROOT, 'docs/config.md'), 'utf8');
  const section = text.slice(text.indexOf('## The keys'), text.indexOf('### Values are used as written'));
  const documented = new Set([...section.matchAll(/^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \|/gm)].flatMap((match) => [...match[1]!.matchAll(/`([a-z_]+)`/g)].map((key) => key[1]!)));
  const oidcKeys = /`\{issuer, client_id, client_secret, allow_email, allow_domain\}`/.test(section) ? KNOWN_KEYS.oidc : [];
  const known = new Set<string>([...KNOWN_KEYS.top, ...KNOWN_KEYS.http, ...KNOWN_KEYS.kinds, ...KNOWN_KEYS.route.filter((key) => key !== 'target'), ...KNOWN_KEYS.tcp, ...KNOWN_KEYS.tls]);
  for (const key of ['tcp', 'tls']) documented.add(key); // described in prose: `tcp: PORT | host:port`
  assert.deepEqual([...documented].sort(), [...known].sort());
  assert.deepEqual([...oidcKeys], ['issuer', 'client_id', 'client_secret', 'allow_email', 'allow_domain']);
  assert.match(section, /`tcp: PORT \| host:port` and `tls: PORT \| host:port`/);
});

test('the example "burrow config edit" writes shows every key', () => {
  for (const key of [...KNOWN_KEYS.top.filter((key) => key !== 'version' && key !== 'token'), 'http', 'subdomain', 'routes', 'host_header', 'local_insecure', 'strip_prefix', 'target', ...KNOWN_KEYS.tcp]) {
    assert.ok(new RegExp(`\\b${key}:`).test(EXAMPLE_CONFIG), key);
  }
});
