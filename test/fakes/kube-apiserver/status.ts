/** Kubernetes `Status` error objects as the real apiserver writes them (metav1.Status, JSON). */

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: { reason: string; message: string; field?: string }[];
}

export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: StatusDetails;
  code: number;
}

/** A Status plus its HTTP code, thrown inside the fake's handlers and written by the router. */
export class StatusError extends Error {
  constructor(readonly status: KubeStatus) {
    super(status.message);
  }
}

export function status(code: number, reason: string, message: string, details?: StatusDetails): KubeStatus {
  const s: KubeStatus = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  if (details) s.details = details;
  return s;
}

export const notFound = (plural: string, name: string): StatusError =>
  new StatusError(status(404, 'NotFound', `${plural} "${name}" not found`, { name, kind: plural }));

export const alreadyExists = (plural: string, name: string): StatusError =>
  new StatusError(status(409, 'AlreadyExists', `${plural} "${name}" already exists`, { name, kind: plural }));

export const badRequest = (message: string): StatusError => new StatusError(status(400, 'BadRequest', message));

export const invalid = (kind: string, name: string, causes: { field: string; message: string; reason?: string }[]): StatusError =>
  new StatusError(
    status(422, 'Invalid', `${kind} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`, {
      name,
      kind: kind.toLowerCase() + 's',
      causes: causes.map((c) => ({ reason: c.reason ?? 'FieldValueInvalid', message: c.message, field: c.field })),
    }),
  );

export const routeNotFound = (): StatusError => new StatusError(status(404, 'NotFound', 'the server could not find the requested resource', {}));

export const unauthorized = (): KubeStatus => status(401, 'Unauthorized', 'Unauthorized');
