// `npm run bench:browser`: runs www/bench.html in headless Chromium (WebGPU; SwiftShader
// without a GPU) and prints one JSON object per benchmark. Needs `npm run build` and
// scripts/fetch-models.sh first (npm run demo does both). `--runs N`: timed runs per latency;
// `--elmo small,original|none`: the ELMo shapes to run (default both; original takes minutes).
// `--device auto|webgpu|wasm`: where the models run (default auto: wasm SIMD on SwiftShader).
// `--threads auto|N`: the wasm device's threads (default auto: every core — the page is served
// cross-origin isolated, as the demo is, so the benchmark's worker runs the threaded build;
// 1: the plain build). `--dtypes fp32,q8,…`: the weight precisions of MiniLM and GPT-2
// (default fp32).

import { start } from '../tests/browser/harness.mjs';
import { ISOLATION_HEADERS } from './serve.mjs';

const h = await start({ headers: ISOLATION_HEADERS });
try {
  const page = await h.browser.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e}`));
  const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
  const query = new URLSearchParams({
    auto: '1',
    runs: arg('--runs', '5'),
    elmo: arg('--elmo', 'small,original'),
    device: arg('--device', 'auto'),
    threads: arg('--threads', 'auto'),
    dtypes: arg('--dtypes', 'fp32'),
  });
  await page.goto(`${h.base}/bench.html?${query}`);
  await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 2_400_000 });
  const error = await page.evaluate(() => window.benchError);
  if (error) throw new Error(error);
  for (const record of await page.evaluate(() => window.benchResult)) console.log(JSON.stringify(record));
} finally {
  await h.close();
}
