// Every demo page as a visitor on a given screen width sees it: loaded, its default example
// run, and measured for anything wider than the screen. Shared by the narrow-screen test and
// scripts/screenshots.mjs.

/** The demo's pages. */
export const PAGES = ['index.html', 'fill-mask.html', 'generate.html', 'similarity.html', 'sentiment.html', 'tags.html', 'next-sentence.html', 'perplexity.html',
  'attention.html', 'elmo.html', 'teach.html', 'models.html', 'bench.html'];

/** Pages whose run takes minutes: shown before it. */
const NOT_RUN = new Set(['bench.html']);

/** Examples in the tiny models' words, for a quick "Teach it" run. */
const TINY_EXAMPLES = ['the sun shone\thappy', 'cold rain fell\tsad', 'she was happy\thappy', 'dark night\tsad', 'the bird sang\thappy',
  'the town slept\tsad', 'warm fire\thappy', 'long cold night\tsad', 'children played with ball\thappy', 'rain fell on roof\tsad'].join('\n');

/**
 * Trains "Teach it" on its page: with `real`, its default run (MiniLM on the bundled SST-2 sample);
 * else the tiny random BERT on ten examples (seconds). Then "Try it" is ready to run.
 */
async function teach(page, real) {
  if (real) {
    await page.click('#sample');
  } else {
    await page.fill('#examples', TINY_EXAMPLES);
    await page.dispatchEvent('#examples', 'input');
    await page.selectOption('#model', '2');
    await page.fill('#lr', '1e-2');
  }
  await page.click('#train');
  await page.waitForFunction(() => !document.getElementById('try').hidden && document.getElementById('run-status').textContent === '', null, { timeout: 600_000 });
}

/**
 * Opens `name` at `width` × 900 px, waits for its model, runs its example once (where it has a
 * Run button, and the run is quick), and returns {page, overflow: the page's width past the screen in px, wide: the
 * widest elements past it}. The caller closes the page. `realRuns`: "Teach it" trains MiniLM
 * (minutes) instead of a tiny model.
 */
export async function visitPage(browser, base, name, width, { realRuns = false } = {}) {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  await page.goto(`${base}/${name}`);
  if (name === 'teach.html') await teach(page, realRuns);
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
