// Every request the dashboard makes, with the coordinator's token when one
// is configured. The token is given once as `#token=...` in the URL (then
// kept in localStorage and taken out of the address bar) or typed into the
// banner after a 401.

const TOKEN_KEY = "taskyardToken";

export function takeTokenFromUrl() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (!m) return;
  localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  const rest = location.hash.replace(/(^#|&)token=[^&]+/, "$1").replace(/^#&/, "#");
  history.replaceState(null, "", rest === "#" ? location.pathname : rest);
}

export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** What went wrong: `status` 0 means no HTTP answer at all. */
export class ApiError extends Error {
  constructor(status, code, message, body = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }

  /** True when the coordinator could not be asked (not "it said no"). */
  get unreachable() {
    return this.status === 0 || this.status === 502 || this.status === 504
      || (this.status === 503 && this.code !== "not_leader");
  }
}

/**
 * Calls the API. Every request but a GET says Content-Type:
 * application/json, body or not: the coordinator refuses state changes
 * without it (a cross-site page cannot send that type without a CORS
 * preflight, which it never grants).
 */
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["Content-Type"] = "application/json";
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  let response;
  try {
    response = await fetch(path, {
      method, headers, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (e) {
    throw new ApiError(0, "unreachable", "no answer from the coordinator (" + e.message + ")");
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new ApiError(response.status, answer.code || "http_" + response.status,
      answer.error || response.statusText || "HTTP " + response.status, answer);
  }
  return answer;
}

/** `path?k=v&...`, leaving out empty values. */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v != null && v !== "") q.set(k, v);
  }
  const text = q.toString();
  return text ? `${path}?${text}` : path;
}
