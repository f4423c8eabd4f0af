/**
 * `egress worker …` (through the CLI's own `main`, so its errors end as the command's do) whose
 * consumer of the queue named in BREAK_CONSUMER stops running once the role is up: its BullMQ
 * worker is closed underneath it, which nothing of ours does, and the harness prints
 * `BROKE <queue>`. The command must then fail: exit 1 with the cause.
 * Run as: node --import tsx test/support/failing-worker.ts worker <egress worker flags…>
 */
import { main } from '../../src/cli/main.ts';

const queue = process.env.BREAK_CONSUMER ?? 'checks';
process.exitCode = await main(process.argv.slice(2), { REDIS_URL: process.env.REDIS_URL }, undefined, {
  server: {
    onStarted: (running) => {
      const worker = running.worker?.workers.find((w) => w.name === queue);
      void worker?.close().then(() => process.stdout.write(`BROKE ${queue}\n`));
    },
  },
});
