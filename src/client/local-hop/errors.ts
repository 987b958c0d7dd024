/**
 * Why a local exchange failed, in the two kinds the tunnel tells apart (docs/protocol.md sections 6
 * and 9): the local server could not be reached at all (`RESET 2 LOCAL_UNREACHABLE`: refused, DNS,
 * TLS handshake or certificate), or it was reached and then failed the exchange (`RESET 3
 * LOCAL_ERROR`: a reset, a cut body, bytes that are not HTTP, a 100 Continue nobody asked for). The
 * message always names the target, and for a certificate says how to accept a self-signed one.
 */
import { ResetCode } from '../../protocol/constants.js';
import type { LocalTarget } from '../routes.js';

/** Certificate and TLS handshake failures of an https:// target. */
const CERTIFICATE_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL/;

export class LocalHopError extends Error {
  constructor(
    /** ResetCode.LOCAL_UNREACHABLE (nothing was exchanged) or ResetCode.LOCAL_ERROR. */
    readonly resetCode: typeof ResetCode.LOCAL_UNREACHABLE | typeof ResetCode.LOCAL_ERROR,
    message: string,
    /** The system's or llhttp's code when there is one (`ECONNREFUSED`, `HPE_INVALID_CONSTANT`), else ''. */
    readonly code: string,
  ) {
    super(message);
    this.name = 'LocalHopError';
  }

  get unreachable(): boolean {
    return this.resetCode === ResetCode.LOCAL_UNREACHABLE;
  }
}

/** The target could not be connected to (or its TLS handshake failed). */
export function unreachable(target: LocalTarget, cause: Error): LocalHopError {
  const plain = plainError(cause);
  const code = (plain as { code?: unknown }).code;
  const codeText = typeof code === 'string' ? code : '';
  const certificate = target.scheme === 'https' && CERTIFICATE_ERROR.test(`${codeText} ${plain.message}`);
  const hint = certificate ? ' (a self-signed certificate? --local-insecure accepts it)' : '';
  return new LocalHopError(ResetCode.LOCAL_UNREACHABLE, `local server at ${target.origin}: ${plain.message}${hint}`, codeText);
}

/** The local server was reached and failed the exchange: `what` says how. */
export function failed(target: LocalTarget, what: string, code = ''): LocalHopError {
  return new LocalHopError(ResetCode.LOCAL_ERROR, `local server at ${target.origin}: ${what}`, code);
}

/** The request could not be written as given (a byte a head cannot carry, a body that breaks its length). */
export function badRequest(target: LocalTarget, what: string): LocalHopError {
  return new LocalHopError(ResetCode.LOCAL_ERROR, `request to local server at ${target.origin}: ${what}`, 'BAD_REQUEST');
}

/**
 * `localhost` is dialled on both loopbacks; when both fail, Node reports an AggregateError with an empty
 * message: one error carrying its parts' messages and first code reads better.
 */
export function plainError(error: Error): Error {
  const parts = (error as { errors?: unknown }).errors;
  if (error.message !== '' || !Array.isArray(parts) || parts.length === 0) return error;
  const plain = new Error(parts.map((part) => (part as Error).message).join('; ')) as Error & { code?: string };
  plain.code = (error as { code?: string }).code ?? (parts[0] as { code?: string }).code;
  return plain;
}
