#!/usr/bin/env node
// npm's `prepare` (run by `npm install` and `npm ci` in the project): builds dist/ with TypeScript, a
// devDependency. An install that leaves devDependencies out (`npm ci --omit=dev`, or NODE_ENV=production)
// cannot build; rather than "tsc: not found", it says what to run (docs/deploy.md, "Running under systemd").
// Then it mends lmdb-js's prebuilt native binary (src/store/lmdb-native.ts).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
if (result.status !== 0) process.exit(result.status ?? 1);

// lmdb-js's prebuilt binary overflows a heap block when a disk write fails (src/store/lmdb-native.ts):
// mend the known published builds of the pinned version, once per install.
const { lmdbPrebuiltDir, mendLmdbBinaries } = await import(pathToFileURL(join(root, 'dist', 'src', 'store', 'lmdb-native.js')).href);
// A mend that cannot be written (a read-only node_modules) does not fail the install: the edge warns at start.
try {
  const prebuilt = lmdbPrebuiltDir();
  for (const { path, before, after } of prebuilt === null ? [] : mendLmdbBinaries(prebuilt)) {
    if (before === 'published' && after === 'mended') process.stdout.write(`burrow: mended lmdb's native binary for failed disk writes: ${path}\n`);
    else if (after !== 'mended') process.stderr.write(`burrow: warning: could not mend lmdb's native binary ${path} (${after}); see src/store/lmdb-native.ts\n`);
  }
} catch (error) {
  process.stderr.write(`burrow: warning: could not mend lmdb's native binary: ${error.message}; see src/store/lmdb-native.ts\n`);
}
process.exit(0);
