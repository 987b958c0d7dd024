/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for the tests of /metrics:
 * every line is checked against the format's grammar, every sample must belong to a family declared by
 * `# TYPE` before it, and histograms must be cumulative with `+Inf` equal to `_count`.
 * https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
 */
import assert from 'node:assert/strict';

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL_NAME = '[a-zA-Z_][a-zA-Z0-9_]*';
/** A label value: any character but `"`, `\` and newline, or the escapes \\, \" and \n. */
const LABEL_VALUE = '"(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
/** Go's ParseFloat, as Prometheus reads values: decimals, exponents, NaN and ±Inf in any case. */
const FLOAT = '[+-]?(?:(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF]|[nN][aA][nN])';

const HELP_LINE = new RegExp(`^# HELP (${NAME}) ((?:[^\\\\\\n]|\\\\[\\\\n])*)$`);
const TYPE_LINE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SAMPLE_LINE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL_NAME}=${LABEL_VALUE}(?:,${LABEL_NAME}=${LABEL_VALUE})*,?)?)\\})? (${FLOAT})(?: (-?[0-9]+))?$`);
const LABEL = new RegExp(`(${LABEL_NAME})=(${LABEL_VALUE})`, 'g');

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  types: Map<string, string>;
  samples: Sample[];
}

function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return undefined;
}

/** Parses `text`, failing the test on the first line that is not valid exposition format. */
export function parsePrometheusText(text: string): Exposition {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a newline');
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples: Sample[] = [];
  const lines = text.slice(0, -1).split('\n');
  for (const [index, line] of lines.entries()) {
    const where = `line ${index + 1}: ${JSON.stringify(line)}`;
    if (line === '') continue;
    if (line.startsWith('#')) {
      const help = HELP_LINE.exec(line);
      if (help !== null) {
        assert.ok(!helps.has(help[1]!), `${where}: a second HELP for ${help[1]}`);
        helps.add(help[1]!);
        continue;
      }
      const type = TYPE_LINE.exec(line);
      if (type !== null) {
        assert.ok(!types.has(type[1]!), `${where}: a second TYPE for ${type[1]}`);
        assert.ok(!samples.some((sample) => familyOf(sample.name, new Map([[type[1]!, type[2]!]])) !== undefined), `${where}: TYPE after its samples`);
        types.set(type[1]!, type[2]!);
        continue;
      }
      assert.ok(!/^# (HELP|TYPE) /.test(line), `${where}: a malformed HELP or TYPE line`);
      continue;
    }
    const sample = SAMPLE_LINE.exec(line);
    assert.ok(sample !== null, `${where}: not a sample line`);
    const labels: Record<string, string> = {};
    for (const [, name, quoted] of (sample[2] ?? '').matchAll(LABEL)) {
      assert.ok(!(name! in labels), `${where}: label ${name} twice`);
      labels[name!] = quoted!.slice(1, -1).replace(/\\(.)/g, (_, escaped: string) => (escaped === 'n' ? '\n' : escaped));
    }
    const family = familyOf(sample[1]!, types);
    assert.ok(family !== undefined, `${where}: no TYPE line declares the family of ${sample[1]}`);
    const raw = sample[3]!.toLowerCase();
    const value = raw.endsWith('nan') ? NaN : raw.endsWith('inf') ? (raw.startsWith('-') ? -Infinity : Infinity) : Number(sample[3]);
    samples.push({ name: sample[1]!, labels, value });
  }
  checkHistograms(types, samples);
  return { types, samples };
}

function checkHistograms(types: Map<string, string>, samples: Sample[]): void {
  for (const [name, type] of types) {
    if (type !== 'histogram') continue;
    // One series per set of labels besides `le` (nodejs_gc_duration_seconds has one per GC kind).
    const series = new Map<string, { buckets: Sample[]; count: Sample | undefined }>();
    const keyOf = (labels: Record<string, string>): string => JSON.stringify(Object.entries(labels).filter(([label]) => label !== 'le').sort());
    for (const sample of samples) {
      if (sample.name !== `${name}_bucket` && sample.name !== `${name}_count`) continue;
      const key = keyOf(sample.labels);
      const entry = series.get(key) ?? { buckets: [], count: undefined };
      if (sample.name === `${name}_count`) entry.count = sample;
      else entry.buckets.push(sample);
      series.set(key, entry);
    }
    for (const { buckets, count } of series.values()) {
      if (count === undefined) continue;
      let previous = 0;
      for (const bucket of buckets) {
        assert.ok(bucket.labels.le !== undefined, `${name}_bucket without le`);
        assert.ok(bucket.value >= previous, `${name} buckets are cumulative`);
        previous = bucket.value;
      }
      assert.equal(buckets.at(-1)?.labels.le, '+Inf', `${name} ends with the +Inf bucket`);
      assert.equal(buckets.at(-1)?.value, count.value, `${name}: +Inf bucket equals _count`);
    }
  }
}

/** The value of one sample (0 when absent: counters that never moved may be omitted). */
export function sampleValue(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = exposition.samples.find(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  return found?.value ?? 0;
}
