// `npm run bench:browser`: runs www/bench.html in headless Chromium (WebGPU; SwiftShader
// without a GPU) and prints one JSON object per benchmark. Needs `npm run build` and
// scripts/fetch-models.sh first (npm run demo does both). `--runs N`: timed runs per latency;
// `--elmo small,original|none`: the ELMo shapes to run (default both; original takes minutes).
// `--device auto|webgpu|wasm`: where the models run (default auto: wasm SIMD on SwiftShader).

import { start } from '../tests/browser/harness.mjs';

const h = await start();
try {
  const page = await h.browser.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e}`));
  const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
  const query = new URLSearchParams({ auto: '1', runs: arg('--runs', '5'), elmo: arg('--elmo', 'small,original'), device: arg('--device', 'auto') });
  await page.goto(`${h.base}/bench.html?${query}`);
  await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 2_400_000 });
  const error = await page.evaluate(() => window.benchError);
  if (error) throw new Error(error);
  for (const record of await page.evaluate(() => window.benchResult)) console.log(JSON.stringify(record));
} finally {
  await h.close();
}
