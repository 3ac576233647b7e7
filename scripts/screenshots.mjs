// Screenshots of every demo page (headless Chromium, the CPU path), each after its default
// example has run ("Teach it": its default run, MiniLM on the bundled SST-2 sample, minutes):
// www/screenshots/<page>-desktop.png (1280 px wide) and -phone.png (390 px).
// Fails if a page is wider than the screen. Run: node scripts/screenshots.mjs
// (after npm run build; the pretrained MiniLM from scripts/fetch-models.sh for the similarity and
// teach pages). `node scripts/screenshots.mjs teach.html` takes the pages named only.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { root, start } from '../tests/browser/harness.mjs';
import { PAGES, visitPage } from '../tests/browser/visit-pages.mjs';

const out = path.join(root, 'www/screenshots');
mkdirSync(out, { recursive: true });
const h = await start();
let failed = false;
try {
  // Pages named on the command line (teach.html …), else every page.
  const names = process.argv.slice(2).length ? process.argv.slice(2) : PAGES;
  for (const name of names) {
    for (const [label, width] of [['desktop', 1280], ['phone', 390]]) {
      const { page, overflow, wide } = await visitPage(h.browser, h.base, name, width, { realRuns: true });
      const file = path.join(out, `${name.replace('.html', '')}-${label}.png`);
      await page.screenshot({ path: file, fullPage: true });
      await page.close();
      if (overflow > 0) failed = true;
      console.log(`${path.relative(root, file)}${overflow > 0 ? `: ${overflow} px wider than the screen: ${wide.join(', ')}` : ''}`);
    }
  }
} finally {
  await h.close();
}
process.exit(failed ? 1 : 0);
