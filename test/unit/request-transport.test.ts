import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../src/base/errors.js';
import { isSshUri, parseCheckRequest } from '../../src/protocol/request.js';

const ENCRYPTED_WITHOUT_PASSPHRASE = `-----BEGIN RSA PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-128-CBC,00000000000000000000000000000000

AAAA
-----END RSA PRIVATE KEY-----`;

async function problems(source: Record<string, unknown>): Promise<readonly string[]> {
  try {
    await parseCheckRequest(JSON.stringify({ source: { branch: 'main', pool: 'p', ...source } }));
    return [];
  } catch (error) {
    if (error instanceof ConfigurationError) return error.lines;
    throw error;
  }
}

describe('transport fields of source', () => {
  it.each([
    ['git@github.com:org/locks.git', true],
    ['github.com:locks', true],
    ['ssh://git@host:2222/locks.git', true],
    ['git+ssh://host/locks', true],
    ['https://host/locks.git', false],
    ['git://host/locks', false],
    ['file:///srv/locks', false],
    ['/srv/locks.git', false],
    ['./a:b', false],
  ])('isSshUri(%s) is %s', (uri, expected) => {
    expect(isSshUri(uri)).toBe(expected);
  });

  it('reports key, known_hosts and other problems all at once', async () => {
    expect(
      await problems({
        uri: 'git@host:locks',
        retry_delay: 'soon',
        private_key: ENCRYPTED_WITHOUT_PASSPHRASE,
        known_hosts: 'host',
        git_config: [{ name: 'core.sshCommand', value: 'x' }],
      }),
    ).toEqual([
      expect.stringMatching(/^invalid payload \(git_config: "core.sshCommand" is not allowed/),
      expect.stringMatching(/^invalid payload \(retry_delay: /),
      'invalid payload (private_key is encrypted: set private_key_passphrase)',
      'invalid payload (known_hosts: line 1 is not "HOSTS KEYTYPE KEY" (as ssh-keyscan prints))',
    ]);
  });

  it('ignores private_key for a URI git does not reach over SSH, as the reference did', async () => {
    expect(await problems({ uri: 'https://host/locks.git', private_key: 'leftover' })).toEqual([]);
  });

  it('refuses forward_agent without known_hosts only where the run may go over SSH', async () => {
    const refusal =
      'invalid payload (forward_agent needs known_hosts: an unchecked host could use the forwarded key)';
    expect(await problems({ uri: 'git@host:locks', forward_agent: true })).toEqual([refusal]);
    // A URL rewrite may lead to SSH whatever the uri says.
    const rewrite = [{ name: 'url.git@host:.insteadOf', value: 'https://host/' }];
    expect(
      await problems({ uri: 'https://host/locks.git', forward_agent: true, git_config: rewrite }),
    ).toEqual([refusal]);
    // Elsewhere it forwards nothing, and a resource that sets it works as with the reference.
    for (const uri of ['https://host/locks.git', 'git://host/locks', '/srv/locks.git'])
      expect(await problems({ uri, forward_agent: true })).toEqual([]);
  });

  it('treats an empty private_key as absent', async () => {
    const { request } = await parseCheckRequest(
      JSON.stringify({ source: { uri: 'git@h:l', branch: 'm', pool: 'p', private_key: '' } }),
    );
    expect(request.source.privateKey).toBeUndefined();
  });
});
