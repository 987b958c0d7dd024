#!/usr/bin/env node
// The CLI is compiled TypeScript; `npm install` builds it (the `prepare` script).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('burrow: the build is missing (dist/). Run `npm install` or `npm run build` in the project first.\n');
  process.exit(1);
}
await import(entry.href);
