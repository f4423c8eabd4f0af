#!/usr/bin/env node
// Entry point of the `egress` command. TypeScript sources run through tsx's loader,
// so there is no build step between a checkout and a running orchestrator.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2), process.env);
