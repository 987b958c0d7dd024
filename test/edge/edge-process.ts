/**
 * An edge in a process of its own, started with options the CLI has no flag for (a plan's ring made
 * small), for tests that kill it with SIGKILL and start it again on the same data. It exits by itself
 * should the test process die without killing it (a test runner's timeout).
 */
import type { EdgeOptions } from '../../src/edge/server.js';
import { spawnNode, type SpawnedProcess } from '../helpers.js';

export function startEdgeProcess(options: Partial<EdgeOptions>, env: Record<string, string>): Promise<SpawnedProcess> {
  const script = `
    const { Edge } = await import(${JSON.stringify(new URL('../../src/edge/server.js', import.meta.url).href)});
    const edge = await Edge.start(${JSON.stringify(options)});
    process.stdout.write('listening on ' + edge.url + '\\n');
    setInterval(() => { if (process.ppid !== ${process.pid}) process.exit(1); }, 500).unref();
  `;
  return spawnNode(['--input-type=module', '-e', script], env, /listening on/);
}
