// Preload (`node --require`) for the CLI bench: at exit, the process appends its own CPU time (user +
// system, ms) and peak resident memory (kB) to the file named by EGRESS_BENCH_USAGE, one JSON line.
'use strict';
const { appendFileSync } = require('node:fs');

const file = process.env.EGRESS_BENCH_USAGE;
if (file) {
  process.on('exit', () => {
    const usage = process.resourceUsage();
    appendFileSync(file, `${JSON.stringify({ cpuMs: (usage.userCPUTime + usage.systemCPUTime) / 1000, maxRssKb: usage.maxRSS })}\n`);
  });
}
