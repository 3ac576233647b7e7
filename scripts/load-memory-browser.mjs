// The memory peak of loading a model in the browser (headless Chromium): the peak resident set
// (VmHWM) of the renderer and of the GPU process (where SwiftShader's WebGPU buffers live)
// after `loadModel(url)` and one forward pass, for each model folder given (default: those
// scripts/load-memory.sh makes), on the wasm device or (`--device webgpu`) WebGPU. A model that
// cannot load gets a row with the error.
//   node scripts/load-memory-browser.mjs [--device wasm|webgpu] [MODEL_DIR ...]
// Prints Markdown table rows (BENCHMARKS.md, "Loading memory").

import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { MOUNTS } from './serve.mjs';
import { start } from '../tests/browser/harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = process.argv.slice(2);
const device = args[0] === '--device' ? args.splice(0, 2)[1] : 'wasm';
const dirs = args.length ? args : ['bert-base-single', 'bert-base-sharded', 'gpt2-large-single', 'gpt2-large-sharded'].map((d) => path.join(root, 'target/load-memory', d));

/** Peak and current resident set of a process, in MB. */
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]);
  return { peak: Math.round(kb('VmHWM') / 1000), now: Math.round(kb('VmRSS') / 1000) };
}

for (const dir of dirs) {
  const weights = readdirSync(dir).filter((f) => f.endsWith('.safetensors')).reduce((n, f) => n + statSync(path.join(dir, f)).size, 0);
  // A fresh browser a model, so that each peak is its own.
  const h = await start({ mounts: [['/model/', dir], ...MOUNTS] });
  const page = await h.browser.newPage();
  await page.goto(`${h.base}/tests/browser/blank.html`);
  const cdp = await h.browser.newBrowserCDPSession();
  const { processInfo } = await cdp.send('SystemInfo.getProcessInfo');
  const pids = (type) => processInfo.filter((p) => p.type === type).map((p) => p.id);
  const measure = (type) => {
    const each = pids(type).map(memory);
    return { peak: Math.max(0, ...each.map((m) => m.peak)), now: Math.max(0, ...each.map((m) => m.now)) };
  };
  const before = { renderer: measure('renderer'), gpu: measure('GPU') };
  const seconds = await page.evaluate(async (device) => {
    const sesame = await import('/dist/index.js');
    const started = performance.now();
    try {
      const model = await sesame.loadModel('/model/', { device, cache: false });
      await model.forward({ input_ids: [[101, 7592, 2088, 102]] });
      model.dispose();
    } catch (e) {
      return e.message;
    }
    return ((performance.now() - started) / 1000).toFixed(2);
  }, device);
  const after = { renderer: measure('renderer'), gpu: measure('GPU') };
  const report = (type) => `${after[type].peak} MB (${before[type].now} MB before)`;
  console.log(`| ${path.basename(dir)} | ${Math.round(weights / 1e6)} MB | Chromium, ${device} | renderer ${report('renderer')}; GPU process ${report('gpu')} | ${seconds} |`);
  await h.close();
}
