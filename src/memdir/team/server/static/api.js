// Talking to the memdir HTTP API (docs/api.md): the token, and one fetch wrapper.
//
// Invariants: every /api/ call carries `Authorization: Bearer <token>`; every request goes to
// the page's own origin; every failure becomes an ApiError carrying the API's
// {"error": {code, message, hint}} (or a made-up one of the same shape when the server could
// not be reached or did not answer JSON), so the page shows one kind of error everywhere.

const TOKEN_KEY = "memdir.token";

export class ApiError extends Error {
  constructor(status, code, message, hint) {
    super(message);
    this.status = status;
    this.code = code;
    this.hint = hint;
  }
}

export function getToken() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  localStorage.setItem(TOKEN_KEY, token.trim());
}

export function clearToken() {
  localStorage.removeItem(TOKEN_KEY);
}

/** Take `#token=...` from the URL into localStorage, and drop it from the address bar (and
 * so from the history) at once. Returns true when a token was found. */
export function adoptTokenFromFragment() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (!token) return false;
  setToken(token);
  fragment.delete("token");
  const rest = fragment.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return true;
}

function buildUrl(path, params) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    for (const item of Array.isArray(value) ? value : [value]) {
      // Empty filters mean "any": leave them out rather than send `type=`.
      if (item !== undefined && item !== null && item !== "") url.searchParams.append(key, item);
    }
  }
  return url;
}

/** Call the API. `params` become the query string, `body` is sent as JSON. */
export async function api(path, { method = "GET", params, body, auth = true } = {}) {
  const headers = { Accept: "application/json" };
  if (auth) headers.Authorization = `Bearer ${getToken()}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(buildUrl(path, params), init);
  } catch (err) {
    throw new ApiError(0, "unreachable", `the memdir server did not answer (${err.message})`,
      "Check that `memdir serve` is still running, then reload the page.");
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || `http_${response.status}`,
      error.message || `${response.status} ${response.statusText}`,
      error.hint || "See the server's log for details.");
  }
  return data;
}
