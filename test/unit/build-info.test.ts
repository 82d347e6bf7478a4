import { describe, expect, it } from 'vitest';
import { buildInfoFromEnv, commitMessage } from '../../src/build-info.js';

describe('buildInfoFromEnv', () => {
  const cases: [string, Record<string, string>, string | undefined][] = [
    [
      'BUILD_URL wins',
      { BUILD_URL: 'https://ci/b/1', ATC_EXTERNAL_URL: 'https://x' },
      'https://ci/b/1',
    ],
    [
      'job build from ATC_EXTERNAL_URL and BUILD_*',
      {
        ATC_EXTERNAL_URL: 'https://ci.example.com/',
        BUILD_TEAM_NAME: 'main',
        BUILD_PIPELINE_NAME: 'p',
        BUILD_JOB_NAME: 'j',
        BUILD_NAME: '3',
      },
      'https://ci.example.com/teams/main/pipelines/p/jobs/j/builds/3',
    ],
    [
      'instanced pipeline keeps its vars',
      {
        ATC_EXTERNAL_URL: 'https://ci',
        BUILD_TEAM_NAME: 'main',
        BUILD_PIPELINE_NAME: 'p',
        BUILD_JOB_NAME: 'j',
        BUILD_NAME: '3',
        BUILD_PIPELINE_INSTANCE_VARS: '{"env":"a"}',
      },
      'https://ci/teams/main/pipelines/p/jobs/j/builds/3?vars=%7B%22env%22%3A%22a%22%7D',
    ],
    ['one-off build', { ATC_EXTERNAL_URL: 'https://ci', BUILD_ID: '42' }, 'https://ci/builds/42'],
    ['nothing known', {}, undefined],
    [
      'empty BUILD_URL is ignored',
      { BUILD_URL: '', ATC_EXTERNAL_URL: 'https://ci', BUILD_ID: '7' },
      'https://ci/builds/7',
    ],
  ];
  for (const [title, env, url] of cases) {
    it(title, () => expect(buildInfoFromEnv(env).url).toBe(url));
  }
});

describe('commitMessage', () => {
  const at = new Date('2026-11-29T17:50:00.123Z');

  it('non-claiming commits: subject and Build URL line only', () => {
    expect(commitMessage('unclaiming: a', { url: 'https://ci/b/1' })).toBe(
      'unclaiming: a\n\nBuild URL: https://ci/b/1\n',
    );
  });

  it('claiming commits: a trailer block after the Build URL line', () => {
    expect(
      commitMessage(
        'claiming: a',
        { url: 'https://ci/b/1', id: '1', job: 'j' },
        { token: 't', at },
      ),
    ).toBe(
      'claiming: a\n\nBuild URL: https://ci/b/1\n\n' +
        'Claim-Token: t\nClaimed-At: 2026-11-29T17:50:00Z\nClaimed-By: https://ci/b/1\n' +
        'Build-Id: 1\nBuild-Job: j\n',
    );
  });

  it('an explicit holder (the pool command) replaces the build URL in Claimed-By', () => {
    expect(commitMessage('claiming: a', {}, { token: 't', at, by: 'alice@desk' })).toContain(
      'Claimed-By: alice@desk\n',
    );
  });

  it('control characters cannot break a trailer into two', () => {
    const message = commitMessage(
      'claiming: a',
      { job: 'j\nClaimed-By: evil' },
      { token: 't', at },
    );
    expect(message).toContain('Build-Job: j Claimed-By: evil\n');
    expect(message.match(/^Claimed-By:/gm)).toHaveLength(1);
  });
});
