// The page's one way to the edge: same-origin fetch to /api/v1 with the session cookie (HttpOnly:
// this script never sees it). State-changing calls carry X-Burrow-CSRF; the browser adds Origin.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls the API; resolves with the JSON body (null for 204), rejects with an ApiError carrying the code. */
export async function api(method, path, body) {
  const headers = {};
  if (method !== 'GET') headers['x-burrow-csrf'] = '1';
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, 'NETWORK_ERROR', `The edge did not answer (${error.message}).`);
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data?.error;
    const failure = new ApiError(response.status, typeof error?.code === 'string' ? error.code : `HTTP_${response.status}`, typeof error?.message === 'string' ? error.message : response.statusText);
    for (const listener of failureListeners) listener(failure);
    throw failure;
  }
  return data;
}

const failureListeners = [];
/** Runs `listener` on every API failure (the app signs out on 401). */
export function onApiFailure(listener) {
  failureListeners.push(listener);
}

/** "CODE: message", the text every error shows. */
export function errorText(error) {
  return error instanceof ApiError ? `${error.code}: ${error.message}` : `ERROR: ${error?.message ?? error}`;
}
