import { describe, expect, it } from 'vitest';
import { suggestField } from '../../src/protocol/field-suggestion.js';

const PARAMS = ['acquire', 'release', 'remove', 'claim', 'add', 'add_claimed', 'update', 'check'];
const SOURCE = ['uri', 'branch', 'pool', 'private_key', 'retry_delay', 'known_hosts'];

describe('suggestField', () => {
  it.each([
    ['aquire', PARAMS, 'acquire'],
    ['acquier', PARAMS, 'acquire'],
    ['relase', PARAMS, 'release'],
    ['Release', PARAMS, 'release'],
    ['add-claimed', PARAMS, 'add_claimed'],
    ['retry_dealy', SOURCE, 'retry_delay'],
    ['knownhosts', SOURCE, 'known_hosts'],
    ['url', SOURCE, 'uri'],
    ['brnach', SOURCE, 'branch'],
  ])('%s is taken for %s', (typed, known, meant) => {
    expect(suggestField(typed, known)).toBe(meant);
  });

  it.each([
    ['timeout', PARAMS],
    ['paths', SOURCE],
    ['tag_filter', SOURCE],
    ['x', SOURCE],
    ['a'.repeat(100_000), SOURCE],
  ])('%s is too far from every field to suggest one', (typed, known) => {
    expect(suggestField(typed, known)).toBeUndefined();
  });
});
