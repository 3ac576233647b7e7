// `npm run bench:browser`: runs www/bench.html in headless Chromium (WebGPU; SwiftShader
// without a GPU) and prints one JSON object per benchmark. Needs `npm run build` and
// scripts/fetch-models.sh first (npm run demo does both). `--runs N`: timed runs per latency.

import { start } from '../tests/browser/harness.mjs';

const h = await start();
try {
  const page = await h.browser.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e}`));
  const runs = process.argv.includes('--runs') ? Number(process.argv[process.argv.indexOf('--runs') + 1]) : 5;
  await page.goto(`${h.base}/bench.html?auto=1&runs=${runs}`);
  await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 1_200_000 });
  const error = await page.evaluate(() => window.benchError);
  if (error) throw new Error(error);
  for (const record of await page.evaluate(() => window.benchResult)) console.log(JSON.stringify(record));
} finally {
  await h.close();
}
