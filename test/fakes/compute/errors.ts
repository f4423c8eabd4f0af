/** Compute Engine error bodies (the Apiary shape that gax/gaxios surface as GaxiosError). */

export interface ComputeErrorBody {
  error: {
    code: number;
    message: string;
    errors: { message: string; domain: string; reason: string; location?: string; locationType?: string }[];
    status?: string;
  };
}

const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ALREADY_EXISTS',
  412: 'FAILED_PRECONDITION',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

export class ComputeHttpError extends Error {
  constructor(
    readonly code: number,
    readonly body: ComputeErrorBody,
  ) {
    super(body.error.message);
  }
}

export function computeError(code: number, reason: string, message: string, extra: { domain?: string; status?: string } = {}): ComputeHttpError {
  return new ComputeHttpError(code, {
    error: {
      code,
      message,
      errors: [{ message, domain: extra.domain ?? 'global', reason }],
      ...(extra.status !== undefined || STATUS[code] ? { status: extra.status ?? STATUS[code] } : {}),
    },
  });
}

export const notFound = (resource: string): ComputeHttpError => computeError(404, 'notFound', `The resource '${resource}' was not found`);

export const invalid = (field: string, value: string, why: string): ComputeHttpError =>
  computeError(400, 'invalid', `Invalid value for field '${field}': '${value}'. ${why}`);

export function unauthenticated(missing: boolean): ComputeHttpError {
  const e = missing
    ? computeError(
        401,
        'required',
        'Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
      )
    : computeError(
        401,
        'authError',
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
      );
  Object.assign(e.body.error.errors[0]!, { location: 'Authorization', locationType: 'header' });
  return e;
}

export function apiDisabled(projectNumber: string): ComputeHttpError {
  return computeError(
    403,
    'accessNotConfigured',
    `Compute Engine API has not been used in project ${projectNumber} before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/compute.googleapis.com/overview?project=${projectNumber} then retry. If you enabled this API recently, wait a few minutes for the action to propagate to our systems and retry.`,
    { domain: 'usageLimits' },
  );
}

export function defaultFaultReason(code: number): string {
  const reasons: Record<number, string> = {
    400: 'invalid',
    401: 'required',
    403: 'forbidden',
    404: 'notFound',
    409: 'alreadyExists',
    412: 'conditionNotMet',
    429: 'rateLimitExceeded',
    500: 'backendError',
    503: 'backendError',
  };
  return reasons[code] ?? 'backendError';
}
