import { EgressError } from '../errors.ts';

/**
 * Where a long-running role is: `starting` until it takes work, `running`, `draining` once asked to
 * close, then `stopped`; or `failed` (from any of the first three) when it cannot go on, or when
 * its shutdown went wrong.
 */
export type RoleState = 'starting' | 'running' | 'draining' | 'stopped' | 'failed';

/** Told every state a role enters, with the cause of a failure. */
export type RoleStateObserver = (role: string, state: RoleState, cause?: Error) => void;

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A role that could not go on (`ERR_ROLE_FAILED`): `role` names it, `cause` says why. */
export class RoleFailedError extends EgressError {
  readonly role: string;
  constructor(role: string, cause: unknown) {
    super('ERR_ROLE_FAILED', `the ${role} role failed: ${messageOf(cause)}`, { cause, retryable: false });
    this.role = role;
  }
}

/** A shutdown some of whose steps failed (`ERR_SHUTDOWN`): `errors` lists every one, none dropped. */
export class ShutdownError extends EgressError {
  readonly errors: readonly Error[];
  constructor(what: string, errors: readonly Error[]) {
    super(
      'ERR_SHUTDOWN',
      `${what} did not end cleanly (${errors.length === 1 ? '1 step' : `${errors.length} steps`} failed): ${errors.map(messageOf).join('; ')}`,
      {
        cause: errors[0],
      },
    );
    this.errors = errors;
  }
}

/** One step of a shutdown: closing a queue, a store, a role. */
export type ShutdownStep = () => unknown;

/** A shutdown step that did not finish in its bound (`ERR_SHUTDOWN_TIMEOUT`); the shutdown goes on without it. */
export class StepTimeoutError extends EgressError {
  readonly what: string;
  constructor(what: string, ms: number) {
    super('ERR_SHUTDOWN_TIMEOUT', `${what} did not close within ${ms} ms; the shutdown went on without it`, { retryable: false });
    this.what = what;
  }
}

/**
 * The step, given at most `ms`: past that it rejects with a StepTimeoutError naming `what`, so a
 * close that waits on Redis for good neither holds the shutdown nor goes unreported.
 */
export function boundedStep(what: string, ms: number, step: ShutdownStep): ShutdownStep {
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StepTimeoutError(what, ms)), ms);
      timer.unref();
    });
    try {
      await Promise.race([Promise.resolve().then(step), late]);
    } finally {
      clearTimeout(timer);
    }
  };
}

/** AggregateErrors (several closes at once) and ShutdownErrors (a role's own) count as their parts. */
function flatten(err: unknown): Error[] {
  if (err instanceof ShutdownError || err instanceof AggregateError) return (err.errors as unknown[]).flatMap(flatten);
  return [err instanceof Error ? err : new Error(String(err))];
}

/**
 * Runs every step in order, whatever the earlier ones did, and returns what failed: the errors of
 * a shutdown are collected, not dropped.
 */
export async function runShutdownSteps(steps: readonly ShutdownStep[]): Promise<Error[]> {
  const errors: Error[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      errors.push(...flatten(err));
    }
  }
  return errors;
}

/** Waits for every promise (closes run side by side); rejects with an AggregateError of whatever rejected. */
export async function settleAll(promises: readonly Promise<unknown>[]): Promise<void> {
  const errors = (await Promise.allSettled(promises)).flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (errors.length > 0) throw new AggregateError(errors, `${errors.length} of ${promises.length} closes failed`);
}

/** What a role shows of its lifecycle. */
export interface RoleStatus {
  readonly role: string;
  readonly state: RoleState;
  /** Why it failed, once `failed`. */
  readonly failure: Error | undefined;
  /**
   * Settles when the role ends (the model: Temporal's `Worker.run()`): resolves once it stopped
   * after a close, rejects with a RoleFailedError as soon as it fails. It does not close the
   * role: whoever awaits it closes it (a failed role still holds connections).
   */
  run(): Promise<void>;
}

/**
 * The state of one role, and its one close. A role makes one when it starts (`starting`), says
 * `started()` once it takes work, `fail(cause)` (or `watch(part)`) when it cannot go on, and closes
 * through `close(steps)`.
 */
export class RoleLifecycle implements RoleStatus {
  readonly role: string;
  readonly #observe: RoleStateObserver | undefined;
  #state: RoleState = 'starting';
  #failure: Error | undefined;
  #closing: Promise<void> | undefined;
  readonly #done: Promise<void>;
  #settle!: (failure?: Error) => void;

  constructor(role: string, observe?: RoleStateObserver) {
    this.role = role;
    this.#observe = observe;
    this.#done = new Promise<void>((resolve, reject) => {
      this.#settle = (failure) => (failure ? reject(new RoleFailedError(role, failure)) : resolve());
    });
    // Nobody need await it: a failure is also the state, and whoever calls run() still sees it.
    this.#done.catch(() => undefined);
    observe?.(role, 'starting');
  }

  get state(): RoleState {
    return this.#state;
  }

  get failure(): Error | undefined {
    return this.#failure;
  }

  run(): Promise<void> {
    return this.#done;
  }

  #enter(state: RoleState, cause?: Error): void {
    this.#state = state;
    this.#observe?.(this.role, state, cause);
  }

  /** `starting` → `running`; nothing once it is draining or has ended. */
  started(): void {
    if (this.#state === 'starting') this.#enter('running');
  }

  /**
   * The role cannot go on: `failed` with this cause, and run() rejects. Only the first failure
   * counts; a role that has stopped cannot fail any more. Returns whether this one counted.
   */
  fail(cause: unknown): boolean {
    if (this.#state === 'failed' || this.#state === 'stopped') return false;
    const failure = cause instanceof Error ? cause : new Error(String(cause));
    this.#failure = failure;
    this.#enter('failed', failure);
    this.#settle(failure);
    return true;
  }

  /** A part of the role (a consumer) that settles only when it stopped: its rejection fails the role. */
  watch(part: Promise<unknown>): void {
    part.catch((err: unknown) => this.fail(err));
  }

  /**
   * Once (later calls return the same promise): `draining`, then every step in order, then
   * `stopped`; a step that fails makes it `failed` with a ShutdownError listing every failed step,
   * and the close rejects with it. A role that failed before is drained all the same, and stays
   * `failed`.
   */
  close(steps: readonly ShutdownStep[]): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#state !== 'failed') this.#enter('draining');
      const errors = await runShutdownSteps(steps);
      if (errors.length === 0) {
        if (this.#state === 'draining') {
          this.#enter('stopped');
          this.#settle();
        }
        return;
      }
      const shutdown = new ShutdownError(`the shutdown of the ${this.role} role`, errors);
      this.fail(shutdown);
      throw shutdown;
    })();
    return this.#closing;
  }
}
