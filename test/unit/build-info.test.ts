import { describe, expect, it } from 'vitest';
import { buildInfoFromEnv, buildLabel, commitMessage } from '../../src/protocol/build-info.js';

const JOB_BUILD = {
  ATC_EXTERNAL_URL: 'https://ci.example.com',
  BUILD_TEAM_NAME: 'main',
  BUILD_PIPELINE_NAME: 'deploy',
  BUILD_JOB_NAME: 'smoke-test',
  BUILD_NAME: '42',
  BUILD_ID: '1234',
};

describe('buildInfoFromEnv', () => {
  it('uses BUILD_URL when Concourse sets it (v8 and later)', () => {
    expect(
      buildInfoFromEnv({ ...JOB_BUILD, BUILD_URL: 'https://ci.example.com/builds/1234' }).url,
    ).toBe('https://ci.example.com/builds/1234');
  });

  it('builds the job build URL from ATC_EXTERNAL_URL and the BUILD_* variables', () => {
    expect(buildInfoFromEnv(JOB_BUILD)).toEqual({
      url: 'https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/42',
      id: '1234',
      team: 'main',
      pipeline: 'deploy',
      job: 'smoke-test',
      name: '42',
    });
  });

  it('treats an empty BUILD_URL as unset', () => {
    expect(buildInfoFromEnv({ ...JOB_BUILD, BUILD_URL: '' }).url).toBe(
      'https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/42',
    );
  });

  it('drops trailing slashes of ATC_EXTERNAL_URL and escapes each part', () => {
    expect(
      buildInfoFromEnv({
        ...JOB_BUILD,
        ATC_EXTERNAL_URL: 'https://ci.example.com/',
        BUILD_JOB_NAME: 'test & deploy',
        BUILD_NAME: '42.1',
      }).url,
    ).toBe(
      'https://ci.example.com/teams/main/pipelines/deploy/jobs/test%20%26%20deploy/builds/42.1',
    );
  });

  it('adds the instance vars of an instanced pipeline', () => {
    expect(
      buildInfoFromEnv({ ...JOB_BUILD, BUILD_PIPELINE_INSTANCE_VARS: '{"branch":"main"}' }).url,
    ).toBe(
      'https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/42?vars=%7B%22branch%22%3A%22main%22%7D',
    );
  });

  it('points a one-off build (no job) at /builds/BUILD_ID', () => {
    expect(
      buildInfoFromEnv({
        ATC_EXTERNAL_URL: 'https://ci.example.com',
        BUILD_TEAM_NAME: 'main',
        BUILD_NAME: '7',
        BUILD_ID: '999',
      }).url,
    ).toBe('https://ci.example.com/builds/999');
  });

  it('has no URL outside Concourse', () => {
    expect(buildInfoFromEnv({})).toEqual({
      url: undefined,
      id: undefined,
      team: undefined,
      pipeline: undefined,
      job: undefined,
      name: undefined,
    });
    expect(buildInfoFromEnv({ BUILD_NAME: '1', BUILD_ID: '2' }).url).toBeUndefined();
  });
});

describe('buildLabel', () => {
  it.each([
    [
      {
        BUILD_TEAM_NAME: 'main',
        BUILD_PIPELINE_NAME: 'deploy',
        BUILD_JOB_NAME: 'it',
        BUILD_NAME: '7',
        BUILD_ID: '99',
      },
      'main/deploy/it #7',
    ],
    // A one-off build has no job: its id, as Concourse's UI names it.
    [{ BUILD_ID: '99', ATC_EXTERNAL_URL: 'https://ci.example.com' }, 'build #99'],
    [{ BUILD_URL: 'https://ci.example.com/builds/99' }, 'https://ci.example.com/builds/99'],
    [{}, undefined],
  ])('%j says %s', (env, label) => {
    expect(buildLabel(buildInfoFromEnv(env))).toBe(label);
  });
});

describe('commitMessage', () => {
  it('is the subject, a blank line and the Build URL line', () => {
    expect(commitMessage('unclaiming: lock-a', buildInfoFromEnv(JOB_BUILD))).toBe(
      'unclaiming: lock-a\n\nBuild URL: https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/42\n',
    );
  });

  it('still has the Build URL line outside Concourse', () => {
    expect(commitMessage('adding unclaimed: x', {})).toBe(
      'adding unclaimed: x\n\nBuild URL: unknown\n',
    );
  });

  it('adds holder trailers to a claiming commit, after the Build URL line', () => {
    const message = commitMessage('claiming: lock-a', buildInfoFromEnv(JOB_BUILD), {
      token: 'b7c2a1e0-token',
      at: new Date('2026-03-01T12:34:56.789Z'),
      waitedMs: 90_500,
    });
    expect(message).toBe(
      [
        'claiming: lock-a',
        '',
        'Build URL: https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/42',
        '',
        'Claim-Token: b7c2a1e0-token',
        'Claimed-At: 2026-03-01T12:34:56Z',
        'Claimed-By: https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/42',
        'Build-Id: 1234',
        'Build-Team: main',
        'Build-Pipeline: deploy',
        'Build-Job: smoke-test',
        'Build-Name: 42',
        'Waited: 1m30.5s',
        '',
      ].join('\n'),
    );
  });

  it('keeps each trailer on one line whatever the variables hold', () => {
    const message = commitMessage(
      'claiming: lock-a',
      { url: 'u', job: 'evil\nClaim-Token: forged' },
      { token: 't', at: new Date(0), waitedMs: 0 },
    );
    expect(message).toContain('Build-Job: evil Claim-Token: forged\n');
    expect(message.match(/^Claim-Token:/gm)).toHaveLength(1);
  });
});

describe('commitMessage from the pool command', () => {
  it('an explicit holder replaces the build URL in Claimed-By', () => {
    const at = new Date('2026-11-29T17:50:00.123Z');
    expect(
      commitMessage('claiming: a', {}, { token: 't', at, by: 'alice@desk', waitedMs: 0 }),
    ).toContain('Claimed-By: alice@desk\n');
  });
});
