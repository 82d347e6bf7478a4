import { describe, expect, it } from 'vitest';
import { parseSshArgs } from '../../src/transport/ssh-args.js';

describe('parseSshArgs (what git 2.39 passes with GIT_SSH_VARIANT=ssh)', () => {
  it.each([
    [
      [
        '-o',
        'SendEnv=GIT_PROTOCOL',
        '-p',
        '2222',
        'git@example.com',
        "git-upload-pack '/repo.git'",
      ],
      {
        user: 'git',
        host: 'example.com',
        port: 2222,
        command: "git-upload-pack '/repo.git'",
        sendEnv: ['GIT_PROTOCOL'],
      },
    ],
    [
      ['-o', 'SendEnv=GIT_PROTOCOL', 'git@github.com', "git-receive-pack 'org/locks.git'"],
      {
        user: 'git',
        host: 'github.com',
        port: 22,
        command: "git-receive-pack 'org/locks.git'",
        sendEnv: ['GIT_PROTOCOL'],
      },
    ],
    [
      ['example.com', "git-upload-pack '~/locks.git'"],
      {
        user: undefined,
        host: 'example.com',
        port: 22,
        command: "git-upload-pack '~/locks.git'",
        sendEnv: [],
      },
    ],
    [
      ['-6', '-p22', 'me@::1', "git-upload-pack '/r'"],
      {
        user: 'me',
        host: '::1',
        port: 22,
        command: "git-upload-pack '/r'",
        sendEnv: [],
        family: 6,
      },
    ],
  ])('%j', (args, expected) => {
    expect(parseSshArgs(args)).toEqual({ family: undefined, ...expected });
  });

  it.each([
    [['-G', 'example.com'], /unsupported option -G/],
    [['-p', 'x', 'h', 'cmd'], /invalid port x/],
    [['host'], /expected a host and a command/],
    [['-p'], /needs a value/],
  ])('refuses %j', (args, problem) => {
    const result = parseSshArgs(args);
    expect('problem' in result && result.problem).toMatch(problem);
  });
});
