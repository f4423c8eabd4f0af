import type { DialError, DialStage } from './dial.ts';
import { withSpan } from '../telemetry/spans.ts';

/**
 * Runs one stage of a host dial in its own span (`kvm dial <stage>`); a failure is turned into
 * its DialError by `fail` inside the span, so the span records the DialError's code and stage.
 */
export function dialStage<T>(stage: DialStage, host: string, work: () => Promise<T>, fail: (err: unknown) => DialError): Promise<T> {
  return withSpan(`kvm dial ${stage}`, { 'egress.kvm.host': host, 'egress.dial.stage': stage }, async (span) => {
    try {
      return await work();
    } catch (err) {
      const dialError = fail(err);
      span.setAttribute('egress.dial.failed_stage', dialError.stage);
      throw dialError;
    }
  });
}
