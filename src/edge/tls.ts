/**
 * HTTPS and wss:// in the edge itself, on both listeners, from the same PEM files: SNI for more names,
 * the TLS 1.2 cipher rules, and certificates reloaded (SIGHUP) without dropping a connection.
 *
 * The public listener (node:tls, `PublicTls`): a reload builds new secure contexts, which new
 * connections get; established ones keep theirs.
 *
 * The agent listener (uWebSockets.js, `TlsListener`): uWS cannot swap the certificate of a running SSL
 * context, and removing an SNI name frees the routes that live connections on it still use. So a reload
 * builds a new SSLApp from the new files, binds it to the same port beside the old one (SO_REUSEPORT,
 * which is why that port is bound that way) and closes only the old listen socket: new connections get
 * the new certificate, established ones (tunnels) stay on the old app until they end.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import { listenPort, uws, type TemplatedApp, type us_listen_socket } from '../uws.js';

/** A certificate (full chain, PEM) and its private key (PEM). */
export interface CertificateFiles {
  certFile: string;
  keyFile: string;
}

/** Another name served with its own certificate, chosen by SNI (a wildcard like `*.example.org` works). */
export interface ServerName extends CertificateFiles {
  name: string;
}

export interface TlsOptions extends CertificateFiles {
  serverNames?: ServerName[];
}

/**
 * TLS 1.2 suites with forward secrecy and AEAD only (Mozilla's "intermediate" list); TLS 1.3 keeps
 * OpenSSL's own suites. Nothing here negotiates below TLS 1.2, so SSLv3, TLS 1.0 and 1.1 are refused.
 */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** What a certificate file holds, for the start-up line and the reload log. */
export interface CertificateSummary {
  subject: string;
  names: string[];
  serial: string;
  validTo: string;
}

/**
 * Reads and checks a certificate and key before uWS sees them: uWS only says "construction failed",
 * where an operator needs to know which file is wrong and why.
 */
export function checkCertificate(files: CertificateFiles): CertificateSummary {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(readFileSync(files.certFile));
  } catch (error) {
    throw new Error(`cannot use the certificate ${files.certFile}: ${describe(error)}`);
  }
  let key;
  try {
    key = createPrivateKey(readFileSync(files.keyFile));
  } catch (error) {
    throw new Error(`cannot use the key ${files.keyFile}: ${describe(error)}`);
  }
  if (!certificate.checkPrivateKey(key)) throw new Error(`the key ${files.keyFile} does not belong to the certificate ${files.certFile}`);
  if (Date.parse(certificate.validTo) < Date.now()) throw new Error(`the certificate ${files.certFile} expired on ${certificate.validTo}`);
  const names = (certificate.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4));
  return { subject: certificate.subject.replace(/\n/g, ', '), names, serial: certificate.serialNumber, validTo: certificate.validTo };
}

function describe(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EACCES') return 'permission denied';
  return (error as Error).message;
}

function appOptions(files: CertificateFiles): { key_file_name: string; cert_file_name: string; ssl_ciphers: string } {
  return { key_file_name: files.keyFile, cert_file_name: files.certFile, ssl_ciphers: TLS12_CIPHERS };
}

/**
 * Whether `name` is covered by the certificate's DNS names (one wildcard label at most, RFC 6125).
 * Used to warn at start-up when the certificate does not cover the edge's domain and its subdomains.
 */
export function certificateCovers(names: string[], host: string): boolean {
  const wanted = host.toLowerCase();
  return names.some((pattern) => {
    const name = pattern.toLowerCase();
    if (name === wanted) return true;
    if (!name.startsWith('*.')) return false;
    const dot = wanted.indexOf('.');
    return dot > 0 && wanted.slice(dot) === name.slice(1);
  });
}

/**
 * The public listener's certificates: a secure context for the default certificate and one per SNI name,
 * rebuilt from the files on `reload` (new connections get the new ones).
 */
export class PublicTls {
  private context: SecureContext;
  private names: { name: string; context: SecureContext }[];
  private current: CertificateSummary;

  constructor(private options: TlsOptions) {
    this.current = checkAll(options);
    [this.context, this.names] = buildContexts(options);
  }

  /** The context of a new connection to `servername` (SNI): its own name's, else the default. */
  readonly sni = (servername: string, callback: (error: Error | null, context?: SecureContext) => void): void => {
    callback(null, this.contextFor(servername));
  };

  contextFor(servername: string | undefined): SecureContext {
    if (servername !== undefined && servername !== '' && this.names.length > 0) {
      const lower = servername.toLowerCase();
      for (const entry of this.names) if (certificateCovers([entry.name], lower)) return entry.context;
    }
    return this.context;
  }

  get defaultContext(): SecureContext {
    return this.context;
  }

  /** Reads the files again; a bad file throws and leaves the running certificates in place. */
  reload(next: TlsOptions = this.options): CertificateSummary {
    const summary = checkAll(next);
    [this.context, this.names] = buildContexts(next);
    this.options = next;
    this.current = summary;
    return summary;
  }

  summary(): CertificateSummary {
    return this.current;
  }
}

function checkAll(options: TlsOptions): CertificateSummary {
  const summary = checkCertificate(options);
  for (const extra of options.serverNames ?? []) checkCertificate(extra);
  return summary;
}

function secureContext(files: CertificateFiles): SecureContext {
  try {
    return createSecureContext({ cert: readFileSync(files.certFile), key: readFileSync(files.keyFile), ciphers: TLS12_CIPHERS, minVersion: 'TLSv1.2', honorCipherOrder: true });
  } catch (error) {
    throw new Error(`cannot start TLS with ${files.certFile} and ${files.keyFile}: ${(error as Error).message}`);
  }
}

function buildContexts(options: TlsOptions): [SecureContext, { name: string; context: SecureContext }[]] {
  return [secureContext(options), (options.serverNames ?? []).map((extra) => ({ name: extra.name.toLowerCase(), context: secureContext(extra) }))];
}

/**
 * The agent listener's HTTPS: one SSLApp per certificate generation, `install` putting the edge's routes on
 * each (on its default router and on every SNI name's own router, which uWS keeps apart).
 */
export class TlsListener {
  private app: TemplatedApp;
  private socket: us_listen_socket | null = null;
  /** Apps of earlier generations: their connections live on until they end. */
  private readonly retired: TemplatedApp[] = [];
  private host = '';
  /** What the files held when this generation was built (not re-read: the files may change before a reload). */
  private current: CertificateSummary;
  port = 0;
  generation = 1;

  constructor(
    private options: TlsOptions,
    private readonly install: (app: TemplatedApp) => void,
  ) {
    this.current = this.check(options);
    this.app = this.build(options);
  }

  /** Binds host:port; a port another socket holds is refused (see bindShared). */
  async listen(host: string, port: number): Promise<void> {
    this.host = host;
    const chosen = await freePort(host, port);
    this.socket = await bindShared(this.app, host, chosen);
    this.port = listenPort(this.socket);
  }

  /**
   * Reads the files again (the same paths unless `next` names others) and serves new connections with
   * them; established connections keep theirs. A bad file leaves the running certificate in place.
   */
  async reload(next: TlsOptions = this.options): Promise<CertificateSummary> {
    if (this.socket === null) throw new Error('the edge is not listening (closing, or not started)');
    const summary = this.check(next);
    const app = this.build(next);
    const socket = await bindShared(app, this.host, this.port);
    if (this.socket === null) {
      // Closed while binding: the new generation must not outlive the edge.
      uws.us_listen_socket_close(socket);
      throw new Error('the edge closed during the reload');
    }
    const old = this.socket;
    this.socket = socket;
    this.retired.push(this.app);
    this.app = app;
    this.options = next;
    this.current = summary;
    this.generation++;
    if (old !== null) uws.us_listen_socket_close(old);
    return summary;
  }

  close(): void {
    if (this.socket !== null) uws.us_listen_socket_close(this.socket);
    this.socket = null;
  }

  summary(): CertificateSummary {
    return this.current;
  }

  private check(options: TlsOptions): CertificateSummary {
    const summary = checkCertificate(options);
    for (const extra of options.serverNames ?? []) checkCertificate(extra);
    return summary;
  }

  private build(options: TlsOptions): TemplatedApp {
    let app: TemplatedApp;
    try {
      app = uws.SSLApp(appOptions(options));
    } catch (error) {
      throw new Error(`cannot start TLS with ${options.certFile} and ${options.keyFile}: ${(error as Error).message}`);
    }
    this.install(app);
    for (const extra of options.serverNames ?? []) {
      app.addServerName(extra.name, appOptions(extra));
      app.domain(extra.name);
      this.install(app);
    }
    // Back to the default router (uWS falls back to it for a name it does not know).
    if ((options.serverNames ?? []).length > 0) app.domain('');
    return app;
  }
}

/**
 * A port nobody holds: `port` itself when free, any free port for 0. uWS binds port 0 without
 * SO_REUSEPORT, and a reload needs it, so the port is chosen here and bound by number. A port in use is
 * refused here, since a shared bind would otherwise "succeed" beside another server.
 */
async function freePort(host: string, port: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(new Error(`cannot bind ${host}:${port} (${error.code === 'EADDRINUSE' ? 'in use' : (error.code ?? error.message)})`)),
    );
    probe.listen({ host, port, exclusive: true }, () => {
      const address = probe.address();
      const chosen = typeof address === 'object' && address !== null ? address.port : port;
      probe.close(() => resolve(chosen));
    });
  });
}

/** Binds with uWS's default options (SO_REUSEPORT), so the next generation can bind beside it. */
async function bindShared(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;
  const socket = await new Promise<us_listen_socket | false>((resolve) => listen.call(app, host, port, 0, resolve));
  if (socket === false) throw new Error(`cannot bind ${host}:${port} for HTTPS`);
  return socket;
}
