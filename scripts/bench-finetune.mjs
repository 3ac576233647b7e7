// `npm run bench:finetune`: fine-tuning MiniLM-L6 (text-classification, batch 16 × 64 tokens)
// in headless Chromium on the CPU path — fineTuneInWorker on a cross-origin isolated page: the
// training module on 1 thread, the threaded one on 2 — beside PyTorch eager on this machine
// (scripts/bench-finetune-pytorch.py) on 1 and 2 threads. Prints one JSON line per runtime and
// thread count: examples per second and peak memory. Needs `npm run build` and
// scripts/fetch-models.sh first; `--python PATH` is the Python with torch and transformers
// (default python3), `--steps N` the timed steps (default 8, after one untimed).

import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { start } from '../tests/browser/harness.mjs';
import { ISOLATION_HEADERS } from './serve.mjs';

const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const steps = Number(arg('--steps', '8'));
const python = arg('--python', 'python3');
const [BATCH, LENGTH] = [16, 64];
const cache = process.env.SESAME_CACHE ?? path.join(process.env.HOME, '.cache/sesame');

const h = await start({ headers: ISOLATION_HEADERS });
try {
  const page = await h.browser.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e}`));
  await page.goto(`${h.base}/tests/browser/blank.html`);
  for (const threads of [1, 2]) {
    const record = await page.evaluate(async ({ steps, BATCH, LENGTH, threads }) => {
      const sesame = await import('/dist/index.js');
      // Sentences longer than LENGTH tokens, so that every batch is BATCH × LENGTH.
      const words = 'the film is a quiet and generous portrait of people who keep going when nothing goes their way'.split(' ');
      const train = Array.from({ length: BATCH * (steps + 1) }, (_, i) => ({
        text: Array.from({ length: LENGTH + 8 }, (_, j) => words[(i * 7 + j) % words.length]).join(' '), label: i % 2 ? 'positive' : 'negative',
      }));
      const times = [];
      let memory = 0;
      const run = await sesame.fineTuneInWorker('text-classification', '/models/all-MiniLM-L6-v2/', {
        train, epochs: 1, batchSize: BATCH, maxLength: LENGTH, shuffle: false, device: 'wasm', threads,
        onProgress: (p) => { if (p.status === 'training') { times.push(performance.now()); memory = p.memoryBytes; } },
      });
      run.dispose();
      const seconds = (times.at(-1) - times[0]) / 1000 / (times.length - 1);
      return { runtime: `Sesame (Chromium ${navigator.userAgent.match(/Chrome\/([\d.]+)/)?.[1]}, wasm SIMD${run.threads > 1 ? ', threaded module' : ''})`, threads: run.threads,
        batch_size: BATCH, length: LENGTH, step_ms: Math.round(10000 * seconds) / 10, examples_per_s: Math.round((100 * BATCH) / seconds) / 100, peak_wasm_memory_bytes: memory };
    }, { steps, BATCH, LENGTH, threads });
    console.log(JSON.stringify(record));
  }
} finally {
  await h.close();
}
for (const threads of [1, 2]) {
  const out = execFileSync(python, [path.join(import.meta.dirname, 'bench-finetune-pytorch.py'), '--model', path.join(cache, 'models/all-MiniLM-L6-v2'),
    '--threads', String(threads), '--steps', String(steps), '--batch-size', String(BATCH), '--length', String(LENGTH)],
  { encoding: 'utf8', env: { ...process.env, TRANSFORMERS_VERBOSITY: 'error', HF_HUB_DISABLE_PROGRESS_BARS: '1', TQDM_DISABLE: '1' } });
  console.log(out.trim().split('\n').at(-1));
}
