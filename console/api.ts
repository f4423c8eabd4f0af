/** The page's client of the API: every call goes to /console/v1/…, which the server runs as the API's /v1/… for this session. */

function meta(name: string): string {
  return document.querySelector<HTMLMetaElement>(`meta[name="egress-${name}"]`)?.content ?? '';
}

export const page = {
  view: meta('view'),
  base: meta('base') || '/console',
  caller: meta('caller'),
  csrf: meta('csrf'),
  board: meta('board'),
};

export interface ApiAnswer<T> {
  status: number;
  ok: boolean;
  body: T;
  /** The API's message for a refusal, with each line of `errors` when it sent them. */
  message: string;
}

interface ErrorBody {
  error?: string;
  message?: string;
  errors?: string[];
}

const cached = new Map<string, { etag: string; body: unknown }>();

/** One API call as the CLI would make it. GETs use ETags: an unchanged answer comes from the cache. */
export async function api<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: { text: string; type: string }): Promise<ApiAnswer<T>> {
  const headers: Record<string, string> = { accept: 'application/json', 'x-egress-csrf': page.csrf };
  if (body) headers['content-type'] = body.type;
  const hit = method === 'GET' ? cached.get(path) : undefined;
  if (hit) headers['if-none-match'] = hit.etag;
  const res = await fetch(`${page.base}${path}`, { method, headers, body: body?.text, credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 401) {
    window.location.assign(`${page.base}/sign-in`);
    return { status: 401, ok: false, body: undefined as T, message: 'signed out' };
  }
  if (res.status === 304 && hit) return { status: 200, ok: true, body: hit.body as T, message: '' };
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  if (method === 'GET' && res.ok) {
    const etag = res.headers.get('etag');
    if (etag) cached.set(path, { etag, body: parsed });
  }
  const err = (res.ok ? undefined : parsed) as ErrorBody | undefined;
  const lines = Array.isArray(err?.errors) ? err.errors : [];
  const message = res.ok ? '' : [err?.message ?? `${res.status} ${res.statusText}`, ...lines.map((l) => `  ${l}`)].join('\n');
  return { status: res.status, ok: res.ok, body: parsed as T, message };
}

/** A console endpoint of its own (counters, sign-out), with the same CSRF header. */
export async function consoleCall(method: 'GET' | 'POST', path: string): Promise<Response> {
  return fetch(`${page.base}${path}`, {
    method,
    headers: { accept: 'application/json', 'x-egress-csrf': page.csrf },
    credentials: 'same-origin',
    cache: 'no-store',
  });
}
