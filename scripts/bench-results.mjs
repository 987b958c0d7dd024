#!/usr/bin/env node
// `npm run bench:results [-- FILE] [--note TEXT]`: writes bench/RESULTS.md from an end-to-end benchmark
// results file (bench/out/e2e-*.json, the newest one by default): machine and date, the tables (the
// matrix with its floors, the probes per sender, many tenants, idle tunnels) and the acceptance targets of
// issue 13 checked. The "History" section of an existing
// RESULTS.md is kept and this run's headline numbers are added to it (a rerun of the same file replaces its
// own row), so the before/after of each tuning step stays visible.
//
// `--check FILE` prints the acceptance checks only (the benchmark runner calls this at its end);
// `--strict` makes either mode exit 1 when a target is missed.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HISTORY_START = '<!-- history:start (kept by scripts/bench-results.mjs; add notes freely) -->';
const HISTORY_END = '<!-- history:end -->';

/** The acceptance targets of issue 13 (one `npm run bench` run, medians, capture and inspector on). */
export const TARGETS = {
  addedP50Us: 250,
  tunnelP99Us: 1500,
  headlineRatio: 0.3,
  tenantsRatio: 0.9,
  idleTunnels: 10_000,
  idleEdgeRssMiB: 400,
};

const HELP = `Usage: node scripts/bench-results.mjs [FILE] [--note TEXT] [--out PATH] [--strict]
       node scripts/bench-results.mjs --check [FILE] [--strict]

FILE defaults to the newest bench/out/e2e-*.json. --out defaults to bench/RESULTS.md.
--note TEXT labels this run in the History table (e.g. "cork frames per tick").
`;

function newestResults() {
  const dir = join(ROOT, 'bench', 'out');
  const files = existsSync(dir) ? readdirSync(dir).filter((name) => /^e2e-.*\.json$/.test(name)).sort() : [];
  if (files.length === 0) throw new Error('no bench/out/e2e-*.json; run "npm run bench" first');
  return join(dir, files[files.length - 1]);
}

// ---------------------------------------------------------------------------------------------------------
// Formatting.

const num = (value, digits = 0) =>
  value === null || value === undefined || !Number.isFinite(value)
    ? '–'
    : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const signed = (value, digits = 0) => (value === null || value === undefined || !Number.isFinite(value) ? '–' : `${value >= 0 ? '+' : ''}${num(value, digits)}`);
const mib = (bytes) => bytes / 1024 / 1024;

function table(headers, rows, align) {
  const alignRow = headers.map((_, i) => ((align?.[i] ?? 'r') === 'l' ? ':---' : '---:'));
  return [`| ${headers.join(' | ')} |`, `| ${alignRow.join(' | ')} |`, ...rows.map((row) => `| ${row.map((cell) => String(cell ?? '–')).join(' | ')} |`)].join('\n');
}

function configLabel(results, path) {
  if (path === 'direct') return 'direct';
  return results.tunnels.find((t) => t.id === path)?.label ?? path;
}

// ---------------------------------------------------------------------------------------------------------
// Acceptance.

const KIB = 1024;
const sizeLabel = (size) => (size >= KIB * KIB ? `${size / KIB / KIB} MiB` : `${size / KIB} KiB`);
const scenarioLabel = (s) => `${s.method} ${sizeLabel(s.size)} ${s.method === 'POST' ? 'up' : 'down'}, ${s.shape}`;
const SENDER_NAMES = { undici: 'undici', 'node-http': 'Node http (keep-alive agent)', curl: 'curl (one process, connection reused)' };

/** The tunnel the targets are stated for: capture on and inspector on (or not switchable). */
function headlinePath(results) {
  return results.paths.find((p) => p.kind === 'tunnel' && p.capture === true && p.inspect !== false)?.id;
}

function findGroup(results, { method, size, shape, connections }, path) {
  return results.summary.groups.find((g) => g.method === method && g.size === size && g.shape === shape && g.connections === connections && g.path === path);
}

function findProbe(results, sender, method, shape, path) {
  return results.summary.probes.find((p) => p.sender === sender && p.method === method && p.size === KIB && p.shape === shape && p.path === path);
}

/** Every error, timeout, non-2xx and wrong answer the run saw, wherever: { total, parts }. */
function everythingBad(results) {
  const parts = [];
  let total = 0;
  const add = (what, count) => {
    if (count > 0) parts.push(`${what} ${count}`);
    total += count;
  };
  const sum = (list, pick) => list.reduce((t, x) => t + pick(x), 0);
  add('run errors', sum(results.runs, (r) => r.load.errors));
  add('run timeouts', sum(results.runs, (r) => r.load.timeouts));
  add('run non-2xx', sum(results.runs, (r) => r.load.non2xx));
  add('run wrong bodies', sum(results.runs, (r) => r.load.mismatches));
  add('warm-up errors/timeouts/non-2xx/wrong bodies', sum(results.warmups, (w) => w.load.errors + w.load.timeouts + w.load.non2xx + w.load.mismatches));
  add('probe failures', sum(results.probes, (p) => p.result.errors));
  add('probe connections not reused', sum(results.probes, (p) => p.result.newConnections ?? 0));
  add('client-logged failures', sum(results.runs, (r) => r.clientLog?.failed ?? 0) + sum(results.otherClientLog ?? [], (e) => e.failed));
  if (results.tenants) {
    add('tenant errors/timeouts/non-2xx/wrong bodies', sum(results.tenants.runs, (r) => r.errors + r.timeouts + r.non2xx + r.mismatches));
    add('tenant tunnels that failed to connect', results.tenants.fleet?.failed ?? 0);
    add('tenant tunnels dropped', results.tenants.drops);
  }
  if (results.openloop) add('open-loop errors/timeouts/non-2xx/wrong bodies', sum(results.openloop.runs, (r) => r.result.errors + r.result.timeouts + r.result.non2xx + r.result.mismatches));
  if (results.floorProfile) {
    add('floor-profile errors/timeouts/non-2xx/wrong bodies', sum(results.floorProfile.paths, (p) => p.bad) + (results.floorProfile.profiledBad ?? 0));
    add('floor-profile runs that failed', results.floorProfile.paths.filter((p) => p.error).length);
  }
  if (results.https) add('https-phase errors/timeouts/non-2xx/wrong bodies', sum(results.https.runs, (r) => r.load.errors + r.load.timeouts + r.load.non2xx + r.load.mismatches) + sum(results.https.runs, (r) => r.clientLog?.failed ?? 0));
  if (results.idle) {
    add('idle tunnels that failed to connect', results.idle.fleet?.failed ?? 0);
    add('idle tunnels dropped', results.idle.drops);
    add('idle spot-check failures', results.idle.spotCheck.tried - results.idle.spotCheck.ok);
  }
  return { total, parts };
}

/** Every check: { name, target, measured, pass (true/false/null when not measurable or not a target) }. */
export function checkAcceptance(results) {
  const checks = [];
  const tunnel = headlinePath(results);
  const inspectNote = results.paths.find((p) => p.id === tunnel)?.inspect === null ? 'capture on; the inspector could not be switched' : 'capture on, inspector on';

  for (const sender of ['undici', 'node-http', 'curl']) {
    for (const method of ['POST', 'GET']) {
      for (const shape of ['length', 'chunked']) {
        const probe = findProbe(results, sender, method, shape, tunnel);
        const direct = findProbe(results, sender, method, shape, 'direct');
        if (!probe || !direct) {
          if (sender !== 'curl') checks.push({ name: `1 connection, ${sender}, ${method} 1 KiB ${shape}: added p50 ≤ ${TARGETS.addedP50Us} µs, p99 ≤ ${TARGETS.tunnelP99Us / 1000} ms`, target: '', measured: 'not measured', pass: null });
          continue;
        }
        const nginx = findProbe(results, sender, method, shape, 'nginx2');
        const relays = findProbe(results, sender, method, shape, 'relays2');
        const ssh = findProbe(results, sender, method, shape, 'ssh');
        const baseline = findProbe(results, sender, method, shape, 'baseline');
        const floors = [baseline ? `${results.paths.find((p) => p.id === 'baseline')?.label ?? 'baseline'} +${num(baseline.addedP50Us)}` : null, ssh ? `ssh -R +${num(ssh.addedP50Us)}` : null, nginx ? `nginx → nginx +${num(nginx.addedP50Us)}` : null, relays ? `two relays +${num(relays.addedP50Us)}` : null].filter(Boolean).join(', ');
        const pass = probe.addedP50Us <= TARGETS.addedP50Us && probe.p99Us <= TARGETS.tunnelP99Us;
        checks.push({
          name: `1 connection, ${sender}${sender === 'curl' ? ' (not a target; for comparison)' : ''}, ${method} 1 KiB ${shape}: added p50 ≤ ${TARGETS.addedP50Us} µs and p99 ≤ ${TARGETS.tunnelP99Us / 1000} ms (${inspectNote})`,
          target: `+p50 ≤ ${TARGETS.addedP50Us} µs, p99 ≤ ${TARGETS.tunnelP99Us} µs`,
          measured: `+p50 ${num(probe.addedP50Us)} µs (${num(probe.p50Us)} vs ${num(direct.p50Us)}), p99 ${num(probe.p99Us)} µs${floors ? `; same run: ${floors}` : ''}`,
          pass: sender === 'curl' ? null : pass,
        });
      }
    }
  }

  checks.push({
    name: 'nothing held back: a flushed head and each body write of a slow response reach the public client as written',
    target: 'a behaviour test in npm test',
    measured: 'not a benchmark figure: test/client/issue-13-*.test.ts and test/edge/issue-13-head-at-once.test.ts',
    pass: null,
  });

  for (const shape of ['length', 'chunked']) {
    const scenario = { method: 'POST', size: KIB, shape, connections: 100 };
    const g = findGroup(results, scenario, tunnel);
    const floors = ['baseline', 'ssh', 'nginx2', 'relays2', 'proxy']
      .map((id) => [id, findGroup(results, scenario, id)])
      .filter(([, f]) => f)
      .map(([id, f]) => `${results.paths.find((p) => p.id === id)?.label ?? id} ${num(f.ratio, 3)}`)
      .join(', ');
    checks.push({
      name: `100 connections, POST 1 KiB, answers ${shape === 'length' ? 'with content-length' : 'chunked'}: tunnel ≥ ${TARGETS.headlineRatio} of direct`,
      target: `≥ ${TARGETS.headlineRatio}`,
      measured: g
        ? `${num(g.ratio, 3)} (${num(g.tunnel.reqPerSec)} vs ${num(g.direct.reqPerSec)} req/s, medians of ${g.runs} and ${g.directRuns} runs; paired ${num(g.pairedRatio, 3)})${floors ? `; floors in the same run: ${floors}` : ''}`
        : 'not measured',
      pass: g ? g.ratio >= TARGETS.headlineRatio : null,
    });
  }

  const t = results.tenants;
  if (t) {
    const med = (path) => median(t.runs.filter((r) => r.path === path && r.round > 0).map((r) => r.reqPerSec));
    const many = med(`${t.tunnels} tunnels`);
    const one = med('one tunnel');
    const direct = med('direct');
    checks.push({
      key: 'tenants',
      name: `${t.tunnels} tunnels × ${t.connectionsEach} connections: aggregate ≥ ${TARGETS.tenantsRatio} of one tunnel under the same load`,
      target: `≥ ${TARGETS.tenantsRatio}`,
      measured: t.error ? `not measured: ${t.error}` : `${num(many / one, 3)} (${num(many)} vs ${num(one)} req/s; direct ${num(direct)})`,
      pass: t.error || !(one > 0) ? null : many / one >= TARGETS.tenantsRatio,
    });
  } else checks.push({ key: 'tenants', name: `many tenants: aggregate ≥ ${TARGETS.tenantsRatio} of one tunnel`, target: `≥ ${TARGETS.tenantsRatio}`, measured: 'not measured (--tenants 0, or the phase was left out)', pass: null });

  const i = results.idle;
  if (i) {
    const connected = i.fleet?.connected ?? 0;
    const rss = Math.max(i.edgeRssAfterMiB ?? 0, i.edgeHwmMiB ?? 0);
    checks.push({
      key: 'idle',
      name: `${num(TARGETS.idleTunnels)} idle tunnels in ≤ ${TARGETS.idleEdgeRssMiB} MiB edge RSS`,
      target: `${num(TARGETS.idleTunnels)} connected, ≤ ${TARGETS.idleEdgeRssMiB} MiB`,
      measured: i.error
        ? `failed: ${i.error}`
        : `${num(connected)} of ${num(i.planned)} connected in ${num((i.fleet?.ms ?? 0) / 1000, 1)} s (${num(i.fleet?.perSecond)} tunnels/s); edge RSS ${num(i.edgeRssBeforeMiB, 1)} → ${num(i.edgeRssAfterMiB, 1)} MiB (peak ${num(i.edgeHwmMiB, 1)}), ${num(i.edgeKiBPerTunnel, 1)} KiB per tunnel`,
      pass: i.error ? false : i.planned < TARGETS.idleTunnels ? null : connected >= TARGETS.idleTunnels && rss <= TARGETS.idleEdgeRssMiB,
    });
  } else checks.push({ key: 'idle', name: `${num(TARGETS.idleTunnels)} idle tunnels in ≤ ${TARGETS.idleEdgeRssMiB} MiB edge RSS`, target: '', measured: 'not measured (--idle-tunnels 0, or the phase was left out)', pass: null });

  const bad = everythingBad(results);
  checks.push({
    key: 'errors',
    name: 'zero errors, timeouts or non-2xx anywhere (runs, warm-ups, probes, floor profile, open loop, https, tenants, idle tunnels, client logs)',
    target: '0',
    measured: bad.total === 0 ? `0 in ${results.runs.length} runs, ${results.probes.length} probes${results.floorProfile ? `, ${results.floorProfile.paths.length} floor-profile runs` : ''}${results.openloop ? `, ${results.openloop.runs.length} open-loop runs` : ''}${results.https ? `, ${results.https.runs.length} https runs` : ''}${t ? `, ${t.runs.length} tenant runs` : ''}${i ? `, ${num(i.spotCheck.tried)} idle-tunnel spot checks` : ''}` : bad.parts.join(', '),
    pass: bad.total === 0,
  });

  const crashed = Object.entries(results.processes).filter(([, p]) => p.crashed);
  checks.push({
    name: 'no process died during the run',
    target: 'none',
    measured: crashed.length === 0 ? (results.error ? `run failed: ${results.error.split('\n')[0]}` : 'none') : crashed.map(([name, p]) => `${name} (code ${p.exit?.code}, signal ${p.exit?.signal})`).join(', '),
    pass: crashed.length === 0 && !results.error,
  });
  return checks;
}

/**
 * Issue 25's table: the rows bench/e2e/summary.ts decides (from the summary; a file summarized before
 * issue 25 has none until `node dist/bench/e2e.js --resummarize FILE`), then issue 13's rows for the
 * guarantees issue 25 keeps (tenants, idle tunnels, zero errors), as issue 13 computes them.
 */
export function acceptance25(results, checks13) {
  const rows = (results.summary.acceptance25 ?? []).map((row) => ({ ...row }));
  if (rows.length === 0) rows.push({ target: 'throughput, CPU, one-connection, open-loop and HTTPS targets', measured: 'not measured (this results file was summarized before issue 25: --resummarize it)', ssh: '–', pass: null });
  for (const key of ['tenants', 'idle', 'errors']) {
    const check = checks13.find((c) => c.key === key);
    if (check) rows.push({ target: check.name, measured: check.measured, ssh: '–', pass: check.pass });
  }
  return rows;
}

function median(values) {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const mark = (pass) => (pass === true ? 'PASS' : pass === false ? 'FAIL' : 'n/a');

// ---------------------------------------------------------------------------------------------------------
// RESULTS.md.

function headlineRow(results, file, note, checks) {
  const tunnel = headlinePath(results);
  const g = findGroup(results, { method: 'POST', size: KIB, shape: 'length', connections: 100 }, tunnel);
  const probe = findProbe(results, 'undici', 'POST', 'length', tunnel);
  const edges = Object.entries(results.processes).filter(([name]) => name.startsWith('edge') && name !== 'edge-idle');
  const edgePeak = edges.length === 0 ? null : Math.max(...edges.map(([, p]) => Math.max(p.peakRssMiB ?? 0, p.hwmMiB ?? 0)));
  const passed = checks.filter((c) => c.pass === true).length;
  const decided = checks.filter((c) => c.pass !== null).length;
  const commit = results.source.commit === null ? '?' : `${results.source.commit.slice(0, 8)}${results.source.dirtyFiles.length > 0 ? '+dirty' : ''}`;
  return `| ${results.startedAt.slice(0, 16).replace('T', ' ')} | \`${commit}\` | ${note || '–'} | ${num(g?.direct.reqPerSec)} | ${num(g?.tunnel.reqPerSec)} | ${num(g?.ratio, 3)} | ${num(probe?.addedP50Us)} | ${num(probe?.p99Us)} | ${num(edgePeak, 1)} | ${passed}/${decided} | ${basename(file)} |`;
}

const HISTORY_HEADER = [
  '| Run (UTC) | Commit | Note | POST 1 KiB @100 direct req/s | tunnel req/s | ratio | probe +p50 µs | probe tunnel p99 µs | edge peak MiB | targets met | results file |',
  '| :--- | :--- | :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- |',
];

/** The new row with the note cell (the third) of the old one: a rerun without --note keeps its note. */
function keepNote(row, old) {
  const oldCells = old.split(' | ');
  const cells = row.split(' | ');
  if (oldCells.length === cells.length) cells[2] = oldCells[2];
  return cells.join(' | ');
}

function mergeHistory(existing, row, file, note) {
  let body = null;
  if (existing !== null) {
    const start = existing.indexOf(HISTORY_START);
    const end = existing.indexOf(HISTORY_END);
    if (start !== -1 && end > start) body = existing.slice(start + HISTORY_START.length, end).replace(/^\n+|\n+$/g, '');
    else if (existing.includes('\n## History')) body = existing.slice(existing.indexOf('\n## History') + '\n## History'.length).trim();
  }
  let lines = body === null || body === '' ? [...HISTORY_HEADER] : body.split('\n');
  // A rerun of the same results file replaces its own row; every other line stays as it was.
  const name = basename(file);
  const own = lines.findIndex((line) => line.startsWith('|') && line.includes(`| ${name} |`));
  if (own !== -1) lines[own] = note === undefined ? keepNote(row, lines[own]) : row;
  else {
    // The new row goes at the end of the first table (the run history); tables in the notes below it
    // (the tuning log may hold some) are left alone.
    const first = lines.findIndex((line) => line.startsWith('|'));
    if (first === -1) lines = [...lines, '', ...HISTORY_HEADER, row];
    else {
      let last = first;
      while (last + 1 < lines.length && lines[last + 1].startsWith('|')) last++;
      lines.splice(last + 1, 0, row);
    }
  }
  return lines.join('\n');
}

/** "edge 55 + client 83 = 138" from a group's CPU figures. */
function pathCpu(g) {
  const c = g.cpuUsPerRequest;
  const roles = Object.keys(c).filter((role) => !['target', 'runner', 'directTarget', 'directRunner', 'path'].includes(role));
  if (roles.length === 0) return '–';
  return roles.length === 1 ? `${roles[0]} ${num(c[roles[0]])}` : `${roles.map((role) => `${role} ${num(c[role])}`).join(' + ')} = **${num(c.path)}**`;
}

function render(results, file, checks, rows25, history) {
  const m = results.machine;
  const o = results.options;
  const out = [];
  const pathLabel = (id) => results.paths.find((p) => p.id === id)?.label ?? id;
  out.push('# Burrow benchmark results');
  out.push('');
  out.push(
    `Written by \`npm run bench:results\` (scripts/bench-results.mjs) from \`${relative(ROOT, file)}\`, the output of one ` +
      '`npm run bench` run (bench/e2e.ts). Everything above "History" is regenerated on each write; the History ' +
      'table keeps the headline numbers of every run written here, with notes on what changed.',
  );
  out.push('');
  out.push('## Machine and run');
  out.push('');
  const total = (new Date(results.finishedAt) - new Date(results.startedAt)) / 1000;
  out.push(`- Date: ${results.startedAt} → ${results.finishedAt} (${num(total / 60, 1)} min; phases, s: ${Object.entries(results.phasesS ?? {}).map(([name, s]) => `${name} ${num(s)}`).join(', ')})`);
  out.push(`- CPU: ${m.cpuModel}, ${m.cores} cores; RAM ${num(mib(m.ramBytes) / 1024, 1)} GiB; ${m.os}; Node ${m.node}`);
  out.push(
    `- Burrow: commit \`${results.source.commit ?? 'unknown'}\`` +
      (results.source.dirtyFiles.length > 0 ? ` plus ${results.source.dirtyFiles.length} uncommitted file(s): ${results.source.dirtyFiles.slice(0, 8).map((f) => `\`${f}\``).join(', ')}${results.source.dirtyFiles.length > 8 ? ', …' : ''}` : ' (clean)'),
  );
  out.push(
    `- Plan: ${o.durationS} s per autocannon run, ${o.repeat} round(s) of the 1 KiB POST @100 runs; probes ${o.probeRounds} round(s) of ${num(o.probeRequests)} requests per path, scenario and sender ` +
      `(curl half as many); ${o.tenants} tenants; ${num(o.idleTunnels)} idle tunnels${o.quick ? ' (--quick smoke run: not for comparisons)' : ''}`,
  );
  out.push(
    '- Paths: direct = load generator → target (Node `http`, own process). Tunnel = → edge → WebSocket → `burrow http` client → target. ' +
      'Floors, same target, same run: nginx → nginx = two Debian nginx (1.22) processes, one worker each, upstream keep-alive, no buffering either way, temp config on loopback ports (bench/e2e/nginx.ts); ' +
      'ssh -R = OpenSSH 9.2 (Debian), a private sshd on loopback and `ssh -N -R`, aes128-gcm, every public connection a channel of one TCP connection; its CPU is the sshd session process and ssh (bench/e2e/ssh.ts); ' +
      'two bare Node relays = two `net.Socket.pipe` processes (bench/e2e/relay.ts); minimal proxy = one process with uWS in front and an undici Pool behind (bench/e2e/proxy.ts), 1 KiB rows only (it gathers whole bodies).' +
      (results.floorsMissing ? ` **nginx was missing:** ${results.floorsMissing}.` : ''),
  );
  out.push(
    '- What shares what on 2 cores: everything shares both cores; nothing is pinned. The load generator (autocannon, the undici and Node http probes) runs in the runner process; curl is its own process. ' +
      'During a tunnel run the runner, target, edge and client (4 busy processes) compete for 2 cores, during a direct run only the runner and the target: so the ratios include the cost of the load generator on a shared core, as they always have here. ' +
      'The probes send one request at a time, so at most one process on the path is busy at once and the load generator waits while it runs. ' +
      'CPU µs per request is read per process from /proc/<pid>/stat (utime + stime, 10 ms ticks) over each run, so it does not depend on who shared a core. ' +
      'Child output is read as it comes (stdout and stderr of every child are drained continuously; the client logs to a file), so no child blocks on a full pipe.',
  );
  out.push(captureQuotaLine(results.captureQuota, results.warmups ?? []));
  const dropped = results.discarded?.length ?? 0;
  const droppedProbes = new Set((results.discardedProbes ?? []).map((p) => `${p.round} ${p.sender} ${p.method} ${p.shape}`)).size;
  out.push(
    `- Shared-machine guard: a group of runs (direct then every path) or a probe during which processes outside the benchmark or the hypervisor (steal) used more than ${o.maxOtherCpuPct}% of a core ` +
      `was run again (up to ${o.retries} time(s)); this run discarded ${dropped} run(s) and ${droppedProbes} probe(s) for that reason.`,
  );
  if (results.error) out.push(`- **The run failed:** ${results.error.split('\n')[0]}`);
  out.push('');

  out.push('## Acceptance (issue 13)');
  out.push('');
  out.push(table(['Target', 'Measured', 'Result'], checks.map((c) => [c.name, c.measured, `**${mark(c.pass)}**`]), ['l', 'l', 'l']));
  out.push('');

  out.push('## Acceptance (issue 25)');
  out.push('');
  out.push(
    'Issue 25\'s targets, each beside `ssh -R` in the same run (OpenSSH\'s sshd + ssh, aes128-gcm); Burrow is the tunnel with capture and inspector on. ' +
      '"not measured" where the phase (or `ssh -R`) did not run. The last three rows are issue 13\'s, computed as above.',
  );
  out.push('');
  out.push(table(['Target', 'Burrow', 'ssh -R (same run)', 'Result'], rows25.map((r) => [r.target, r.measured, r.ssh, `**${mark(r.pass)}**`]), ['l', 'l', 'l', 'l']));
  out.push('');

  out.push('## The matrix: every path beside direct');
  out.push('');
  out.push(
    'autocannon from the runner, one scenario at a time: a direct run, then each path (order rotated per round). Medians over the rounds. ' +
      '"of direct" = median req/s ÷ the median of the scenario\'s direct runs; "paired" = the median of each run ÷ the direct run of its group. ' +
      'CPU µs/req: CPU time each process on the path spent per completed request (from /proc), the target\'s, and the load generator\'s (autocannon in the runner, which shares the 2 cores with them). ' +
      'Bodies of up to 64 KiB are compared byte for byte with what they should be; 1 MiB answers by status and framing only (POST answers always carry the byte count the target read). ' +
      'autocannon latencies are whole milliseconds; the probes below have µs.',
  );
  out.push('');
  const groupsByScenario = new Map();
  for (const g of results.summary.groups) {
    if (!groupsByScenario.has(g.scenario)) groupsByScenario.set(g.scenario, []);
    groupsByScenario.get(g.scenario).push(g);
  }
  const rows = [];
  for (const [scenario, groups] of groupsByScenario) {
    const d = groups[0];
    rows.push([`**${scenario}**`, 'direct', d.directRuns, num(d.direct.reqPerSec), '', '', num(d.direct.bytesPerSec / 1e6, 1), `${num(d.direct.p50Ms)} / ${num(d.direct.p99Ms)}`, '–', num(d.cpuUsPerRequest.directTarget), num(d.cpuUsPerRequest.directRunner), '']);
    for (const g of groups) {
      rows.push([
        '',
        g.label,
        g.runs,
        num(g.tunnel.reqPerSec),
        g.kind === 'tunnel' ? `**${num(g.ratio, 3)}**` : num(g.ratio, 3),
        num(g.pairedRatio, 3),
        num(g.tunnel.bytesPerSec / 1e6, 1),
        `${num(g.tunnel.p50Ms)} / ${num(g.tunnel.p99Ms)}`,
        pathCpu(g),
        num(g.cpuUsPerRequest.target),
        num(g.cpuUsPerRequest.runner),
        g.errors + g.timeouts + g.non2xx + g.mismatches,
      ]);
    }
  }
  out.push(table(['Scenario', 'Path', 'n', 'req/s', 'of direct', 'paired', 'MB/s read', 'p50 / p99 ms', 'CPU µs/req on the path', 'target µs/req', 'load generator µs/req', 'Bad'], rows, ['l', 'l']));
  out.push('');
  // -- floor profile (issue 25) --
  out.push(...renderFloorProfile(results));
  // -- end floor profile --

  if (results.summary.probes.length > 0) {
    out.push('## One connection: added latency by sender');
    out.push('');
    out.push(
      'Sequential requests on one keep-alive connection per path, paths interleaved in blocks (100 requests; curl 250, one curl process per block with all its URLs, the first transfer of each opening the connection and not counted). ' +
        'undici and Node `http` are timed in the runner with `process.hrtime.bigint()` from the call to the last body byte; curl by itself (`%{time_total}`). ' +
        'Every answer is checked (status and body; curl: status and size) and every sender counts the connections it opened beyond the first ("new conns", 0 means every request reused its connection). ' +
        'µs, medians over the rounds; "+p50" and "+p99" are against direct in the same round with the same sender.',
    );
    out.push('');
    for (const sender of ['undici', 'node-http', 'curl']) {
      const list = results.summary.probes.filter((p) => p.sender === sender);
      if (list.length === 0) continue;
      out.push(`### ${SENDER_NAMES[sender]}`);
      out.push('');
      out.push(
        table(
          ['Scenario', 'Path', 'Samples', 'p50', 'p99', 'p99.9', '+p50', '+p99', 'Errors', 'New conns'],
          list.map((p) => [scenarioLabel(p), pathLabel(p.path), num(p.samples), num(p.p50Us), num(p.p99Us), num(p.p999Us), p.addedP50Us === null ? '' : signed(p.addedP50Us), p.addedP99Us === null ? '' : signed(p.addedP99Us), p.errors, p.newConnections]),
          ['l', 'l'],
        ),
      );
      out.push('');
    }
  }

  const open = results.summary.openloop;
  if (open) {
    const o25 = results.openloop;
    out.push('## Open loop: added latency at a fixed offered rate');
    out.push('');
    out.push(
      `${scenarioLabel(o25.scenario)}, every path offered the same constant rate: **${num(open.rate)} req/s**, half the tunnel's maximum of ${num(open.tunnelMaxReqPerSec)} req/s (${open.maxFrom}); ` +
        `${num(o25.warmupS, 1)} s warm-up then ${num(o25.durationS, 1)} s measured per path, direct first and the other paths rotated per round; medians over the rounds. ` +
        'The sender is bench/e2e/open-loop.ts, not autocannon: autocannon\'s `overallRate` is a per-second quota per connection (each connection sends closed-loop until its share of the second is used, then idles until a 1 s timer resets it), so a second\'s requests leave in a burst, and its correction charges a 1 ms expected interval from the time a request was written. ' +
        `Here request i is scheduled at start + i ÷ rate, sent from a 1 ms timer and on every completion by an undici Pool of up to ${o25.connections} connections, and its latency is **completion − scheduled time** (corrected for coordinated omission: a request sent late pays its wait). ` +
        '"lag p99" is how late the sender dispatched; a run that completed under 97 % of the offered rate is invalid and its row says so. The sender runs in the runner and shares the 2 cores; its CPU is in the table.' +
        (o25.sshSkipped ? ` ssh -R skipped: ${o25.sshSkipped}.` : '') +
        (o25.error ? ` **The phase failed:** ${o25.error}.` : ''),
    );
    out.push('');
    out.push(
      table(
        ['Path', 'Rounds (valid)', 'Achieved req/s', 'p50 µs', 'p99 µs', 'p99.9 µs', 'max µs', '+p50', '+p99', 'lag p99 µs', 'CPU µs/req on the path', 'sender µs/req', 'Bad'],
        open.paths.map((p) => [pathLabel(p.path), `${p.rounds} (${p.validRounds})`, num(p.achievedRate), num(p.p50Us), num(p.p99Us), num(p.p999Us), num(p.maxUs), p.addedP50Us === null ? '' : signed(p.addedP50Us), p.addedP99Us === null ? '' : `**${signed(p.addedP99Us)}**`, num(p.dispatchLagP99Us), num(p.cpuUsPerRequest.path), num(p.cpuUsPerRequest.runner), p.bad]),
        ['l'],
      ),
    );
    out.push('');
  }

  if ((results.summary.https ?? []).length > 0) {
    out.push('## HTTPS: TLS on the public side and wss to the client');
    out.push('');
    out.push(
      'A second edge (capture on) with `--tls-cert/--tls-key`, a throwaway certificate for localhost and *.localhost signed by a throwaway CA (openssl, as the tests make theirs), and its own `burrow http` client (inspector on) connecting with `--edge https://localhost:PORT --ca` (wss to the agent port). ' +
        'autocannon over https, one TLS session per connection kept for the run, from 4 loopback addresses × 25 connections (the edge admits 8 TLS handshakes at once per client address and 32 waiting, docs/security.md; latency percentiles of the 4 instances merged as an estimate). ' +
        'Each group: direct over **plain HTTP**, the TLS tunnel, the plain tunnel, nginx → nginx with TLS on both hops when the run has it (the front terminates HTTPS and speaks TLS to the back over kept-alive upstream connections with session reuse, the back speaks plain HTTP to the target: an encrypted C proxy pair, the floor for this target), two bare Node relays with TLS on both hops when the run has them (bench/e2e/relay.ts: the front terminates HTTPS with `node:tls` and speaks TLS to the back, the back plain TCP to the target, the same 4 × 25 connections as the TLS tunnel: what Node’s TLS costs with nothing of Burrow in it) and ssh -R (which always encrypts, between sshd and ssh only); "of direct" against that direct.' +
        (results.https?.error ? ` **The phase failed:** ${results.https.error}.` : ''),
    );
    out.push('');
    out.push(
      table(
        ['Scenario', 'Path', 'n', 'req/s', 'of direct (plain)', 'p50 / p99 ms', 'CPU µs/req on the path', 'target µs/req', 'load generator µs/req', 'Bad'],
        results.summary.https.map((g) => [g.scenario, g.label, g.runs, num(g.tunnel.reqPerSec), `**${num(g.ratio, 3)}**`, `${num(g.tunnel.p50Ms)} / ${num(g.tunnel.p99Ms)}`, pathCpu(g), num(g.cpuUsPerRequest.target), num(g.cpuUsPerRequest.runner), g.errors + g.timeouts + g.non2xx + g.mismatches]),
        ['l', 'l'],
      ),
    );
    out.push('');
  }

  const t = results.tenants;
  if (t) {
    out.push('## Many tenants');
    out.push('');
    out.push(
      `${t.tunnels} tunnels, each a real \`TunnelClient\` (src/client), all in one process ("fleet", no inspector), plus one more for the one-tunnel baseline, on the same edge as the rows above (capture on). ` +
        `The same load generator for every row: ${t.tunnels} autocannon instances in the runner × ${t.connectionsEach} connections, ${t.scenario}, ${t.durationS} s per run: ` +
        `direct (all to the target), one tunnel (all through tenant-0), ${t.tunnels} tunnels (instance i through tenant-i); a warm-up run of each tunnel shape first, not counted, and the order rotated per round. ` +
        (t.fleet ? `The fleet connected ${t.fleet.connected} tunnels in ${num(t.fleet.ms)} ms (${t.fleet.failed} failed); ${t.drops} dropped during the phase.` : '') +
        (t.error ? ` **${t.error}**` : '') +
        (() => {
          const g = findGroup(results, { method: 'POST', size: KIB, shape: 'length', connections: 100 }, headlinePath(results));
          return g ? ` For reference, the \`burrow http\` tunnel of the matrix (its own client process, inspector on) did ${num(g.tunnel.reqPerSec)} req/s at the same request with 100 connections from one autocannon.` : '';
        })(),
    );
    out.push('');
    out.push(
      table(
        ['Round', 'Path', 'req/s', 'CPU µs/req edge', 'fleet (all clients)', 'target', 'runner', 'Errors', 'T/O', 'Non-2xx', 'Wrong'],
        t.runs.map((r) => [r.round === 0 ? 'warm-up' : r.round, r.path, num(r.reqPerSec), num(r.cpuUsPerRequest.edge), num(r.cpuUsPerRequest.fleet), num(r.cpuUsPerRequest.target), num(r.cpuUsPerRequest.runner), r.errors, r.timeouts, r.non2xx, r.mismatches]),
        ['r', 'l'],
      ),
    );
    out.push('');
  }

  const i = results.idle;
  if (i) {
    out.push('## Idle tunnels');
    out.push('');
    const f = i.fleet;
    out.push(
      `A fresh edge (capture on, its own data directory, ${num(Math.ceil(i.planned / 25))} PRO accounts of 25 tunnels) and one fleet process connecting ${num(i.planned)} tunnels, ${i.concurrency} connects at a time, for at most ${num(i.deadlineS)} s; then held idle ${i.heldS} s, ` +
        `and one GET sent through each of ${i.spotCheck.tried} tunnels spread over the fleet. ` +
        `File descriptors: \`ulimit -n\` ${i.fdLimit.soft} soft / ${i.fdLimit.hard} hard${i.fdLimit.raised ? `, raised to ${i.fdLimit.children} for the edge and the fleet (sh -c 'ulimit -n …; exec …')` : ', enough for one socket per tunnel in each process: not raised'}.`,
    );
    out.push('');
    out.push(
      table(
        ['Figure', 'Value'],
        [
          ['tunnels connected', f ? `${num(f.connected)} of ${num(i.planned)} (${f.failed} failed, ${f.notTried} not tried)` : '–'],
          ['connect time, rate', f ? `${num(f.ms / 1000, 1)} s, **${num(f.perSecond)} tunnels/s**` : '–'],
          ['edge CPU per connect', `${num(i.edgeCpuMsPerConnect, 2)} ms`],
          ['edge RSS before → after', `${num(i.edgeRssBeforeMiB, 1)} → **${num(i.edgeRssAfterMiB, 1)} MiB** (VmHWM ${num(i.edgeHwmMiB, 1)})`],
          ['of it anonymous (heap, buffers; no LMDB file pages)', `${num(i.edgeAnonBeforeMiB, 1)} → ${num(i.edgeAnonAfterMiB, 1)} MiB`],
          ['edge RSS per tunnel', `**${num(i.edgeKiBPerTunnel, 1)} KiB**`],
          ['fleet RSS (all clients, one process)', `${num(i.fleetRssMiB, 1)} MiB`],
          ['drops while idle', i.drops],
          ['spot check', `${i.spotCheck.ok} of ${i.spotCheck.tried} answered 200${i.spotCheck.failures.length > 0 ? `: ${i.spotCheck.failures.join('; ')}` : ''}`],
          ...(f && f.errors.length > 0 ? [['connect errors', f.errors.map((e) => `${e.count}× ${e.message}`).join('; ')]] : []),
          ...(i.error ? [['error', i.error]] : []),
        ],
        ['l', 'l'],
      ),
    );
    out.push('');
  }

  const tcp = results.tcp;
  if (tcp) {
    out.push('## TCP tunnels');
    out.push('');
    out.push(
      `${num(tcp.mib)} MiB each way through one connection, then ${num(tcp.trips)} one-byte round trips on one open connection, to a local server in the runner: ` +
        `\`burrow tcp\` (a fresh edge with \`--tcp-ports\`, capture on) beside OpenSSH's \`ssh -R\` (a private sshd, aes128-gcm). docs/tcp.md has the 1 GiB run with memory.`,
    );
    out.push('');
    out.push(
      table(
        ['Path', 'public → local', 'local → public', '1-byte round trip p50 / p99'],
        tcp.paths.map((p) => [p.label, `**${num(p.uploadMiBs)} MiB/s**`, `**${num(p.downloadMiBs)} MiB/s**`, `${num(p.p50Us)} / ${num(p.p99Us)} µs`]),
        ['l', 'r', 'r', 'r'],
      ),
    );
    out.push('');
    const notes = [
      `Peak RSS after the transfers: edge ${tcp.peakRssMiB.edge ?? '–'} MiB, client ${tcp.peakRssMiB.client ?? '–'} MiB.`,
      ...(tcp.sshSkipped ? [`ssh -R skipped: ${tcp.sshSkipped}.`] : []),
      ...(tcp.error ? [`Error: ${tcp.error}.`] : []),
    ];
    out.push(notes.join(' '));
    out.push('');
  }

  out.push('## Every run');
  out.push('');
  out.push(
    'In the order they ran. CPU is percent of one core over the run; "ac" is the runner (autocannon); "other" what processes outside the benchmark used meanwhile; "steal" what the hypervisor gave other guests; "irq" interrupt work (mostly the benchmark\'s own loopback traffic).',
  );
  out.push('');
  out.push(
    table(
      ['#', 'Round', 'Scenario', 'Path', 'req/s', 'p50 ms', 'p99 ms', 'Err', 'T/O', 'Non-2xx / wrong', 'CPU % by process', 'ac CPU %', 'Other %', 'Steal %', 'irq %'],
      [...results.runs, ...(results.https?.runs ?? [])].sort((a, b) => a.seq - b.seq).map((r) => [
        r.seq,
        r.round,
        results.https?.runs.includes(r) ? `${r.scenario} (https phase)` : r.scenario,
        r.path,
        num(r.load.reqPerSec),
        r.load.latencyMs.p50,
        r.load.latencyMs.p99,
        r.load.errors,
        r.load.timeouts,
        r.load.non2xx + r.load.mismatches,
        Object.entries(r.procs).map(([role, p]) => `${role} ${num(p?.cpuPct)}`).join(', '),
        num(r.runnerCpuPct),
        num(r.otherCpuPct),
        num(r.stealCpuPct),
        num(r.interruptCpuPct),
      ]),
      ['r', 'r', 'l', 'l'],
    ),
  );
  out.push('');

  out.push('## Processes');
  out.push('');
  out.push(
    table(
      ['Process', 'Peak RSS MiB (sampled)', 'of it anonymous', 'VmHWM MiB', 'RSS at start → end MiB', 'Exit on SIGTERM'],
      Object.entries(results.processes).map(([name, p]) => {
        const series = results.series?.[name] ?? [];
        const first = series[0]?.[1];
        const last = series[series.length - 1]?.[1];
        const exit = p.exit === null ? '–' : p.crashed ? `**died during the run** (code ${p.exit.code}, signal ${p.exit.signal})` : p.exit.killed ? '**needed SIGKILL**' : `code ${p.exit.code}${p.exit.signal ? `, ${p.exit.signal}` : ''}`;
        return [name, num(p.peakRssMiB, 1), num(p.peakAnonMiB, 1), num(p.hwmMiB, 1), `${num(first, 1)} → ${num(last, 1)}`, exit];
      }),
      ['l'],
    ),
  );
  out.push('');

  const problems = [];
  for (const run of [...results.runs, ...(results.https?.runs ?? [])]) {
    const l = run.load;
    if (l.errors + l.timeouts + l.non2xx + l.mismatches > 0) {
      const codes = Object.entries(l.statusCodes).filter(([code]) => !code.startsWith('2')).map(([code, count]) => `${code}×${count}`).join(', ');
      problems.push(`- Run #${run.seq} (${run.scenario}, ${pathLabel(run.path)}): errors ${l.errors}, timeouts ${l.timeouts}, non-2xx ${l.non2xx}${codes ? ` (${codes})` : ''}, wrong bodies ${l.mismatches}${run.clientLog?.failed ? `; the client logged ${run.clientLog.failed} failed exchanges, e.g. \`${run.clientLog.sample[0]}\`` : ''}`);
    }
  }
  for (const p of results.probes) {
    if (p.result.errors > 0 || (p.result.newConnections ?? 0) > 0) problems.push(`- Probe round ${p.round}, ${p.sender}, ${scenarioLabel(p)}, ${pathLabel(p.path)}: ${p.result.errors} failed answers, ${p.result.newConnections ?? 0} connections opened beyond the first`);
  }
  const busyLimit = o.maxOtherCpuPct > 0 ? o.maxOtherCpuPct : 25;
  const noisy = results.runs.filter((r) => (r.otherCpuPct ?? 0) > busyLimit);
  if (noisy.length > 0) problems.push(`- Other processes used more than ${busyLimit}% of a core during ${noisy.length} of ${results.runs.length} runs (${noisy.slice(0, 12).map((r) => `#${r.seq} ${num(r.otherCpuPct)}%`).join(', ')}${noisy.length > 12 ? ', …' : ''}): those numbers are less trustworthy.`);
  const stolen = results.runs.filter((r) => (r.stealCpuPct ?? 0) > busyLimit);
  if (stolen.length > 0) problems.push(`- Steal over ${busyLimit}% of a core during ${stolen.length} of ${results.runs.length} runs (${stolen.slice(0, 12).map((r) => `#${r.seq} ${num(r.stealCpuPct)}%`).join(', ')}${stolen.length > 12 ? ', …' : ''}).`);
  for (const entry of results.otherClientLog ?? []) {
    if (entry.failed > 0) problems.push(`- ${entry.client} logged ${entry.failed} failed exchanges during ${entry.phase}, e.g. \`${entry.sample[0]}\``);
  }
  for (const r of results.openloop?.runs ?? []) {
    const x = r.result;
    if (!x.valid || x.errors + x.timeouts + x.non2xx + x.mismatches > 0) problems.push(`- Open loop round ${r.round}, ${pathLabel(r.path)}: ${x.valid ? '' : `invalid (${x.invalidReason}); `}errors ${x.errors}, timeouts ${x.timeouts}, non-2xx ${x.non2xx}, wrong bodies ${x.mismatches}`);
  }
  for (const w of results.warmups) {
    const l = w.load;
    if (l.errors + l.timeouts + l.non2xx + l.mismatches > 0) problems.push(`- Warm-up ${w.path} ${w.method} @${w.connections}: errors ${l.errors}, timeouts ${l.timeouts}, non-2xx ${l.non2xx}, wrong bodies ${l.mismatches}`);
  }
  for (const [name, p] of Object.entries(results.processes)) {
    const stderr = (p.stderrTail ?? '').trim();
    if (stderr !== '') problems.push(`- ${name} wrote to stderr: \`${stderr.split('\n').slice(-3).join(' ⏎ ').slice(0, 400)}\``);
  }
  out.push('## Problems seen in this run');
  out.push('');
  out.push(problems.length === 0 ? 'None: no errors, timeouts, non-2xx or wrong bodies, no process died, nothing unexpected on stderr.' : problems.join('\n'));
  out.push('');

  out.push('## History');
  out.push('');
  out.push('Headline numbers of each run written here: 1 KiB POST @100 connections with capture (and inspector) on (since issue 13: answers with content-length), and the undici 1-connection probe of the same. Add a note per tuning step with `npm run bench:results -- FILE --note "what changed and the profile finding behind it"`.');
  out.push('');
  out.push(HISTORY_START);
  out.push(history);
  out.push(HISTORY_END);
  out.push('');
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------------------
// The floor profile (issue 25; bench/e2e/floor-profile.ts): per process and request on every path, and the
// CPU profile of the edge and client by category.

const ALL_SYSCALLS = '(all)';

function topSyscalls(syscalls, count = 4) {
  if (!syscalls) return '–';
  return Object.entries(syscalls)
    .filter(([name]) => name !== ALL_SYSCALLS)
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, n]) => `${name} ${num(n, 2)}`)
    .join(', ');
}

/** "the tunnel's edge + client against sshd + ssh" lines: what the floor is, per scenario. */
function floorComparisons(results) {
  const list = results.summary.floorProfile ?? [];
  const lines = [];
  for (const scenario of results.floorProfile.scenarios) {
    const tunnel = list.find((c) => c.scenario === scenario && results.paths.find((p) => p.id === c.path)?.kind === 'tunnel');
    if (!tunnel) continue;
    const others = list.filter((c) => c.scenario === scenario && c !== tunnel);
    const against = (c) =>
      `${c.label}: ${num(c.cpuUs, 1)} µs (${num(tunnel.cpuUs / c.cpuUs, 1)}×)` +
      (c.syscalls === null || tunnel.syscalls === null ? '' : `, ${num(c.syscalls, 1)} syscalls (${num(c.writes, 1)} writes, ${num(c.reads, 1)} reads)`) +
      `, ${num(c.contextSwitches, 2)} context switches`;
    lines.push(
      `- ${scenario}: the tunnel's processes spend **${num(tunnel.cpuUs, 1)} µs** (user ${num(tunnel.userUs, 1)}, system ${num(tunnel.sysUs, 1)})` +
        (tunnel.syscalls === null ? '' : `, **${num(tunnel.syscalls, 1)} syscalls** (${num(tunnel.writes, 1)} writes, ${num(tunnel.reads, 1)} reads)`) +
        `, ${num(tunnel.contextSwitches, 2)} context switches per request; ${others.length > 0 ? others.map(against).join('; ') : 'no floor measured'}.`,
    );
  }
  return lines;
}

function renderFloorProfile(results) {
  const out = ['## Floor profile (issue 25)', ''];
  const f = results.floorProfile;
  if (!f) {
    out.push('Not measured (the `profile` phase was left out, or the results file is older than it).', '');
    return out;
  }
  out.push(
    `${f.scenarios.join(', ')}, in the same run as the rows above. Per path, after a warm-up: one ${num(f.durationS)} s autocannon run for CPU (user and system, /proc/<pid>/stat, every thread) and context switches ` +
      `(voluntary and involuntary, summed over /proc/<pid>/task/*/status), then a ${num(f.syscallDurationS)} s run with \`perf stat\` counting each process's syscalls (tracepoints, every thread), so the tracing does not inflate the CPU figures. ` +
      'Everything per completed request. "reads" are read, readv, recvfrom and recvmsg; "writes" write, writev, sendto and sendmsg. ' +
      (f.perfSkipped ? `**Syscalls were not counted:** ${f.perfSkipped}.` : ''),
  );
  out.push('');
  out.push(...floorComparisons(results), '');
  out.push(
    table(
      ['Scenario', 'Path', 'Process', 'req/s', 'user µs', 'sys µs', 'CPU µs', 'of it main thread', 'syscalls', 'reads', 'writes', 'vol. cs', 'invol. cs', 'most syscalls'],
      f.paths.flatMap((p) =>
        p.error
          ? [[p.scenario, p.label, `failed: ${p.error}`, '', '', '', '', '', '', '', '', '', '', '']]
          : p.processes.map((x) => [p.scenario, p.label, x.role, num(p.reqPerSec), num(x.userUs, 1), num(x.sysUs, 1), `**${num(x.cpuUs, 1)}**`, num(x.mainThreadUs, 1), num(x.syscalls?.[ALL_SYSCALLS], 2), num(x.reads, 2), num(x.writes, 2), num(x.voluntarySwitches, 2), num(x.involuntarySwitches, 2), topSyscalls(x.syscalls)]),
      ),
      ['l', 'l', 'l'],
    ),
  );
  out.push('');
  out.push('### Where the edge and the client spend it');
  out.push('');
  if (f.profileError) {
    out.push(`**No CPU profile:** ${f.profileError}`, '');
    return out;
  }
  if (f.profiles.length === 0) {
    out.push('No CPU profile in this run.', '');
    return out;
  }
  out.push(
    'Right after the tunnel\'s run above, per scenario, a fresh edge and `burrow http` client (capture and inspector on, the matrix\'s flags) under `node --cpu-prof`, a warm-up and one run, stopped with SIGINT so the profiles are written; ' +
      'the samples inside each run bucketed by self time (a native without a script counts where its JavaScript caller does; `writeBuffer`, `writev`, `write*String` are socket writes unless fs called them). ' +
      'Sample time is wall time (a preempted main thread keeps its sample), so each category is its share of the non-idle samples times the main thread\'s CPU per request from /proc. ' +
      'The profiler costs CPU: "inflation" is the profiled process\'s CPU per request (all threads) over the same role\'s figure in the table above (measured seconds before; load on the machine moves it too).',
  );
  out.push('');
  for (const p of f.profiles) {
    const biggest = p.categories.slice(0, 4).map((c) => `${c.category} ${num(c.us, 1)}`).join(', ');
    out.push(`- ${p.role}, ${p.scenario}: ${num(p.profiledMainThreadUs, 1)} µs on the main thread per request; most of it: ${biggest}; top function \`${p.top[0]?.functionName ?? '–'}\` ${num(p.top[0]?.us, 1)} µs.`);
  }
  out.push('');
  // One table per body size ("1 KiB @100"), its columns the roles and methods.
  const sizeOf = (scenario) => /(\d+ [KM]iB) (?:up|down), length (@\d+)$/.exec(scenario)?.slice(1).join(' ') ?? scenario;
  for (const size of [...new Set(f.profiles.map((p) => sizeOf(p.scenario)))]) {
    const profiles = f.profiles.filter((p) => sizeOf(p.scenario) === size);
    const columns = profiles.map((p) => `${p.role}, ${p.scenario.split(' ')[0]}`);
    const categories = [...new Set(profiles.flatMap((p) => p.categories.map((c) => c.category)))];
    const sortKey = (category) => -profiles.reduce((total, p) => total + (p.categories.find((c) => c.category === category)?.us ?? 0), 0);
    categories.sort((a, b) => sortKey(a) - sortKey(b));
    out.push(
      table(
        [`µs per request, ${size}`, ...columns],
        [
          ...categories.map((category) => [category, ...profiles.map((p) => num(p.categories.find((c) => c.category === category)?.us ?? 0, 1))]),
          ['**= main thread CPU under the profiler**', ...profiles.map((p) => `**${num(p.profiledMainThreadUs, 1)}**`)],
          ['non-idle sample time (wall)', ...profiles.map((p) => num(p.sampledUs, 1))],
          ['other threads under the profiler (lmdb writer, GC helpers, libuv pool)', ...profiles.map((p) => num(p.profiledCpuUs - p.profiledMainThreadUs, 1))],
          ['CPU under the profiler, all threads', ...profiles.map((p) => num(p.profiledCpuUs, 1))],
          ['CPU without the profiler (table above)', ...profiles.map((p) => num(p.unprofiledCpuUs, 1))],
          ['inflation by the profiler', ...profiles.map((p) => (p.inflation === null ? '–' : `${num(p.inflation, 2)}×`))],
          ['req/s profiled / unprofiled', ...profiles.map((p) => `${num(p.reqPerSec)} / ${num(p.unprofiledReqPerSec)}`)],
        ],
        ['l'],
      ),
    );
    out.push('');
  }
  for (const p of f.profiles) {
    out.push(`#### Top functions by self time: ${p.role}, ${p.scenario}`);
    out.push('');
    out.push(table(['Function', 'Where', 'Category', 'µs/req'], p.top.map((t) => [`\`${t.functionName}\``, t.where, t.category, num(t.us, 2)]), ['l', 'l', 'l']));
    out.push('');
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------

function main() {
  const { values, positionals } = parseArgs({
    options: {
      check: { type: 'boolean' },
      strict: { type: 'boolean' },
      note: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    allowPositionals: true,
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const file = resolve(positionals[0] ?? newestResults());
  const results = JSON.parse(readFileSync(file, 'utf8'));
  if (results.kind !== 'burrow-e2e-bench' || (results.version ?? 1) < 2) throw new Error(`${file} is not an end-to-end benchmark results file of version 2 (npm run bench after issue 13)`);
  const checks = checkAcceptance(results);
  const rows25 = acceptance25(results, checks);
  const failed = checks.some((c) => c.pass === false) || rows25.some((r) => r.pass === false);

  if (values.check) {
    process.stdout.write('\nAcceptance (issue 13):\n');
    for (const c of checks) process.stdout.write(`  ${mark(c.pass).padEnd(4)}  ${c.name}: ${c.measured}\n`);
    process.stdout.write('\nAcceptance (issue 25; ssh -R in the same run after "|"):\n');
    for (const r of rows25) process.stdout.write(`  ${mark(r.pass).padEnd(4)}  ${r.target}: ${r.measured}${r.ssh === '–' ? '' : ` | ssh -R ${r.ssh}`}\n`);
    return values.strict && failed ? 1 : 0;
  }

  const outPath = resolve(values.out ?? join(ROOT, 'bench', 'RESULTS.md'));
  const existing = existsSync(outPath) ? readFileSync(outPath, 'utf8') : null;
  const history = mergeHistory(existing, headlineRow(results, file, values.note, checks), file, values.note);
  writeFileSync(outPath, render(results, file, checks, rows25, history));
  const met = (list) => `${list.filter((c) => c.pass === true).length} of ${list.filter((c) => c.pass !== null).length}`;
  process.stdout.write(`wrote ${relative(process.cwd(), outPath) || outPath} from ${relative(process.cwd(), file)}: issue 13's targets ${met(checks)} met, issue 25's ${met(rows25)}\n`);
  return values.strict && failed ? 1 : 0;
}

try {
  process.exitCode = main();
} catch (error) {
  process.stderr.write(`bench-results: ${error.message}\n`);
  process.exitCode = 1;
}

/**
 * Whether every capturing edge of the run captured every exchange, or which ones met their plan's quota;
 * and whether the capturing tunnels' rings lapped before the rows: the warm-ups marked `ring-fill`
 * (uploads of 1 MiB) and `ring-settle` (small POSTs after them); in a file from before the mark, the
 * ring fill is the only warm-up at 10 connections, and there was no settling lap.
 */
export function captureQuotaLine(quota, warmups) {
  const marked = warmups.some((warmup) => warmup.purpose !== undefined);
  const lapped = warmups.filter((warmup) => (marked ? warmup.purpose === 'ring-fill' : warmup.connections === 10));
  const settled = warmups.filter((warmup) => warmup.purpose === 'ring-settle');
  const list = (records) => records.map((warmup) => `${warmup.path} ${num(warmup.load.requests)}`).join(', ');
  const settling =
    settled.length === 0
      ? ''
      : ` Then each lapped twice more with small POSTs (${list(settled)} of 1 KiB), so the first rows did not measure the 1 MiB captures' pages being freed.`;
  const laps =
    lapped.length === 0
      ? ' The capturing tunnels\' rings had not lapped before the rows: the first 1 MiB rows paid for the capture file growing.'
      : ` Before the rows each capturing tunnel's ring lapped once (${list(lapped)} uploads of 1 MiB), so captures were written over pages the capture file had, as on an edge that has run a while.${settling}`;
  return captureQuotaText(quota) + laps;
}

function captureQuotaText(quota) {
  if (quota === undefined) {
    return '- Capture quota: the plans\' defaults (a run from before `--plans`): an account at its quota (FREE 100 MiB) has new captures skipped, so the big-body "capture on" rows measured mostly skipped captures (bench/RESULTS.md\'s tuning log, session of 2026-11-29 03:58).';
  }
  const raised = `every Burrow edge that captures got \`--plans\` with a capture quota of ${quota.raisedTo} for both plans, beyond what its rings hold, so every exchange was captured`;
  if (quota.atDefault.length === 0) return `- Capture quota: ${raised}.`;
  return `- Capture quota: ${raised}, except ${quota.atDefault.map((name) => `\`${name}\``).join(', ')} (a build without \`--plans\`): at its plan's default quota (FREE 100 MiB) its account's new captures are skipped once the quota fills, which makes its big-body rows cheaper than a capture costs.`;
}
