import { describe, expect, it } from 'vitest';
import { egressGuards, proxyEgressPolicy, remoteProxyEgressPolicy } from '../../src/egress/policy-config.ts';

describe('the document remote instances receive', () => {
  const policy = { allow: ['10.20.0.0/16'], deny: ['192.0.2.0/24'] };

  it('is the same from `egress up` (API and metrics listeners in the process) and from a standalone worker with a metrics port', () => {
    const up = egressGuards({ redisUrl: 'redis://:pw@10.0.0.9:6379', api: { host: '0.0.0.0', port: 8080 }, echoUrl: 'http://api.internal:8080/v1/echo' });
    const worker = egressGuards({
      redisUrl: 'redis://:pw@10.0.0.9:6379',
      metrics: { host: '0.0.0.0', port: 9100 },
      echoUrl: 'http://api.internal:8080/v1/echo',
    });
    // The local documents differ (each process guards its own listeners)…
    expect(proxyEgressPolicy(policy, up)).not.toEqual(proxyEgressPolicy(policy, worker));
    // …the remote one does not, so kubernetes Pods are not replaced back and forth between workers.
    expect(remoteProxyEgressPolicy(policy, up)).toEqual(remoteProxyEgressPolicy(policy, worker));
    expect(remoteProxyEgressPolicy(policy, up)).toEqual({
      version: 1,
      allow: ['10.20.0.0/16'],
      deny: ['192.0.2.0/24'],
      guarded: [
        { host: '10.0.0.9', port: 6379, role: 'redis' },
        { host: 'api.internal', port: 8080, role: 'api' },
      ],
      echo: { host: 'api.internal', port: 8080, path: '/v1/echo' },
    });
  });

  it('keeps the echo listener guarded when the API is the process’s own', () => {
    const up = egressGuards({ redisUrl: 'redis://127.0.0.1:46379', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
    expect(remoteProxyEgressPolicy(undefined, up).guarded).toEqual([
      { host: '127.0.0.1', port: 46379, role: 'redis' },
      { host: '127.0.0.1', port: 8080, role: 'api' },
    ]);
  });

  it('never carries the Redis password', () => {
    const up = egressGuards({ redisUrl: 'redis://:s3cret-redis-pw@127.0.0.1:46379', echoUrl: 'http://127.0.0.1:8080/v1/echo' });
    expect(JSON.stringify(remoteProxyEgressPolicy(undefined, up))).not.toContain('s3cret');
    expect(JSON.stringify(proxyEgressPolicy(undefined, up))).not.toContain('s3cret');
  });
});
