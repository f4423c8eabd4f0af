import { EgressError } from '../errors.ts';
import { httpExchange, type HttpAnswer } from './http-exchange.ts';

export class ApiRequestError extends EgressError {
  readonly status: number;
  /** The lines of a rejected document set (`errors` of the answer), when it had them. */
  readonly errors: readonly string[];
  /** The server's error code, or ERR_API when it sent none. */
  constructor(status: number, message: string, serverCode: string | undefined, errors: readonly string[] = []) {
    super(serverCode ?? (status === 404 ? 'ERR_NOT_FOUND' : 'ERR_API'), message, { retryable: status >= 500 });
    this.status = status;
    this.errors = errors;
  }
}

export class ApiUnreachableError extends EgressError {
  constructor(url: string, cause: unknown) {
    super('ERR_API_UNREACHABLE', `cannot reach the egress API at ${url} (is \`egress up\` or \`egress api\` running? set --api-url or EGRESS_API_URL)`, {
      cause,
      retryable: true,
    });
  }
}

export interface ApiClientOptions {
  baseUrl: string;
  token?: string;
}

/** Added to a 401 when the CLI sent no token: where a token comes from. */
const NO_TOKEN_HINT =
  ' (no token was sent: run the CLI in the directory of `egress up`, whose .egress/ holds its token, or pass --data-dir, --token-file or EGRESS_API_TOKEN)';

/** The CLI's small client of the HTTP API. */
export class ApiClient {
  readonly #base: string;
  readonly #token: string | undefined;

  constructor(options: ApiClientOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, '');
    this.#token = options.token;
  }

  async request<T>(
    method: 'GET' | 'POST' | 'DELETE' | 'PUT',
    path: string,
    signal: AbortSignal,
    body?: unknown,
    raw?: { body: string; contentType: string },
  ): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (raw) headers['content-type'] = raw.contentType;
    const payload = raw ? raw.body : body === undefined ? undefined : JSON.stringify(body);
    let res: HttpAnswer;
    try {
      res = await httpExchange(this.#base + path, { method, headers, body: payload, signal });
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof EgressError) throw err;
      throw new ApiUnreachableError(this.#base, err);
    }
    const text = res.text;
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (res.status < 200 || res.status > 299) {
      const reply = parsed as { error?: string; message?: string; errors?: string[] } | undefined;
      let message = reply?.errors?.length ? `rejected, nothing applied:\n  ${reply.errors.join('\n  ')}` : (reply?.message ?? (text || res.statusText));
      if (res.status === 401 && !this.#token) message += NO_TOKEN_HINT;
      const errors = Array.isArray(reply?.errors) ? reply.errors.filter((e): e is string => typeof e === 'string') : [];
      throw new ApiRequestError(res.status, message, typeof reply?.error === 'string' && reply.error.startsWith('ERR_') ? reply.error : undefined, errors);
    }
    return parsed as T;
  }
}
