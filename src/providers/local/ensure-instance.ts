/**
 * The ensure path of the local lifecycle: the instance's intent is recorded (owner, credentials,
 * source address) and the proxy host asked to serve it, on its previous port when free; a proxy still
 * served by a process of the earlier model is given its new credentials instead.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ProvisioningError, type Instance, type InstanceSpec } from '../lifecycle.ts';
import { describeInstance } from './describe-instance.ts';
import { LocalInstanceError } from './instance-error.ts';
import { asInstance, DELETING_FILE, instanceDir, INTENT_FILE, writeJsonAtomic } from './instance-files.ts';
import { NAME_PATTERN, readState, recordIntent, sameOwner } from './instance-state.ts';
import { legacyAlive, reloadLegacyCredentials } from './legacy-proxies.ts';
import type { LocalContext } from './lifecycle-context.ts';

export async function ensureLocalInstance(ctx: LocalContext, spec: InstanceSpec, signal: AbortSignal): Promise<Instance> {
  if (!NAME_PATTERN.test(spec.name)) {
    throw new ProvisioningError(`instance name "${spec.name}" must be lower case letters, digits and "-", at most 63 characters`);
  }
  const dir = instanceDir(ctx.dataDir, spec.name);
  const log = ctx.logger.child({ instance: spec.name, proxy: spec.owner.proxy });
  const mark = ctx.deletions.mark(spec.name);
  signal.throwIfAborted();
  // A front's upstream first: an endpoint no longer listed makes no instance.
  const route = ctx.upstreamOf ? await ctx.upstreamOf(spec, signal) : undefined;
  await ctx.writeEgressPolicy();
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const state = await readState(dir);
  if (state.intent && !sameOwner(state.intent, spec)) {
    throw new ProvisioningError(
      `instance "${spec.name}" belongs to ${state.intent.owner.fleet}/${state.intent.owner.proxy}, not ${spec.owner.fleet}/${spec.owner.proxy}`,
    );
  }
  // A deletion that did not finish (its worker died): the name is wanted again.
  await rm(join(dir, DELETING_FILE), { force: true });
  const recorded = await recordIntent(dir, spec, state.intent, ctx.addresses, signal, log, route?.url);
  const { credentialsChanged } = recorded;
  let { intent } = recorded;
  if (route && intent.upstream !== route.url) {
    intent = { ...intent, upstream: route.url };
    await writeJsonAtomic(join(dir, INTENT_FILE), intent);
    log.info({ upstream: route.url }, 'local instance forwards to an upstream proxy');
  }
  if (await legacyAlive(dir, state.record)) {
    if (credentialsChanged) reloadLegacyCredentials(state.record!, log);
    return describeInstance(ctx, dir, intent, state.record, mark);
  }
  // The host starts the proxy (on its previous port when free) or re-reads its credentials.
  // A front's upstream, credentials included, goes over the control socket only (never to a file).
  const answer = await ctx.host.call('PUT', `/proxies/${spec.name}`, true, signal, route ? JSON.stringify({ upstream: route.hop }) : undefined);
  const served = asInstance(answer?.body);
  if (answer?.status !== 200 || !served) {
    const error = (answer?.body as { error?: unknown } | undefined)?.error;
    throw new LocalInstanceError(`the proxy host could not start "${spec.name}": ${typeof error === 'string' ? error : `status ${answer?.status ?? 'none'}`}`);
  }
  return describeInstance(ctx, dir, intent, served, mark, served.pid);
}
