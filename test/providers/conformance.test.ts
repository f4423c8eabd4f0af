/**
 * Runs the provider conformance suite (conformance.ts, not itself a test file by vitest's
 * include pattern) over every provider: each property once per provider.
 */
import { providerConformance } from './conformance.ts';
import { gcpHarness, kubernetesHarness, kvmHarness, localHarness, upstreamHarness } from './conformance-harnesses.ts';

providerConformance([localHarness(), kvmHarness(), kubernetesHarness(), gcpHarness(), upstreamHarness()]);
