#!/usr/bin/env node
// How early the front of the waiting line starts polling fast for a release, and how often a
// release still comes before that, for each margin taken off a claim plus the shortest hold seen
// (releasePlausibleAt in src/lock/waiting-line.ts). Commit times are kept to the second, so the
// holds the history shows are ⌊release⌋ − ⌊claim⌋; each hold here is `--hold` seconds plus up to
// `--jitter` more, claims fall anywhere in their second, and the shortest of the last eight holds
// seen predicts the next. Nothing here runs git; `npm run bench` measures.
//
//   node scripts/hold-margin-model.mjs [--hold 5.2] [--runs 20000] [--poll 0.2]
//
// "early" is a release before the fast polls begin (noticed at the next retry_delay poll, as the
// reference would notice it); "window" is how long the fast polls run before a release, on average.
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    hold: { type: 'string', default: '5.2' },
    runs: { type: 'string', default: '20000' },
    poll: { type: 'string', default: '0.2' },
  },
});
const hold = Number(values.hold);
const runs = Number(values.runs);
const poll = Number(values.poll);

for (const jitter of [0.3, 1, 2])
  for (const margin of [1, 0.5, 0]) {
    const sample = () => {
      const claim = 1000 + Math.random() * 1000;
      return { claim, release: claim + hold + Math.random() * jitter };
    };
    const seen = Array.from({ length: 8 }, sample);
    let early = 0;
    let window = 0;
    for (let run = 0; run < runs; run++) {
      const shortest = Math.min(
        ...seen.map(({ claim, release }) => Math.floor(release) - Math.floor(claim)),
      );
      const next = sample();
      const fastFrom = Math.floor(next.claim) + shortest - margin - poll;
      if (fastFrom > next.release) early++;
      else window += next.release - fastFrom;
      seen.shift();
      seen.push(next);
    }
    const percent = ((100 * early) / runs).toFixed(2);
    const seconds = (window / (runs - early)).toFixed(2);
    console.log(
      `holds ${hold}–${hold + jitter} s, margin ${margin} s: early ${percent}%, window ${seconds} s`,
    );
  }
