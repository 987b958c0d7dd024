/**
 * The layout shows the architecture (docs/architecture.md): a module imports only from its own layer or
 * the layers below it, and no module takes part in an import cycle (type-only imports aside, which vanish
 * when compiled). Read from the TypeScript sources.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers.js';

const SRC = join(ROOT, 'src');
/** Lowest first; files directly in src/ are shared by all. */
const LAYERS = ['protocol', 'http1', 'store', 'api', 'edge', 'client', 'inspector', 'cli'];

function layerOf(file: string): number {
  const top = relative(SRC, file).split('/')[0]!;
  const index = LAYERS.indexOf(top);
  return index === -1 ? -1 : index;
}

interface Import {
  target: string;
  typeOnly: boolean;
}

function sources(): string[] {
  return readdirSync(SRC, { recursive: true })
    .map(String)
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(SRC, file));
}

function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const found: Import[] = [];
  const pattern = /^\s*(import|export)\s+(type\s+)?[^'";]*?from\s+'(\.[^']+)'|import\('(\.[^']+)'\)/gm;
  for (const match of text.matchAll(pattern)) {
    const specifier = match[3] ?? match[4]!;
    const target = normalize(join(dirname(file), specifier.replace(/\.js$/, '.ts')));
    found.push({ target, typeOnly: match[2] !== undefined });
  }
  return found;
}

test('every module imports only from its own layer or lower ones', () => {
  const problems: string[] = [];
  for (const file of sources()) {
    const layer = layerOf(file);
    for (const { target } of importsOf(file)) {
      const targetLayer = layerOf(target);
      if (targetLayer > layer) problems.push(`${relative(SRC, file)} imports ${relative(SRC, target)} (${LAYERS[targetLayer]} is above ${layer === -1 ? 'shared' : LAYERS[layer]})`);
    }
  }
  assert.deepEqual(problems, []);
});

test('no runtime import cycles', () => {
  const graph = new Map<string, string[]>();
  for (const file of sources()) graph.set(file, importsOf(file).filter((edge) => !edge.typeOnly).map((edge) => edge.target));
  const state = new Map<string, 'visiting' | 'done'>();
  const cycles: string[] = [];
  const visit = (file: string, path: string[]): void => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'visiting') {
      cycles.push([...path.slice(path.indexOf(file)), file].map((entry) => relative(SRC, entry)).join(' -> '));
      return;
    }
    state.set(file, 'visiting');
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of graph.keys()) visit(file, []);
  assert.deepEqual(cycles, []);
});
