/**
 * Throwaway certificates made with the machine's openssl: a CA and server certificates it signs (any
 * DNS names, a serial of our choosing, already expired if asked), for real TLS in tests.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Pem {
  cert: string;
  key: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA certificate and key in `dir`, named `name`.pem / `name`.key. */
export function makeCa(dir: string, name: string): Pem {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=Burrow test CA ${name}`], dir);
  return { cert, key };
}

/**
 * A server certificate for `names` (DNS subjectAltNames) signed by `ca`, or self-signed when `ca` is
 * null. `expired` makes one whose validity ended yesterday (openssl ca takes explicit dates).
 */
export function makeServerCert(dir: string, name: string, names: string[], ca: Pem | null, options: { serial?: number; expired?: boolean } = {}): Pem {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  const ext = join(dir, `${name}.ext`);
  const san = names.map((dnsName) => `DNS:${dnsName}`).join(',');
  writeFileSync(ext, `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n`);
  const csr = join(dir, `${name}.csr`);
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${names[0]}`], dir);
  const serial = String(options.serial ?? Math.floor(Math.random() * 2 ** 31));
  if (ca === null) {
    openssl(['x509', '-req', '-in', csr, '-signkey', key, '-out', cert, '-days', '1', '-set_serial', serial, '-extfile', ext], dir);
  } else if (options.expired === true) {
    // `openssl ca` is the one openssl 3.0 command that takes a start and end date.
    const database = join(dir, `${name}.index`);
    writeFileSync(database, '');
    // openssl reads the serial file as whole bytes: an even number of hex digits.
    const hex = BigInt(serial).toString(16);
    writeFileSync(join(dir, `${name}.serial`), `${hex.length % 2 === 0 ? hex : `0${hex}`}\n`);
    const config = join(dir, `${name}.cnf`);
    writeFileSync(
      config,
      [
        '[ca]',
        'default_ca = test',
        '[test]',
        `database = ${database}`,
        `new_certs_dir = ${dir}`,
        `serial = ${join(dir, `${name}.serial`)}`,
        'default_md = sha256',
        'policy = any',
        'unique_subject = no',
        '[any]',
        'commonName = supplied',
        '[ext]',
        `subjectAltName=${san}`,
        'basicConstraints=CA:FALSE',
        'extendedKeyUsage=serverAuth',
        '',
      ].join('\n'),
    );
    const day = 24 * 3600 * 1000;
    const stamp = (ms: number): string => new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
    openssl(
      ['ca', '-batch', '-config', config, '-name', 'test', '-cert', ca.cert, '-keyfile', ca.key, '-in', csr, '-out', cert, '-notext', '-extfile', config, '-extensions', 'ext',
        '-startdate', stamp(Date.now() - 3 * day), '-enddate', stamp(Date.now() - day)],
      dir,
    );
  } else {
    openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', serial, '-out', cert, '-days', '1', '-extfile', ext], dir);
  }
  return { cert, key };
}

/** NODE_OPTIONS for a CLI subprocess that must resolve *.burrow.test (test/wildcard-dns.ts). */
export function wildcardDnsEnv(): { NODE_OPTIONS: string } {
  const preload = fileURLToPath(new URL('./wildcard-dns.js', import.meta.url));
  return { NODE_OPTIONS: `--import=${preload}` };
}
