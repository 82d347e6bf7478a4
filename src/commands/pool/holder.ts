// Who holds a lock, said short: `team/pipeline/job #build` from the claim's Build-* trailers, or
// parsed from a Concourse build URL; anything else (an operator's `user@host`) as it is.
import { buildLabel } from '../../protocol/build-info.js';

/** The value of trailer `key` in `%(trailers:only,unfold)` text; the last one wins. */
export function trailerValue(trailers: string, key: string): string | undefined {
  let value: string | undefined;
  for (const line of trailers.split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === key.toLowerCase())
      value = line.slice(colon + 1).trim();
  }
  return value;
}

const BUILD_PATH =
  /\/teams\/([^/?#]+)\/pipelines\/([^/?#]+)\/jobs\/([^/?#]+)\/builds\/([^/?#]+)(?:[?#]|$)/;
const ONE_OFF_BUILD = /\/builds\/([^/?#]+)(?:[?#]|$)/;

/** `team/pipeline/job #build`, or the holder text itself when it names no build. */
export function shortHolder(by: string, trailers = ''): string {
  const team = trailerValue(trailers, 'Build-Team');
  const pipeline = trailerValue(trailers, 'Build-Pipeline');
  const job = trailerValue(trailers, 'Build-Job');
  const name = trailerValue(trailers, 'Build-Name');
  const trailed = buildLabel({ team, pipeline, job, name });
  if (trailed) return trailed;
  const path = BUILD_PATH.exec(by);
  if (path) {
    const [t, p, j, n] = path.slice(1).map(decode);
    return buildLabel({ team: t, pipeline: p, job: j, name: n }) ?? by;
  }
  const oneOff = /^https?:\/\//.test(by) ? ONE_OFF_BUILD.exec(by) : null;
  return (oneOff && buildLabel({ id: decode(oneOff[1]!) })) || by;
}

function decode(part: string | undefined): string {
  try {
    return decodeURIComponent(part ?? '');
  } catch {
    return part ?? '';
  }
}

/** `text` cut to `width` characters, ending in … when cut. */
export function fit(text: string, width: number): string {
  const chars = [...text];
  return chars.length <= width ? text : `${chars.slice(0, Math.max(0, width - 1)).join('')}…`;
}
