// Installing a Debian package that a test needs (nginx, redis-server), shared by scripts/ensure-*.mjs: on
// Linux with apt-get, as root or through sudo; never starts a service (the tests run their own child).
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

/** apt-get is there and usable: as root, or through sudo. */
export function hasAptGet() {
  const found = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
  return found('apt-get') && (process.getuid?.() === 0 || found('sudo'));
}

/**
 * What to do: 'ready' (the binary is there), 'apt' (Linux with a usable apt-get: install the Debian
 * package) or 'skip' (anywhere else, or an explicit path that does not exist: the test is skipped, saying why).
 */
export function packagePlan({ platform, exists, explicit, aptGet }) {
  if (exists) return 'ready';
  if (explicit || platform !== 'linux' || !aptGet()) return 'skip';
  return 'apt';
}

/** Installs `pkg` with apt-get (an `apt-get update` first only when the plain install fails); exits 1 when `binary` is still missing. */
export function installWithApt(script, pkg, binary, how) {
  console.log(`${script}: ${binary} is missing; installing Debian's ${pkg} package (no service is started by the tests)`);
  const sudo = process.getuid?.() === 0 ? [] : ['sudo'];
  const apt = (args) =>
    spawnSync(sudo.length > 0 ? 'sudo' : 'apt-get', [...(sudo.length > 0 ? ['apt-get'] : []), ...args], {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  let result = apt(['install', '-y', '--no-install-recommends', pkg]);
  if (result.status !== 0) {
    apt(['update']);
    result = apt(['install', '-y', '--no-install-recommends', pkg]);
  }
  if (result.status !== 0 || !existsSync(binary)) {
    console.error(`${script}: could not install ${pkg}: ${how}`);
    process.exit(1);
  }
}
