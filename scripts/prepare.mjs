#!/usr/bin/env node
// npm's `prepare` (run by `npm install` and `npm ci` in the project): builds dist/ with TypeScript, a
// devDependency. An install that leaves devDependencies out (`npm ci --omit=dev`, or NODE_ENV=production)
// cannot build; rather than "tsc: not found", it says what to run (docs/deploy.md, "Running under systemd").
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
if (!existsSync(tsc)) {
  process.stderr.write(
    'burrow: the build (dist/) needs the devDependencies (TypeScript), and this install left them out.\n' +
      'For a production install, build with them, then remove them:\n' +
      '  npm ci --include=dev && npm prune --omit=dev\n' +
      '(docs/deploy.md, "Running under systemd").\n',
  );
  process.exit(1);
}
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
