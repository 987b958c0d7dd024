/**
 * deploy/burrow-edge.service: systemd's own checker accepts it (when systemd-analyze is installed), and
 * it has the hardening and the stop/reload behaviour docs/deploy.md promises: its own user, a read-only
 * system with /var/lib/burrow as the state directory, no capability beyond binding ports below 1024
 * (and only when it binds them), SIGTERM with a stop timeout above the drain bound, SIGHUP on reload.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../helpers.js';

const UNIT = join(ROOT, 'deploy', 'burrow-edge.service');

/** Section → key → values (a key may repeat). Comments and blank lines skipped; no line continuations used. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | null = null;
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    assert.ok(!line.endsWith('\\'), `line ${index + 1}: no continuation lines`);
    const section = /^\[([A-Za-z]+)\]$/.exec(line);
    if (section !== null) {
      current = new Map();
      sections.set(section[1]!, current);
      continue;
    }
    const pair = /^([A-Za-z]+)=(.*)$/.exec(line);
    assert.ok(pair !== null && current !== null, `line ${index + 1} is not Key=value inside a section: ${raw}`);
    current.set(pair[1]!, [...(current.get(pair[1]!) ?? []), pair[2]!]);
  }
  return sections;
}

const unit = parseUnit(readFileSync(UNIT, 'utf8'));
const service = unit.get('Service')!;
const one = (key: string): string => {
  const values = service.get(key);
  assert.ok(values !== undefined && values.length === 1, `[Service] ${key}= exactly once`);
  return values[0]!;
};

test('systemd-analyze verify accepts the unit without a warning', { skip: spawnSync('systemd-analyze', ['--version']).error !== undefined && 'systemd-analyze is not installed' }, () => {
  const result = spawnSync('systemd-analyze', ['verify', '--man=no', UNIT], { encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr);
  const complaints = `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.includes('burrow-edge.service'));
  assert.deepEqual(complaints, []);
});

test('the sections a service needs', () => {
  assert.deepEqual([...unit.keys()], ['Unit', 'Service', 'Install']);
  assert.equal(unit.get('Install')!.get('WantedBy')?.[0], 'multi-user.target');
});

test('its own user, a read-only system, /var/lib/burrow as state directory and --data', () => {
  assert.equal(one('User'), 'burrow');
  assert.equal(one('Group'), 'burrow');
  assert.equal(one('ProtectSystem'), 'strict');
  assert.equal(one('StateDirectory'), 'burrow');
  assert.match(one('ExecStart'), / --data \/var\/lib\/burrow( |$)/);
  for (const key of ['NoNewPrivileges', 'PrivateTmp', 'ProtectHome', 'PrivateDevices', 'ProtectKernelTunables', 'ProtectControlGroups', 'RestrictNamespaces']) {
    assert.equal(one(key), 'yes', key);
  }
  assert.deepEqual(one('RestrictAddressFamilies').split(/\s+/).sort(), ['AF_INET', 'AF_INET6', 'AF_UNIX']);
  // V8 compiles code at run time: this must never be set.
  assert.equal(service.get('MemoryDenyWriteExecute'), undefined);
});

test('capabilities: none, unless it binds a port below 1024, then CAP_NET_BIND_SERVICE only', () => {
  const ports = [...one('ExecStart').matchAll(/--(?:port|http-port|agent-port) (\d+)/g)].map((match) => Number(match[1]));
  assert.ok(ports.length > 0);
  const privileged = ports.some((port) => port < 1024);
  assert.equal(one('CapabilityBoundingSet'), privileged ? 'CAP_NET_BIND_SERVICE' : '');
  assert.equal(service.get('AmbientCapabilities')?.[0], privileged ? 'CAP_NET_BIND_SERVICE' : undefined);
});

test('stops with SIGTERM within a timeout above the drain bound; reloads certificates with SIGHUP', () => {
  assert.equal(one('KillSignal'), 'SIGTERM');
  assert.equal(one('ExecReload'), '/bin/kill -HUP $MAINPID');
  const drain = /--drain (\d+)/.exec(one('ExecStart'));
  const drainMs = drain === null ? 10_000 : Number(drain[1]);
  const timeout = /^(\d+)s?$/.exec(one('TimeoutStopSec'));
  assert.ok(timeout !== null, 'TimeoutStopSec in seconds');
  assert.ok(Number(timeout[1]) * 1000 >= drainMs + 5_000, `TimeoutStopSec ${timeout[1]} s leaves room after a ${drainMs} ms drain`);
});

test('the options it passes to burrow edge that this work added are in `burrow edge --help`', () => {
  const help = spawnSync(process.execPath, [join(ROOT, 'bin', 'burrow.js'), 'edge', '--help'], { encoding: 'utf8' }).stdout;
  for (const flag of ['--data', '--admin', '--access-log', '--drain', '--host', '--port', '--agent-port', '--domain']) {
    assert.ok(one('ExecStart').includes(` ${flag} `), `ExecStart passes ${flag}`);
    assert.ok(help.includes(`  ${flag} `), `burrow edge --help lists ${flag}`);
  }
});
