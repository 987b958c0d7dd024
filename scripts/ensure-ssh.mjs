#!/usr/bin/env node
// `npm run bench` measures OpenSSH's reverse tunnel (`ssh -R`) beside Burrow (bench/e2e/ssh.ts): a private
// sshd as a child on a loopback port, never the system's service. On Linux with apt-get the Debian packages
// are installed when missing; anywhere else the row is skipped and says why.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { hasAptGet, installWithApt, packagePlan } from './debian-package.mjs';

export const SSHD = process.env.BURROW_SSHD ?? '/usr/sbin/sshd';
export const SSH = process.env.BURROW_SSH ?? '/usr/bin/ssh';

const HOW = 'install OpenSSH (Debian/Ubuntu: apt-get install openssh-server openssh-client) or point the benchmark at it with BURROW_SSHD and BURROW_SSH';

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const explicit = process.env.BURROW_SSHD !== undefined || process.env.BURROW_SSH !== undefined;
  for (const [pkg, binary] of [['openssh-client', SSH], ['openssh-server', SSHD]]) {
    const plan = packagePlan({ platform: process.platform, exists: existsSync(binary), explicit, aptGet: hasAptGet });
    if (plan === 'skip') console.error(`ensure-ssh: the ssh -R row will be skipped: no ${binary}; ${HOW}`);
    if (plan === 'apt') installWithApt('ensure-ssh', pkg, binary, HOW);
  }
}
