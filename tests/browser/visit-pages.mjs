// Every demo page as a visitor on a given screen width sees it: loaded, its default example
// run, and measured for anything wider than the screen. Shared by the narrow-screen test and
// scripts/screenshots.mjs.

/** The demo's pages. */
export const PAGES = ['index.html', 'fill-mask.html', 'generate.html', 'similarity.html', 'sentiment.html', 'tags.html', 'next-sentence.html', 'perplexity.html',
  'attention.html', 'elmo.html', 'models.html', 'bench.html'];

/** Pages whose run takes minutes: shown before it. */
const NOT_RUN = new Set(['bench.html']);

/**
 * Opens `name` at `width` × 900 px, waits for its model, runs its example once (where it has a
 * Run button, and the run is quick), and returns {page, overflow: the page's width past the screen in px, wide: the
 * widest elements past it}. The caller closes the page.
 */
export async function visitPage(browser, base, name, width) {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  await page.goto(`${base}/${name}`);
  // A page with a model picker says Ready (or an error) once its model is loaded.
  await page.waitForFunction(() => !document.getElementById('picker') || /^Ready|error/i.test(document.getElementById('status')?.textContent ?? ''), null, { timeout: 120_000 });
  if (!NOT_RUN.has(name) && (await page.$('#run:not([disabled])'))) {
    await page.click('#run');
    await page.waitForFunction(() => !/Working/.test(document.getElementById('run-status')?.textContent ?? ''), null, { timeout: 120_000 });
  }
  const measured = await page.evaluate((screen) => ({
    overflow: document.documentElement.scrollWidth - screen,
    wide: [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > screen + 1 && !e.closest('.scroll-x'))
      .slice(0, 3)
      .map((e) => `<${e.tagName.toLowerCase()}${e.id ? ` id=${e.id}` : ''}> ends at ${Math.round(e.getBoundingClientRect().right)} px`),
  }), width);
  return { page, ...measured };
}
