#!/usr/bin/env node
// `npm run bench:results [-- FILE] [--note TEXT]`: writes bench/RESULTS.md from an end-to-end benchmark
// results file (bench/out/e2e-*.json, the newest one by default): machine and date, the tables, the
// tunnel/direct ratios and the acceptance targets of issue 6 checked. The "History" section of an existing
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

/** The acceptance targets of issue 6. */
export const TARGETS = {
  headlineRatio: 0.35,
  addedP50Us: 150,
  tunnelP99Us: 1000,
  onOffRatio: 0.9,
  edgeRssMiB: 150,
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

function findGroup(results, method, connections, capture, inspect) {
  return results.summary.groups.find(
    (g) => g.method === method && g.connections === connections && g.capture === capture && (inspect === null ? g.inspect === null : g.inspect === inspect),
  );
}

/** The configuration the targets are stated for: capture on and, when it can be switched, inspector on. */
function headlineInspect(results) {
  return results.inspectFlag ? true : null;
}

/** Every check: { name, target, measured, pass (true/false/null when not measurable) }. */
export function checkAcceptance(results) {
  const checks = [];
  const { method, connections } = results.headline;
  const inspect = headlineInspect(results);
  const headline = findGroup(results, method, connections, true, inspect);
  const headlineName = `${method === 'POST' ? '1 KiB POST' : method} @${connections} conns`;

  checks.push({
    name: `${headlineName}: tunnel ≥ ${TARGETS.headlineRatio} of direct (capture on${inspect === null ? ', inspector not switchable' : ', inspector on'})`,
    target: `≥ ${TARGETS.headlineRatio}`,
    measured: headline
      ? `${num(headline.ratio, 3)} (${num(headline.tunnel.reqPerSec)} vs ${num(headline.direct.reqPerSec)} req/s, medians of ${headline.runs} tunnel and ${headline.directRuns ?? headline.runs} direct runs; paired ${num(headline.pairedRatio, 3)})`
      : 'not measured',
    pass: headline ? headline.ratio >= TARGETS.headlineRatio : null,
  });

  const headlinePath = headline?.path;
  for (const probeMethod of ['POST', 'GET']) {
    const probe = results.summary.probes.find((p) => p.method === probeMethod && p.path === headlinePath);
    const direct = results.summary.probes.find((p) => p.method === probeMethod && p.path === 'direct');
    if (!probe || !direct) continue;
    const label = probeMethod === 'POST' ? '1 KiB POST' : 'GET';
    checks.push({
      name: `1 connection, ${label}: added latency (tunnel p50 − direct p50) ≤ ${TARGETS.addedP50Us} µs`,
      target: `≤ ${TARGETS.addedP50Us} µs`,
      measured: `${num(probe.addedP50Us)} µs (${num(probe.p50Us)} vs ${num(direct.p50Us)} µs)`,
      pass: probe.addedP50Us <= TARGETS.addedP50Us,
    });
    checks.push({
      name: `1 connection, ${label}: tunnel p99 ≤ ${TARGETS.tunnelP99Us / 1000} ms`,
      target: `≤ ${TARGETS.tunnelP99Us} µs`,
      measured: `${num(probe.p99Us)} µs (p99.9 ${num(probe.p999Us)} µs)`,
      pass: probe.p99Us <= TARGETS.tunnelP99Us,
    });
  }

  const onOff = (name, a, b) => {
    if (!a || !b) {
      checks.push({ name, target: `each ≥ ${TARGETS.onOffRatio} of the other`, measured: 'not measured', pass: null });
      return;
    }
    const ratio = Math.min(a.tunnel.reqPerSec / b.tunnel.reqPerSec, b.tunnel.reqPerSec / a.tunnel.reqPerSec);
    const paired = Math.min(a.pairedRatio / b.pairedRatio, b.pairedRatio / a.pairedRatio);
    checks.push({
      name,
      target: `each ≥ ${TARGETS.onOffRatio} of the other`,
      measured: `${num(a.tunnel.reqPerSec)} vs ${num(b.tunnel.reqPerSec)} req/s → ${num(ratio, 3)} (from the paired ratios ${num(a.pairedRatio, 3)} vs ${num(b.pairedRatio, 3)}: ${num(paired, 3)})`,
      pass: ratio >= TARGETS.onOffRatio,
    });
  };
  onOff(`${headlineName}: capture on vs off${inspect === null ? '' : ' (inspector on)'}`, headline, findGroup(results, method, connections, false, inspect));
  if (results.inspectFlag) {
    onOff(`${headlineName}: inspector on vs off (capture on)`, headline, findGroup(results, method, connections, true, false));
  } else {
    checks.push({
      name: 'inspector on vs off',
      target: `each ≥ ${TARGETS.onOffRatio} of the other`,
      measured: '"burrow http" had no --no-inspect when this ran',
      pass: null,
    });
  }

  const bad = { errors: 0, timeouts: 0, non2xx: 0, mismatches: 0 };
  const badRuns = [];
  for (const run of results.runs) {
    const l = run.load;
    for (const key of Object.keys(bad)) bad[key] += l[key];
    if (l.errors + l.timeouts + l.non2xx + l.mismatches > 0) badRuns.push(`#${run.seq}`);
  }
  const probeErrors = results.probes.reduce((total, p) => total + p.result.errors, 0);
  const badTotal = bad.errors + bad.timeouts + bad.non2xx + bad.mismatches + probeErrors;
  checks.push({
    name: 'zero errors, timeouts, non-2xx (and wrong bodies) in every run',
    target: '0',
    measured:
      badTotal === 0
        ? `0 in ${results.runs.length} runs and ${results.probes.length} probes`
        : `errors ${bad.errors}, timeouts ${bad.timeouts}, non-2xx ${bad.non2xx}, wrong bodies ${bad.mismatches}, probe failures ${probeErrors}; runs ${badRuns.slice(0, 12).join(' ')}${badRuns.length > 12 ? ' …' : ''}`,
    pass: badTotal === 0,
  });

  const edges = Object.entries(results.processes).filter(([name]) => name.startsWith('edge'));
  const edgePeak = Math.max(...edges.map(([, p]) => Math.max(p.peakRssMiB ?? 0, p.hwmMiB ?? 0)));
  checks.push({
    name: `edge RSS < ${TARGETS.edgeRssMiB} MiB through the whole run`,
    target: `< ${TARGETS.edgeRssMiB} MiB`,
    measured: edges.length === 0 ? 'not measured' : edges.map(([name, p]) => `${name} ${num(Math.max(p.peakRssMiB ?? 0, p.hwmMiB ?? 0), 1)} MiB`).join(', '),
    pass: edges.length === 0 ? null : edgePeak < TARGETS.edgeRssMiB,
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

const mark = (pass) => (pass === true ? 'PASS' : pass === false ? 'FAIL' : 'n/a');

// ---------------------------------------------------------------------------------------------------------
// RESULTS.md.

function headlineRow(results, file, note, checks) {
  const inspect = headlineInspect(results);
  const { method, connections } = results.headline;
  const g = findGroup(results, method, connections, true, inspect);
  const probe = results.summary.probes.find((p) => p.method === 'POST' && p.path === g?.path) ?? results.summary.probes.find((p) => p.path === g?.path);
  const edges = Object.entries(results.processes).filter(([name]) => name.startsWith('edge'));
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

function render(results, file, checks, history) {
  const m = results.machine;
  const o = results.options;
  const out = [];
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
  out.push(`- Date: ${results.startedAt} → ${results.finishedAt}`);
  out.push(`- CPU: ${m.cpuModel}, ${m.cores} cores; RAM ${num(mib(m.ramBytes) / 1024, 1)} GiB; ${m.os}`);
  out.push(`- Node ${m.node}; autocannon (programmatic, in the runner process) and the probe share the machine with the target, edges and clients`);
  out.push(
    `- Burrow: commit \`${results.source.commit ?? 'unknown'}\`` +
      (results.source.dirtyFiles.length > 0 ? ` plus ${results.source.dirtyFiles.length} uncommitted file(s): ${results.source.dirtyFiles.slice(0, 8).map((f) => `\`${f}\``).join(', ')}${results.source.dirtyFiles.length > 8 ? ', …' : ''}` : ' (clean)'),
  );
  out.push(
    `- Plan: ${o.durationS} s per autocannon run, ${o.warmupS} s warm-up per path and method, ${o.repeat} round(s) of the headline scenario` +
      `${o.repeatAll ? ' (and of every scenario)' : ''}, connections ${o.connections.join('/')}, ${o.methods.join(' and ')}, probe ${num(o.probeRequests)} requests per path and method per round${o.quick ? ' (--quick smoke run)' : ''}`,
  );
  out.push(
    `- Paths: direct = autocannon → target (Node http, own process); tunnel = autocannon → edge → WebSocket → \`burrow http\` client → target. ` +
      `Capture off is a second edge started with \`--no-capture\`. ` +
      (results.inspectFlag ? 'Inspector off is a client started with `--no-inspect`.' : '`burrow http` had no `--no-inspect` yet, so the inspector dimension was not measured.'),
  );
  const dropped = results.discarded?.length ?? 0;
  const droppedProbes = new Set((results.discardedProbes ?? []).map((p) => `${p.round} ${p.method}`)).size;
  const stealGuarded = results.runs.some((r) => r.stealCpuPct !== undefined);
  if (o.maxOtherCpuPct !== undefined) out.push(
    `- Shared-machine guard: a direct/tunnel pair or probe during which processes outside the benchmark${stealGuarded ? ' or the hypervisor (steal)' : ''} used more than ${o.maxOtherCpuPct ?? '–'}% of a core ` +
      `was run again (up to ${o.retries ?? '–'} times); this run discarded ${dropped / 2} pair(s) and ${droppedProbes} probe(s) for that reason.`,
  );
  if (results.error) out.push(`- **The run failed:** ${results.error.split('\n')[0]}`);
  out.push('');

  out.push('## Acceptance (issue 6)');
  out.push('');
  out.push(table(['Target', 'Measured', 'Result'], checks.map((c) => [c.name, c.measured, `**${mark(c.pass)}**`]), ['l', 'l', 'l']));
  out.push('');

  out.push('## Tunnel vs direct');
  out.push('');
  out.push(
    'Medians over the repeats. Every tunnel run is preceded by a direct run of the same scenario; "Direct" is the median of all ' +
      'direct runs of the scenario, Ratio = median tunnel req/s ÷ that, and Paired the median of tunnel ÷ the direct run just ' +
      'before it (the two differ when the machine was disturbed). autocannon latencies are whole milliseconds; see the probe for µs. ' +
      'CPU is percent of one core, averaged over the run; CPU µs/req is the CPU time a process spent per completed request, ' +
      'which shows where the tunnel\'s cost goes (the direct target\'s figure is the baseline for a request handled once).',
  );
  out.push('');
  out.push(
    table(
      ['Scenario', 'Tunnel config', 'n', 'Direct req/s', 'Tunnel req/s', 'Ratio', 'Paired', 'Direct p50/p99 ms', 'Tunnel p50/p99 ms', '+mean ms', 'Edge CPU %', 'Client CPU %', 'CPU µs/req edge / client / target (direct target)', 'Edge peak MiB', 'Bad'],
      results.summary.groups.map((g) => [
        g.scenario,
        g.label.replace(/^tunnel /, ''),
        g.runs,
        num(g.direct.reqPerSec),
        num(g.tunnel.reqPerSec),
        `**${num(g.ratio, 3)}**`,
        num(g.pairedRatio, 3),
        `${num(g.direct.p50Ms)} / ${num(g.direct.p99Ms)}`,
        `${num(g.tunnel.p50Ms)} / ${num(g.tunnel.p99Ms)}`,
        signed(g.addedMeanMs, 2),
        num(g.edgeCpuPct),
        num(g.clientCpuPct),
        g.cpuUsPerRequest ? `${num(g.cpuUsPerRequest.edge)} / ${num(g.cpuUsPerRequest.client)} / ${num(g.cpuUsPerRequest.target)} (${num(g.cpuUsPerRequest.directTarget)})` : '–',
        num(g.edgePeakRssMiB, 1),
        g.errors + g.timeouts + g.non2xx + g.mismatches,
      ]),
      ['l', 'l'],
    ),
  );
  out.push('');

  if (results.summary.probes.length > 0) {
    out.push('## Latency probe (1 connection)');
    out.push('');
    out.push(
      'Sequential requests on one keep-alive connection (undici Client in the runner), timed with `process.hrtime.bigint()` ' +
        'from the call to the last body byte; paths interleaved in blocks of 100. µs, medians over rounds.',
    );
    out.push('');
    out.push(
      table(
        ['Method', 'Path', 'Samples', 'p50', 'p99', 'p99.9', 'mean', '+p50 vs direct', 'Errors'],
        results.summary.probes.map((p) => [p.method === 'POST' ? 'POST 1 KiB' : p.method, configLabel(results, p.path), num(p.samples), num(p.p50Us), num(p.p99Us), num(p.p999Us), num(p.meanUs), p.addedP50Us === null ? '' : signed(p.addedP50Us), p.errors]),
        ['l', 'l'],
      ),
    );
    out.push('');
  }

  if (results.hops) {
    const h = results.hops;
    // Older results files have no proxy row and no CPU figures.
    const hopPaths = ['direct', 'one relay', 'one-hop proxy', 'two relays'].filter((path) => h.medianReqPerSec[path] !== undefined);
    const hasProxy = hopPaths.includes('one-hop proxy');
    out.push(hasProxy ? '## The floor: bare Node relays and a minimal proxy (same run)' : '## The floor: bare Node relays (same run)');
    out.push('');
    out.push(
      'The same target measured directly and through one and two bare Node TCP relay processes (`bench/e2e/relay.ts`: ' +
        '`net.Socket.pipe` both ways, no HTTP, no framing, nothing of Burrow)' +
        (hasProxy
          ? ', and through a minimal one-hop HTTP reverse proxy made of Burrow\'s stack (`bench/e2e/proxy.ts`: the native uWS server in front, ' +
            'an undici Pool behind, bodies gathered, no tunnel, no capture, no inspector)'
          : '') +
        ', after the runs above. A tunnel puts two processes (edge, client) on the path: the two-relay rows are what those cost here before doing any work of their own' +
        (hasProxy ? '; the proxy row is what parsing HTTP once on each side costs with this stack, in one process' : '') +
        `. Probe: ${num(h.plan.requests)} requests per path and method, interleaved in blocks of ${h.plan.block}; load: ` +
        `${h.plan.rounds} round(s) of ${h.plan.durationS} s, 1 KiB POST @${h.plan.connections}, medians. No shared-machine guard in this phase.`,
    );
    out.push('');
    const rows = [];
    for (const path of hopPaths) {
      const get = h.probe.GET?.[path];
      const post = h.probe.POST?.[path];
      const ratio = h.ratio[path];
      const cpu = h.cpuUsPerRequest?.[path];
      const row = [
        path,
        get ? `${num(get.p50)} / ${num(get.p99)}` : '–',
        get && path !== 'direct' && h.probe.GET?.direct ? signed(get.p50 - h.probe.GET.direct.p50) : '',
        post ? `${num(post.p50)} / ${num(post.p99)}` : '–',
        post && path !== 'direct' && h.probe.POST?.direct ? signed(post.p50 - h.probe.POST.direct.p50) : '',
        num(h.medianReqPerSec[path]),
        ratio === null ? '' : `**${num(ratio, 3)}**`,
      ];
      if (h.cpuUsPerRequest) row.push(cpu ? `${path === 'direct' ? '–' : num(cpu.hops)} / ${num(cpu.target)}` : '–');
      row.push(h.bad[path]);
      rows.push(row);
    }
    const headers = ['Path', 'GET p50 / p99 µs', '+p50', 'POST 1 KiB p50 / p99 µs', '+p50', 'POST 1 KiB @100 req/s', 'of direct'];
    if (h.cpuUsPerRequest) headers.push('CPU µs/req on the path / target');
    headers.push('Bad');
    out.push(table(headers, rows, ['l']));
    out.push('');
    const tunnel = findGroup(results, 'POST', h.plan.connections, true, headlineInspect(results));
    if (h.cpuUsPerRequest && tunnel?.cpuUsPerRequest) {
      const c = tunnel.cpuUsPerRequest;
      out.push(
        `For comparison, the tunnel at 1 KiB POST @100 in this run (capture and inspector on): edge ${num(c.edge)} + client ${num(c.client)} = ` +
          `${num(c.edge + c.client)} µs of CPU per request on the path, target ${num(c.target)}.`,
      );
      out.push('');
    }
  }

  out.push('## Every run');
  out.push('');
  const hasSteal = results.runs.some((r) => r.stealCpuPct !== undefined);
  out.push(
    'In the order they ran. RSS is the peak sampled during the run (every 200 ms from /proc), CPU the mean over it; "ac" is the runner (autocannon); "other" is what the rest of the machine\'s processes used meanwhile (all process CPU from /proc/stat minus every process of the benchmark); high values mean the run shared the cores with foreign work.' +
      (hasSteal
        ? ' "Steal" is CPU time the hypervisor gave other guests while this one wanted it; "irq" is interrupt work (irq + softirq), mostly the benchmark\'s own loopback traffic, which the kernel charges to no process.'
        : ' (This results file predates the split: its "other" also counts steal and interrupt work, including the benchmark\'s own loopback traffic.)'),
  );
  out.push('');
  out.push(
    table(
      ['#', 'Round', 'Scenario', 'Path', 'req/s', 'p50 ms', 'p99 ms', 'Err', 'T/O', 'Non-2xx', 'Edge MiB', 'Edge CPU %', 'Client MiB', 'Client CPU %', 'Target CPU %', 'ac CPU %', 'Other CPU %', ...(hasSteal ? ['Steal %', 'irq %'] : [])],
      results.runs.map((r) => [
        r.seq,
        r.round,
        r.scenario,
        r.path,
        num(r.load.reqPerSec),
        r.load.latencyMs.p50,
        r.load.latencyMs.p99,
        r.load.errors,
        r.load.timeouts,
        r.load.non2xx + r.load.mismatches,
        num(r.procs.edge?.peakRssMiB, 1),
        num(r.procs.edge?.cpuPct),
        num(r.procs.client?.peakRssMiB, 1),
        num(r.procs.client?.cpuPct),
        num(r.procs.target?.cpuPct),
        num(r.runnerCpuPct),
        num(r.otherCpuPct),
        ...(hasSteal ? [num(r.stealCpuPct), num(r.interruptCpuPct)] : []),
      ]),
      ['r', 'r', 'l', 'l'],
    ),
  );
  out.push('');

  out.push('## Processes');
  out.push('');
  out.push(
    table(
      ['Process', 'Peak RSS MiB (sampled)', 'VmHWM MiB', 'RSS at start → end MiB', 'Exit on SIGTERM'],
      Object.entries(results.processes).map(([name, p]) => {
        const series = results.series?.[name] ?? [];
        const first = series[0]?.[1];
        const last = series[series.length - 1]?.[1];
        const exit = p.exit === null ? '–' : p.crashed ? `**died during the run** (code ${p.exit.code}, signal ${p.exit.signal})` : p.exit.killed ? '**needed SIGKILL**' : `code ${p.exit.code}${p.exit.signal ? `, ${p.exit.signal}` : ''}`;
        return [name, num(p.peakRssMiB, 1), num(p.hwmMiB, 1), `${num(first, 1)} → ${num(last, 1)}`, exit];
      }),
      ['l'],
    ),
  );
  out.push('');

  const problems = [];
  for (const run of results.runs) {
    const l = run.load;
    if (l.errors + l.timeouts + l.non2xx + l.mismatches > 0) {
      const codes = Object.entries(l.statusCodes).filter(([code]) => !code.startsWith('2')).map(([code, count]) => `${code}×${count}`).join(', ');
      problems.push(`- Run #${run.seq} (${run.scenario}, ${configLabel(results, run.path)}): errors ${l.errors}, timeouts ${l.timeouts}, non-2xx ${l.non2xx}${codes ? ` (${codes})` : ''}, wrong bodies ${l.mismatches}${run.clientLog?.failed ? `; the client logged ${run.clientLog.failed} failed exchanges, e.g. \`${run.clientLog.sample[0]}\`` : ''}`);
    }
  }
  const busyLimit = results.options.maxOtherCpuPct > 0 ? results.options.maxOtherCpuPct : 25;
  const noisy = results.runs.filter((r) => (r.otherCpuPct ?? 0) > busyLimit);
  if (noisy.length > 0) problems.push(`- Other processes used more than ${busyLimit}% of a core during ${noisy.length} of ${results.runs.length} runs (${noisy.slice(0, 12).map((r) => `#${r.seq} ${num(r.otherCpuPct)}%`).join(', ')}${noisy.length > 12 ? ', …' : ''}), kept after ${results.options.retries ?? 0} reruns: those numbers are less trustworthy.`);
  const stolen = results.runs.filter((r) => (r.stealCpuPct ?? 0) > busyLimit);
  if (stolen.length > 0) problems.push(`- The hypervisor took more than ${busyLimit}% of a core for other guests (steal) during ${stolen.length} of ${results.runs.length} runs (${stolen.slice(0, 12).map((r) => `#${r.seq} ${num(r.stealCpuPct)}%`).join(', ')}${stolen.length > 12 ? ', …' : ''}), kept after ${results.options.retries ?? 0} reruns: those numbers are less trustworthy.`);
  for (const entry of results.otherClientLog ?? []) {
    if (entry.failed > 0) problems.push(`- ${entry.client} logged ${entry.failed} failed exchanges during ${entry.phase}, e.g. \`${entry.sample[0]}\``);
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
  out.push(problems.length === 0 ? 'None: no errors, timeouts, non-2xx or wrong bodies, no process died, nothing on stderr.' : problems.join('\n'));
  out.push('');

  out.push('## History');
  out.push('');
  out.push('Headline numbers of each run written here: 1 KiB POST @100 connections with capture (and inspector) on, and the 1-connection probe. Add a note per tuning step with `npm run bench:results -- FILE --note "what changed and the profile finding behind it"`.');
  out.push('');
  out.push(HISTORY_START);
  out.push(history);
  out.push(HISTORY_END);
  out.push('');
  return out.join('\n');
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
  if (results.kind !== 'burrow-e2e-bench') throw new Error(`${file} is not an end-to-end benchmark results file`);
  const checks = checkAcceptance(results);
  const failed = checks.some((c) => c.pass === false);

  if (values.check) {
    process.stdout.write('\nAcceptance (issue 6):\n');
    for (const c of checks) process.stdout.write(`  ${mark(c.pass).padEnd(4)}  ${c.name}: ${c.measured}\n`);
    return values.strict && failed ? 1 : 0;
  }

  const outPath = resolve(values.out ?? join(ROOT, 'bench', 'RESULTS.md'));
  const existing = existsSync(outPath) ? readFileSync(outPath, 'utf8') : null;
  const history = mergeHistory(existing, headlineRow(results, file, values.note, checks), file, values.note);
  writeFileSync(outPath, render(results, file, checks, history));
  process.stdout.write(`wrote ${relative(process.cwd(), outPath) || outPath} from ${relative(process.cwd(), file)}: ${checks.filter((c) => c.pass === true).length} of ${checks.filter((c) => c.pass !== null).length} targets met\n`);
  return values.strict && failed ? 1 : 0;
}

try {
  process.exitCode = main();
} catch (error) {
  process.stderr.write(`bench-results: ${error.message}\n`);
  process.exitCode = 1;
}
