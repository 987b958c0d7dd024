/**
 * An exchange as the client saw it: what the inspector shows and the terminal prints. Built only when
 * someone records (the inspector is on, or a listener asked), and bodies are kept up to a cap.
 */

export interface Exchange {
  /** The edge's request id (`req_...`), the same the API and the inspector use. */
  id: string;
  method: string;
  path: string;
  /** The local port it went to. */
  port: number;
  requestHeaders: string[];
  requestBody: Buffer | null;
  requestBodySize: number;
  requestTruncated: boolean;
  status: number;
  responseHeaders: string[];
  responseBody: Buffer | null;
  responseBodySize: number;
  responseTruncated: boolean;
  /** When the client received the request (ms since the epoch). */
  startedAt: number;
  /** Round trip to the local handler and back, in milliseconds (fractional). */
  latencyMs: number;
  /** Why the local exchange failed, if it did. */
  error: string | null;
  /** Set on exchanges the inspector replayed: the id they replayed. */
  replayOf: string | null;
}
