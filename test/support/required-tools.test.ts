import { describe, expect, it } from 'vitest';
import { MissingToolError, TOOLS, verdictOf } from './required-tools.ts';

describe('required tools', () => {
  it('a missing tool fails the suite under CI and is skipped elsewhere; a present one runs', () => {
    expect(verdictOf(false, true)).toBe('fail');
    expect(verdictOf(false, false)).toBe('skip');
    expect(verdictOf(true, true)).toBe('run');
    expect(verdictOf(true, false)).toBe('run');
  });

  it('the failure names the program and how to install it', () => {
    const err = new MissingToolError('kubectl');
    expect(err).toMatchObject({ code: 'ERR_TEST_TOOL_MISSING', tool: 'kubectl' });
    expect(err.message).toBe(`kubectl is required by this suite and is not installed: ${TOOLS.kubectl.install}`);
    expect(err.message).toContain('scripts/install-kubectl.sh');
    expect(new MissingToolError('promtool').message).toContain('apt-get install prometheus');
  });
});
