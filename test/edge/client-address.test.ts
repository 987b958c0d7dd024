/**
 * --trust-proxy's rules in a table (src/edge/client-address.ts): which entries parse, which peers are
 * trusted, and which address of an X-Forwarded-For chain is the client's.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TrustedProxies, plainAddress } from '../../src/edge/client-address.js';

describe('TrustedProxies.parse', () => {
  const refused: string[] = ['', ' , ', 'localhost', '10.0.0.0/33', '::1/129', '10.0.0.0/', '10.0.0.0/-1', '10.0.0/8', '1.2.3.4/8x', 'fe80::/abc'];
  for (const list of refused) {
    test(`refuses ${JSON.stringify(list)} with a message naming the option`, () => {
      assert.throws(() => TrustedProxies.parse(list), /--trust-proxy/);
    });
  }

  test('takes a comma list, repeated options, bare addresses and IPv6', () => {
    const trusted = TrustedProxies.parse(['10.0.0.0/8, 127.0.0.1', '::1,2001:db8::/32']);
    assert.deepEqual(trusted.ranges, ['10.0.0.0/8', '127.0.0.1', '::1', '2001:db8::/32']);
  });
});

describe('TrustedProxies.trusts', () => {
  const trusted = TrustedProxies.parse('10.0.0.0/8,127.0.0.1/32,2001:db8::/32');
  const cases: [string, boolean][] = [
    ['10.1.2.3', true],
    ['127.0.0.1', true],
    ['127.0.0.2', false],
    ['11.0.0.1', false],
    ['2001:db8::5', true],
    ['2001:db9::5', false],
    ['::1', false],
    ['not-an-address', false],
    ['', false],
  ];
  for (const [address, expected] of cases) {
    test(`${JSON.stringify(address)} -> ${expected}`, () => {
      assert.equal(trusted.trusts(address), expected);
      assert.equal(trusted.trusts(address), expected, 'the cached verdict is the same');
    });
  }
});

describe('the client address of an X-Forwarded-For chain sent by a trusted proxy', () => {
  const trusted = TrustedProxies.parse('10.0.0.0/8,127.0.0.1/32');
  const cases: [chain: string, expected: string, why: string][] = [
    ['203.0.113.9', '203.0.113.9', 'one entry: the address the proxy saw'],
    ['198.51.100.1, 203.0.113.9', '203.0.113.9', 'a forged left part is not believed: the rightmost untrusted entry is the client'],
    ['198.51.100.1, 203.0.113.9, 10.0.0.7', '203.0.113.9', 'trusted proxies in the chain are skipped'],
    ['10.0.0.8,10.0.0.7', '10.0.0.8', 'a chain of proxies only: the leftmost'],
    ['garbage, 203.0.113.9', '203.0.113.9', 'what is left of the client does not matter'],
    ['203.0.113.9, garbage', '127.0.0.1', 'a malformed entry next to the proxy: nothing further is believed'],
    ['203.0.113.9:51234', '203.0.113.9', 'a port (Azure, some balancers) is dropped'],
    ['[2001:db8::9]:443', '2001:db8::9', 'a bracketed IPv6 address with a port'],
    ['2001:db8::9', '2001:db8::9', 'a plain IPv6 address'],
    ['::ffff:203.0.113.9', '203.0.113.9', 'an IPv4-mapped IPv6 address is printed as IPv4, like the edge prints peers'],
  ];
  for (const [chain, expected, why] of cases) {
    test(`${JSON.stringify(chain)} -> ${expected} (${why})`, () => {
      assert.equal(trusted.clientFromChain(chain, '127.0.0.1'), expected);
    });
  }

  test('plainAddress leaves plain addresses alone', () => {
    for (const address of ['1.2.3.4', '::1', '2001:db8::1', 'fe80::1']) assert.equal(plainAddress(address), address);
  });
});
