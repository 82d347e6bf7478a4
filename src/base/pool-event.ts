// The kinds of change to a pool that `check_events` chooses between (SPEC §13): named here, where
// both the request (protocol/) and the branch's history (repo/pool-events.ts) can see them.

export const POOL_EVENTS = [
  'claimed',
  'released',
  'reclaimed',
  'added',
  'removed',
  'updated',
] as const;

export type PoolEvent = (typeof POOL_EVENTS)[number];
