// The memory peak of loading a model in the browser (headless Chromium, the wasm device): the
// renderer's peak resident set (VmHWM) after `loadModel(url)` and one forward pass, for each
// model folder given (default: scripts/load-memory.sh's bert-base, whole and sharded).
//   node scripts/load-memory-browser.mjs [MODEL_DIR ...]
// Prints Markdown table rows (BENCHMARKS.md, "Loading memory").

import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { MOUNTS } from './serve.mjs';
import { start } from '../tests/browser/harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dirs = process.argv.slice(2).length ? process.argv.slice(2) : ['bert-base-single', 'bert-base-sharded'].map((d) => path.join(root, 'target/load-memory', d));

/** Peak and current resident set of a process, in MB. */
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]);
  return { peak: Math.round(kb('VmHWM') / 1000), now: Math.round(kb('VmRSS') / 1000) };
}

for (const dir of dirs) {
  const weights = readdirSync(dir).filter((f) => f.endsWith('.safetensors')).reduce((n, f) => n + readFileSync(path.join(dir, f)).length, 0);
  // A fresh browser a model, so that each peak is its own.
  const h = await start({ mounts: [['/model/', dir], ...MOUNTS] });
  const page = await h.browser.newPage();
  await page.goto(`${h.base}/tests/browser/blank.html`);
  const cdp = await h.browser.newBrowserCDPSession();
  const { processInfo } = await cdp.send('SystemInfo.getProcessInfo');
  const renderers = processInfo.filter((p) => p.type === 'renderer').map((p) => p.id);
  const before = renderers.map(memory);
  const seconds = await page.evaluate(async () => {
    const sesame = await import('/dist/index.js');
    const started = performance.now();
    const model = await sesame.loadModel('/model/', { device: 'wasm', cache: false });
    await model.forward({ input_ids: [[101, 7592, 2088, 102]] });
    const elapsed = (performance.now() - started) / 1000;
    model.dispose();
    return elapsed;
  });
  const after = renderers.map(memory);
  const peak = Math.max(...after.map((m) => m.peak));
  console.log(`| ${path.basename(dir)} | ${Math.round(weights / 1e6)} MB | Chromium, wasm | ${peak} MB (renderer; ${Math.max(...before.map((m) => m.now))} MB before) | ${seconds.toFixed(2)} |`);
  await h.close();
}
