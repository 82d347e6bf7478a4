// `pool report --html` in a real browser (headless Chromium through playwright-core): the page
// loads with no request beyond itself, shows one timeline row per lock with a bar per hold, the
// figures, holders and waiting line of a history with known holds and waits, and renders.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { linePrefix } from '../../src/lock/line-entry.js';
import { git, type LockRepo } from '../helpers/lock-repo.js';
import { buildUrl, knownHistory } from '../helpers/report-history.js';
import { runScript, tempDir } from '../helpers/run-script.js';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium)
  console.warn(
    `pool report browser test skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium; .ci/run installs it)`,
  );

/** Where the screenshot is kept for a person to look at. */
export const SCREENSHOT = join(import.meta.dirname, '../../build/pool-report.png');

let repo: LockRepo | undefined;
let browser: BrowserContext | undefined;
const folders: string[] = [];
afterEach(async () => {
  await browser?.close();
  browser = undefined;
  await repo?.cleanup();
  repo = undefined;
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

async function launch(): Promise<BrowserContext> {
  const profile = await tempDir('pool-report-profile-');
  folders.push(profile);
  // An empty profile and nothing running in the background: the only request is the page's.
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1100, height: 900 },
  });
}

describe('pool report --html in Chromium', () => {
  it.skipIf(!hasChromium)(
    'shows a row per lock, a bar per hold, the figures, holders and line, and nothing else loads',
    async () => {
      const known = await knownHistory();
      repo = known.repo;
      // A put for two locks waiting for five minutes, as its ref in the line says, and who it is.
      const waitingSince = known.now - 5 * 60_000;
      const tip = (await git(repo.bare, 'rev-parse', repo.branch)).trim();
      await git(
        repo.bare,
        'update-ref',
        `${linePrefix(repo.branch, 'pool')}${waitingSince}-10000-waiter-2.main%2Fdeploy%2Fe2e%20%239`,
        tip,
      );
      const out = await tempDir('pool-report-');
      folders.push(out);
      const file = join(out, 'report.html');
      const result = await runScript('pool', '', {
        args: [
          'report',
          ...['--uri', repo.bare, '--branch', repo.branch, '--pool', 'pool'],
          ...['--html', file, '--since', '2h'],
        ],
      });
      expect(result.code).toBe(0);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^wrote the report of pool "pool" since .* to .*report\.html/);

      browser = await launch();
      const page = await browser.newPage();
      const requests: string[] = [];
      page.on('request', (request) => requests.push(request.url()));
      await page.goto(pathToFileURL(file).href);
      expect(requests).toEqual([pathToFileURL(file).href]);

      // One timeline row per lock, one bar per hold, widths in proportion to the holds.
      const rows = page.locator('svg.timeline .lock-row');
      expect(
        await rows.evaluateAll((all) => all.map((row) => row.getAttribute('data-lock'))),
      ).toEqual(['a', 'b', 'c', 'd']);
      const bars = async (lock: string) =>
        page.locator(`.lock-row[data-lock="${lock}"] rect.hold`).evaluateAll((all) =>
          all.map((bar) => ({
            width: Number(bar.getAttribute('width')),
            holder: bar.getAttribute('data-holder'),
            title: bar.querySelector('title')?.textContent ?? '',
            open: bar.classList.contains('open'),
          })),
        );
      const a = await bars('a');
      expect(a.map((bar) => bar.holder)).toEqual([
        'main/deploy/build #1',
        'main/deploy/build #2',
        'main/deploy/build #3',
      ]);
      expect(a[0]!.width / a[1]!.width).toBeCloseTo(30 / 15, 1);
      expect(a[1]!.width / a[2]!.width).toBeCloseTo(15 / 10, 1);
      expect(a[1]!.title).toContain('waited 1m');
      const b = await bars('b');
      expect(b).toHaveLength(1);
      expect(b[0]).toMatchObject({ holder: 'main/deploy/smoke #40', open: true });
      expect(b[0]!.title).toContain(buildUrl('smoke', 40));
      expect(b[0]!.title).toContain('wait unknown');
      expect(await bars('c')).toEqual([]);
      const d = await bars('d');
      expect(d).toHaveLength(1);
      expect(d[0]!.width / a[0]!.width).toBeCloseTo(1, 1);

      const cells = (table: string) =>
        page
          .locator(`table.${table} tbody tr`)
          .evaluateAll((trs) =>
            trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
          );
      // b is held to the window's end and d from its start: the report's own clock says where.
      const window = async (which: string) =>
        Date.parse((await page.locator(`time.${which}`).textContent()) ?? '');
      const since = await window('since');
      const until = await window('until');
      const percent = (ms: number) =>
        `${((Math.round((ms / (until - since)) * 1e4) / 1e4) * 100).toFixed(1)}%`;
      expect(await cells('figures')).toEqual([
        ['a', '45.8%', '3', '1m', '2m30s', '2m30s', '0'],
        ['b', percent(until - (known.now - 50 * 60_000)), '1', '–', '–', '–', '1'],
        ['c', '0.0%', '0', '–', '–', '–', '0'],
        ['d', percent(known.now - 90 * 60_000 - since), '0', '–', '–', '–', '0'],
      ]);
      const holders = await cells('holders');
      expect(holders).toHaveLength(1);
      expect(holders[0]!.slice(0, 3)).toEqual([
        'b',
        'main/deploy/smoke #40',
        buildUrl('smoke', 40),
      ]);
      expect(holders[0]![4]).toBe('none');
      const waiting = await cells('waiting');
      expect(waiting).toHaveLength(1);
      expect(waiting[0]!.slice(0, 3)).toEqual(['1', 'main/deploy/e2e #9', '2']);
      expect(waiting[0]![4]).toMatch(/^5m/);

      await mkdir(join(SCREENSHOT, '..'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      // Not blank: the screenshot, drawn on a canvas of an empty page, has many colours.
      const png = (await readFile(SCREENSHOT)).toString('base64');
      const blank = await browser.newPage();
      // A string, not a function: the tests are type-checked without the DOM's types.
      const colours = await blank.evaluate<number>(`(async () => {
        const image = new Image();
        image.src = 'data:image/png;base64,${png}';
        await image.decode();
        const canvas = document.createElement('canvas');
        canvas.width = image.width;
        canvas.height = image.height;
        const context = canvas.getContext('2d');
        context.drawImage(image, 0, 0);
        const pixels = context.getImageData(0, 0, image.width, image.height).data;
        const seen = new Set();
        for (let i = 0; i < pixels.length; i += 4)
          seen.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]);
        return seen.size;
      })()`);
      expect(colours).toBeGreaterThan(8);
    },
    60_000,
  );
});
