import { describe, expect, it } from 'vitest';
import { gitConfigKeyProblem } from '../../src/git-config-keys.js';

describe('gitConfigKeyProblem', () => {
  it.each([
    'user.name',
    'user.email',
    'http.sslVerify',
    'http.https://example.com/.extraHeader',
    'http.proxy',
    'core.autocrlf',
    'pack.threads',
    'remote.origin.proxy',
    'protocol.version',
  ])('allows %s', (key) => {
    expect(gitConfigKeyProblem(key)).toBeUndefined();
  });

  it.each([
    'core.sshCommand',
    'CORE.SSHCOMMAND',
    'core.fsmonitor',
    'core.hooksPath',
    'core.gitProxy',
    'core.askPass',
    'core.pager',
    'core.editor',
    'credential.helper',
    'credential.https://example.com.helper',
    'diff.tool.command',
    'diff.md.textconv',
    'filter.lfs.process',
    'gpg.program',
    'gpg.ssh.program',
    'include.path',
    'includeIf.gitdir:/x/.path',
    'merge.ours.driver',
    'protocol.allow',
    'protocol.ext.allow',
    'remote.origin.uploadpack',
    'remote.origin.receivepack',
    'sequence.editor',
    'ssh.variant',
    'submodule.x.update',
    'uploadpack.packObjectsHook',
    'url.https://example.com/.insteadOf',
    'url.ssh://x/.pushInsteadOf',
    'alias.co',
    'pager.log',
    'foo.bar.helper',
  ])('refuses %s', (key) => {
    expect(gitConfigKeyProblem(key)).toMatch(/is not allowed/);
  });

  it.each(['user', '.name', 'user.', 'user.na me', 'user.1st'])('refuses malformed %j', (key) => {
    expect(gitConfigKeyProblem(key)).toBe('is not a git config name (section.name)');
  });
});
