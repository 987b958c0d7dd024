/**
 * Starts test/conformance/python_app.py (python3's http.server) on a free loopback port, serving the
 * files of `directory` under /files/.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT } from '../helpers.js';

export interface PythonApp {
  port: number;
  close(): Promise<void>;
}

export const PYTHON_APP = join(ROOT, 'test', 'conformance', 'python_app.py');

export async function startPythonApp(directory: string): Promise<PythonApp> {
  const child = spawn('python3', [PYTHON_APP, directory], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit');
  // A test process that dies leaves no server behind.
  const killOnExit = (): void => void child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));
  const lines = createInterface({ input: child.stdout });
  const port = await new Promise<number>((resolve, reject) => {
    lines.once('line', (line) => resolve(Number(line)));
    void exited.then(() => reject(new Error(`python_app.py exited before listening:\n${stderr}`)));
  });
  lines.close();
  return {
    port,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}
