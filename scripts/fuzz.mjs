#!/usr/bin/env node
// `npm run fuzz`: build, then play 100,000 (or --count) rogue frame sequences against a live edge process
// (test/fuzz/protocol-fuzzer.ts). Every option: npm run fuzz -- --help.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
if (built.status !== 0) process.exit(built.status ?? 1);
const { main } = await import(new URL('../dist/test/fuzz/protocol-fuzzer.js', import.meta.url).href);
process.exit(await main(process.argv.slice(2)));
