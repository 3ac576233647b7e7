// `npm run bench:transformersjs -- [--device wasm|webgpu|both] [--runs N] [--threads N] [--dtypes fp32,q8] [--webgpu-runs N] [--webgpu-tokens N] [--webgpu-batches 1,32]`:
// runs bench/transformersjs/bench.html in the same headless Chromium as `npm run bench:browser` (tests/browser/harness.mjs)
// with transformers.js, once per device in a fresh browser context, and prints one JSON object per benchmark.
// Needs `npm ci --prefix bench/transformersjs --ignore-scripts` and the ONNX exports of export_onnx.py (see README.md).
//   --runs N           timed runs per latency on wasm (default 5; generation: max(1, floor(N / 2)) runs of 32 tokens, as www/bench.js)
//   --threads N        onnxruntime-web wasm threads (default: all cores; 0: onnxruntime-web's default, ceil(cores / 2) up to 4)
//   --dtypes L         the model precisions (default fp32; q8: export_onnx.py's model_quantized.onnx, dynamic uint8)
//   --webgpu-runs N    timed runs per latency on WebGPU (default 1: SwiftShader takes seconds per MiniLM call)
//   --webgpu-tokens N  new tokens per generation on WebGPU (default 8), with 1 generation run
//   --webgpu-batches L MiniLM batch sizes on WebGPU (default 1,32; on SwiftShader one 32×128 call takes minutes, so
//                      1 alone saves most of the time)
// The server sends COOP/COEP so the page is cross-origin isolated and onnxruntime-web can use wasm threads.

import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { root, start } from '../../tests/browser/harness.mjs';
import { ISOLATION_HEADERS } from '../../scripts/serve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const cacheDir = process.env.SESAME_CACHE ?? path.join(os.homedir(), '.cache', 'sesame');
const modules = path.join(here, 'node_modules');
const onnxDir = path.join(cacheDir, 'onnx');

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const device = arg('device', 'both');
if (!['wasm', 'webgpu', 'both'].includes(device)) throw new Error(`--device must be wasm, webgpu or both, got ${device}`);
const runs = Number(arg('runs', 5));
const threads = Number(arg('threads', os.availableParallelism()));
const webgpuRuns = Number(arg('webgpu-runs', 1));
const webgpuTokens = Number(arg('webgpu-tokens', 8));
const webgpuBatches = arg('webgpu-batches', '1,32');
const dtypes = arg('dtypes', 'fp32');
if (!/^(fp32|q8)(,(fp32|q8))*$/.test(dtypes)) throw new Error(`--dtypes must be a list of fp32 and q8, got ${dtypes}`);
if (!/^\d+(,\d+)*$/.test(webgpuBatches)) throw new Error(`--webgpu-batches must be a list like 1,32, got ${webgpuBatches}`);

const need = [
  [path.join(modules, '@huggingface/transformers/dist/transformers.js'), 'npm ci --prefix bench/transformersjs --ignore-scripts'],
  [path.join(onnxDir, 'all-MiniLM-L6-v2/onnx/model.onnx'), '/work/venv-ref/bin/python bench/transformersjs/export_onnx.py'],
  [path.join(onnxDir, 'gpt2-6x384/onnx/model.onnx'), '/work/venv-ref/bin/python bench/transformersjs/export_onnx.py'],
];
for (const [file, fix] of need) if (!existsSync(file)) throw new Error(`missing ${file}: run ${fix}`);

const h = await start({
  mounts: [
    ['/tjs/', path.join(modules, '@huggingface/transformers/dist')],
    ['/ort/', path.join(modules, 'onnxruntime-web/dist')],
    ['/onnx/', onnxDir],
    ['/www/', path.join(root, 'www')],
    ['/', here],
  ],
  headers: ISOLATION_HEADERS,
});
try {
  for (const d of device === 'both' ? ['wasm', 'webgpu'] : [device]) {
    const page = await h.browser.newPage(); // a fresh context: nothing cached from the previous device
    page.on('pageerror', (e) => console.error(`page error: ${e}`));
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.error(`[${d}] console ${m.type()}: ${m.text()}`); });
    const q = d === 'webgpu' ? `runs=${webgpuRuns}&tokens=${webgpuTokens}&genruns=1&batches=${webgpuBatches}` : `runs=${runs}`;
    await page.goto(`${h.base}/bench.html?device=${d}&threads=${threads}&dtypes=${dtypes}&${q}`);
    await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 1_200_000, polling: 1000 });
    const error = await page.evaluate(() => window.benchError);
    if (error) throw new Error(`${d}: ${error}`);
    for (const record of await page.evaluate(() => window.benchResult)) console.log(JSON.stringify(record));
    await page.context().close();
  }
} finally {
  await h.close();
}
