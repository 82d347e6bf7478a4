// A claim's token is a random UUID made without node:crypto (lazy-builtins.ts): it must still be
// one, as crypto.randomUUID() makes them, and never repeat.
import { describe, expect, it } from 'vitest';
import { randomUuid } from '../../src/base/lazy-builtins.js';

const VERSION_4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('randomUuid', () => {
  it('makes version 4 UUIDs of the RFC 4122 variant, each a new one', () => {
    const ids = Array.from({ length: 2000 }, () => randomUuid());
    for (const id of ids) expect(id).toMatch(VERSION_4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('uses all of the random bits it does not fix', () => {
    // 122 random bits: across 2000 UUIDs every hex place but the version's takes several values.
    const ids = Array.from({ length: 2000 }, () => randomUuid().replaceAll('-', ''));
    for (let place = 0; place < 32; place++) {
      const seen = new Set(ids.map((id) => id[place]));
      if (place === 12) expect([...seen]).toEqual(['4']);
      else if (place === 16) expect([...seen].sort()).toEqual(['8', '9', 'a', 'b']);
      else expect(seen.size).toBe(16);
    }
  });
});
