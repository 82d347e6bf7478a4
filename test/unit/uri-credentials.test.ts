import { describe, expect, it } from 'vitest';
import { displayUri, Logger, uriSecrets } from '../../src/base/logger.js';
import { parseOutRequest } from '../../src/protocol/request.js';
import { requestSecrets } from '../../src/protocol/request-secrets.js';

const TOKEN = 'ghp_0123456789abcdefABCDEF0123456789abcd';

describe('displayUri', () => {
  it.each([
    [`https://${TOKEN}@github.com/org/locks.git`, 'https://github.com/org/locks.git'],
    [`https://x-access-token:${TOKEN}@github.com/o/l.git`, 'https://github.com/o/l.git'],
    ['https://user:p%40ss@host:8443/l.git', 'https://host:8443/l.git'],
    ['ssh://git@example.com:2222/locks.git', 'ssh://example.com:2222/locks.git'],
    ['https://host/path@not-userinfo', 'https://host/path@not-userinfo'],
    ['git@github.com:org/locks.git', 'git@github.com:org/locks.git'],
    ['/srv/locks.git', '/srv/locks.git'],
  ])('%s is shown as %s', (uri, shown) => {
    expect(displayUri(uri)).toBe(shown);
  });
});

describe('uriSecrets', () => {
  it.each([
    [`https://${TOKEN}@github.com/o/l.git`, [TOKEN]],
    [`https://x-access-token:${TOKEN}@github.com/o/l.git`, [TOKEN, 'x-access-token']],
    ['http://user:Pa%2fss@h/l.git', ['Pa%2fss', 'Pa/ss']],
    // Short user names are account names ("git", "oauth2"), not tokens.
    ['https://oauth2:secret-value@h/l.git', ['secret-value']],
    // Over SSH the user name is the account to log in as.
    ['ssh://deploy-account@h/l.git', []],
    ['ssh://git:Pa%2fss@h/l.git', ['Pa%2fss', 'Pa/ss']],
    ['git@h:l.git', []],
  ])('%s', (uri, secrets) => {
    expect(uriSecrets(uri)).toEqual(secrets);
  });

  it('are masked from a request that fails to parse', () => {
    const log: string[] = [];
    const logger = new Logger((text) => log.push(text));
    const text = JSON.stringify({
      source: { uri: `https://${TOKEN}@host/l.git`, username: 'long-user-token-4f2a' },
    });
    for (const secret of requestSecrets(text)) logger.addSecret(secret);
    logger.error(`a message quoting ${TOKEN} and long-user-token-4f2a`);
    expect(log).toEqual(['a message quoting *** and ***\n']);
  });

  it('include the password of a proxy git_config names, with or without a scheme', () => {
    const secrets = (value: string, name = 'http.proxy') =>
      requestSecrets(JSON.stringify({ source: { git_config: [{ name, value }] } }));
    expect(secrets('http://me:pr0xy%2Fpass@proxy:3128')).toEqual(['pr0xy%2Fpass', 'pr0xy/pass']);
    expect(secrets('me:pr0xy-pass@proxy:3128', 'http.https://host/.proxy')).toEqual(['pr0xy-pass']);
    expect(secrets('http://me:pr0xy-pass@proxy:3128', 'http.sslCert')).toEqual([]);
  });
});

describe('credentials written into an HTTP(S) URI', () => {
  const parse = async (source: Record<string, unknown>) =>
    (
      await parseOutRequest(
        JSON.stringify({
          source: { branch: 'b', pool: 'p', ...source },
          params: { acquire: true },
        }),
      )
    ).request.source;

  it('move out of the URI git sees, into username and password', async () => {
    expect(await parse({ uri: `https://${TOKEN}@github.com/o/l.git` })).toMatchObject({
      uri: 'https://github.com/o/l.git',
      username: TOKEN,
      password: undefined,
    });
    expect(await parse({ uri: 'HTTP://u%40corp:p%2fss@h:8080/l.git' })).toMatchObject({
      uri: 'HTTP://h:8080/l.git',
      username: 'u@corp',
      password: 'p/ss',
    });
  });

  it("win over username and password as git's own reading would, which fill what they lack", async () => {
    expect(
      await parse({ uri: 'https://uri-user:uri-pass@h/l.git', username: 'u', password: 'p' }),
    ).toMatchObject({ username: 'uri-user', password: 'uri-pass' });
    expect(
      await parse({ uri: 'https://uri-user@h/l.git', username: 'u', password: 'p' }),
    ).toMatchObject({ username: 'uri-user', password: 'p' });
  });

  it('stay where they are in other URIs (an SSH user is the login)', async () => {
    expect(await parse({ uri: 'ssh://git@h:2222/l.git' })).toMatchObject({
      uri: 'ssh://git@h:2222/l.git',
      username: undefined,
    });
  });
});
