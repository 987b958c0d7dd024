/**
 * How the client trusts an edge: which CAs verify its certificate, when a token may travel in clear
 * text, and what a failed TLS handshake is called in the one line the user sees.
 */
import { rootCertificates } from 'node:tls';

/**
 * Whether `hostname` (as URL.hostname gives it) is this machine, decided from the name alone so the
 * decision needs no DNS: `localhost` and `*.localhost` (RFC 6761), 127.0.0.0/8, ::1 and its IPv4-mapped
 * form. Anything else may be across a network.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (/^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$/.test(host)) return true;
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return bare === '::1' || bare === '0:0:0:0:0:0:0:1' || /^::ffff:127\.[0-9.]+$/.test(bare) || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(bare);
}

/**
 * The refusal for a token about to cross the network unencrypted, or null when it may go: https
 * edges, loopback edges, or `insecure` given on purpose.
 */
export function cleartextRefusal(edge: string, insecure: boolean): string | null {
  const url = new URL(edge);
  if (url.protocol === 'https:' || url.protocol === 'wss:' || insecure || isLoopbackHost(url.hostname)) return null;
  return (
    `refusing to send the token in clear text to ${url.host}: the edge URL is ${url.protocol}//, not https://; ` +
    'use https://, or --insecure to send it anyway'
  );
}

/** A private CA (PEM) added to the public roots: the edge may use either kind of certificate. */
export function trustedCas(extraPem: string | Buffer): string[] {
  return [...rootCertificates, typeof extraPem === 'string' ? extraPem : extraPem.toString('utf8')];
}

/** What to do about each certificate problem, keyed by Node's (OpenSSL's) error code. */
const CERTIFICATE_ADVICE: Record<string, string> = {
  CERT_HAS_EXPIRED: 'renew the edge certificate (and send the edge SIGHUP)',
  CERT_NOT_YET_VALID: "check the clocks of this machine and the edge's",
  DEPTH_ZERO_SELF_SIGNED_CERT: 'trust it with --ca FILE, or give the edge a certificate from a CA',
  SELF_SIGNED_CERT_IN_CHAIN: "trust the edge's CA with --ca FILE",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "trust the edge's CA with --ca FILE",
  UNABLE_TO_GET_ISSUER_CERT: "trust the edge's CA with --ca FILE",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "trust the edge's CA with --ca FILE, or give the edge its full chain (fullchain.pem)",
  ERR_TLS_CERT_ALTNAME_INVALID: 'the certificate must name the edge: a wildcard for *.<domain> plus <domain>',
  CERT_REVOKED: 'the edge needs a new certificate',
  CERT_SIGNATURE_FAILURE: 'the edge needs a new certificate',
};

/**
 * A failed TLS handshake in one line, or null when `error` is not about TLS: a certificate problem is
 * named as OpenSSL names it ("certificate has expired", "unable to verify the first certificate",
 * "Hostname/IP does not match certificate's altnames: ...") with what to do; a TLS handshake with a
 * plain-HTTP port says so.
 */
export function describeTlsError(error: Error): string | null {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  const advice = CERTIFICATE_ADVICE[code];
  const message = error.message.split('\n')[0] ?? '';
  if (advice !== undefined) return `TLS certificate problem: ${message} (${code}); ${advice}`;
  if (/wrong version number|packet length too long|http request/i.test(message)) {
    return `TLS handshake failed (${message}): the edge does not speak TLS on this port; use its http:// URL or give it --tls-cert`;
  }
  // A plain-HTTP uWS edge drops a ClientHello without an answer.
  if (/before secure TLS connection was established/.test(message)) {
    return 'TLS handshake failed (the connection closed before it completed): does the edge speak TLS on this port? If not, use its http:// URL or give it --tls-cert';
  }
  return null;
}
