import { describe, expect, it } from 'vitest';
import { gitConfigKeyProblem, signingProblem } from '../../src/protocol/git-config-keys.js';

describe('gitConfigKeyProblem', () => {
  it.each([
    'user.name',
    'user.email',
    'http.sslVerify',
    'http.https://example.com/.extraHeader',
    'http.proxy',
    'core.autocrlf',
    'pack.threads',
    'protocol.version',
    'url.https://mirror.example.com/.insteadOf',
    'url.git@example.com:.pushInsteadOf',
    'init.defaultBranch',
    'fetch.fsck.badDate',
    'transfer.fsckObjects',
    'gc.reflogExpire',
    'gc.auto',
    'push.pushOption',
    'HTTP.https://Example.com/.SSLVERIFY',
    // Carried over from the git resource's settings: they change nothing here.
    'pull.rebase',
    'color.ui',
    'safe.directory',
    // Turned off only (signingProblem).
    'commit.gpgSign',
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
    'alias.co',
    'pager.log',
    'foo.bar.helper',
    'gpg.ssh.defaultKeyCommand',
  ])('refuses %s: it runs a program', (key) => {
    expect(gitConfigKeyProblem(key)).toBe(
      'is not allowed: it makes git run a program, read more configuration or use another transport',
    );
  });

  it.each([
    'http.cookieFile',
    'http.saveCookies',
    'http.https://example.com/.cookieFile',
    'core.worktree',
    'core.excludesFile',
    'core.attributesFile',
    'commit.template',
  ])('refuses %s: it names a file', (key) => {
    expect(gitConfigKeyProblem(key)).toBe(
      'is not allowed: it makes git read or write files outside its repository',
    );
  });

  it.each([
    'remote.origin.proxy',
    'branch.master.merge',
    'url.https://example.com/.pushUrl',
    'core.bare',
    'lfs.url',
    'credential.username',
  ])('refuses %s: not among the settings listed', (key) => {
    expect(gitConfigKeyProblem(key)).toBe(
      'is not allowed: only the settings listed under git_config in the README are',
    );
  });

  it.each(['user', '.name', 'user.', 'user.na me', 'user.1st'])('refuses malformed %j', (key) => {
    expect(gitConfigKeyProblem(key)).toBe('is not a git config name (section.name)');
  });
});

describe('signingProblem', () => {
  it.each([
    ['commit.gpgSign', 'false'],
    ['tag.gpgsign', 'no'],
    ['push.gpgSign', 'OFF'],
    ['commit.gpgSign', '0'],
    ['user.name', 'true'],
  ])('takes %s = %s', (name, value) => {
    expect(signingProblem(name, value)).toBeUndefined();
  });

  it.each([
    ['commit.gpgSign', 'true'],
    ['tag.gpgSign', 'yes'],
    ['push.gpgSign', 'if-asked'],
  ])('refuses %s = %s: signing would run a program', (name, value) => {
    expect(signingProblem(name, value)).toBe(
      'may only be false: the resource signs nothing (a signing program would run)',
    );
  });
});
