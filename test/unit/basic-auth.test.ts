import { describe, expect, it } from 'vitest';
import { basicCredentials } from '../../src/base/basic-auth.js';

const decoded = (user?: string, password?: string) => {
  const encoded = basicCredentials(user, password);
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
};

describe('basicCredentials', () => {
  it.each([
    ['user and password', 'alice', 's3cret', 'alice:s3cret'],
    // A token as the user name: what git and the relay send has an empty password, which the
    // logger must mask as sent.
    ['a user name alone', 'TOKEN', undefined, 'TOKEN:'],
    ['a password alone', undefined, 's3cret', ':s3cret'],
    ['neither', undefined, undefined, undefined],
  ])('%s', (_, user, password, expected) => {
    expect(decoded(user, password)).toBe(expected);
  });
});
