import { Gauge, type Registry } from 'prom-client';

export interface SchedulerGaugeSource {
  /** Whether this scheduler holds the lease now. */
  readonly leader: boolean;
}

/**
 * What a scheduler process reports about itself, for the LeaderMissing and ChecksStale alerts:
 * `proxy_operator_scheduler_leader` (1 while it holds the lease, 0 on standby; `max` over all
 * schedulers is 1 when the fleet has a leader) and `proxy_operator_check_interval_seconds`
 * (its `--provider-check-interval`; 0 when scheduled checks are off).
 */
export function registerSchedulerGauges(registry: Registry, scheduler: SchedulerGaugeSource, checkIntervalMs: number): void {
  new Gauge({
    name: 'proxy_operator_scheduler_leader',
    help: 'Whether this scheduler holds the lease (1) or stands by (0).',
    registers: [registry],
    collect() {
      this.set(scheduler.leader ? 1 : 0);
    },
  });
  new Gauge({
    name: 'proxy_operator_check_interval_seconds',
    help: 'The scheduler’s interval between scheduled provider checks (--provider-check-interval); 0 when they are off.',
    registers: [registry],
    collect() {
      this.set(checkIntervalMs / 1000);
    },
  });
}
