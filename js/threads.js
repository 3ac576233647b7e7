// The threaded wasm builds (wasm-threads/ for pipelines, wasm-train-threads/ for fineTune):
// how many threads a call gets, and starting a build's pool of workers. Shared memory needs a
// cross-origin isolated page, and waiting on other threads a Web Worker, so more than one
// thread runs only in a worker of an isolated page.

import { isNode } from './platform.js';
import { describe } from './checks.js';

/**
 * The CPU threads the host kernels get: `threads` (a number, or "auto", the default: every
 * core where a threaded build can run, else 1). Asked for where it cannot run, an Error that
 * says why; `inWorker` names the call that runs the same in a worker ("pipelineInWorker" or
 * "fineTuneInWorker"), `alternative` what else would do (or '').
 */
export function threadCount(threads = 'auto', device = 'auto', { inWorker: workerCall, alternative }) {
  const inWorker = typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope;
  const isolated = globalThis.crossOriginIsolated === true;
  const cores = Math.min(globalThis.navigator?.hardwareConcurrency ?? 1, 16);
  if (threads === 'auto') return !isNode && inWorker && isolated && device !== 'webgpu' && hasRelaxedSimd() ? Math.max(cores, 1) : 1;
  if (!Number.isInteger(threads) || threads < 1 || threads > 64) throw new TypeError(`sesame-lm: threads must be "auto" or an integer from 1 to 64, got ${describe(threads)}`);
  if (threads === 1) return 1;
  const orElse = alternative ? `, or ${alternative}` : '';
  if (isNode) throw new Error(`sesame-lm: threads > 1 needs a browser (the threaded wasm build starts Web Workers)${alternative ? `; in Node.js ${alternative}` : ''}`);
  if (!isolated) throw new Error(`sesame-lm: threads: ${threads} needs a cross-origin isolated page (crossOriginIsolated is false): serve it with the headers "Cross-Origin-Opener-Policy: same-origin" and "Cross-Origin-Embedder-Policy: require-corp"${orElse}`);
  if (!inWorker) throw new Error(`sesame-lm: threads: ${threads} needs a Web Worker (a page's main thread may not wait for other threads): use ${workerCall}(task, model, { threads: ${threads} })`);
  if (!hasRelaxedSimd()) throw new Error(`sesame-lm: threads: ${threads} needs WebAssembly relaxed SIMD, which this browser lacks (the threaded build multiplies with its fused multiply-add)${orElse}`);
  return threads;
}

/**
 * Whether this browser's WebAssembly has relaxed SIMD, which the threaded builds use: a
 * function of one f32x4.relaxed_madd must validate.
 */
function hasRelaxedSimd() {
  const probe = new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b, // type: (v128, v128, v128) -> v128
    0x03, 0x02, 0x01, 0x00, // one function of that type
    0x0a, 0x0d, 0x01, 0x0b, 0x00, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0xfd, 0x85, 0x02, 0x0b, // its body: f32x4.relaxed_madd
  ]);
  try {
    return WebAssembly.validate(probe);
  } catch {
    return false;
  }
}

/** How long a threaded build's pool of workers may take to start. */
const POOL_START_SECONDS = 60;

/**
 * Instantiates a threaded build's glue (`threaded`, from `source` or where the glue finds
 * its file) and starts its pool of `threads` workers; resolves to the instance's exports.
 */
export async function startThreaded(threaded, source, threads) {
  const exports = await threaded.default(source === undefined ? undefined : { module_or_path: source });
  // The pool's workers report only when they are ready: one that cannot start (a page whose
  // Content-Security-Policy refuses blob: workers) would leave this waiting for ever.
  let timer;
  const stalled = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`sesame-lm: the ${threads} threads of the wasm module did not start within ${POOL_START_SECONDS} s (does the page's Content-Security-Policy allow blob: workers?); use threads: 1`)), POOL_START_SECONDS * 1000);
  });
  await Promise.race([threaded.initThreadPool(threads), stalled]).finally(() => clearTimeout(timer));
  return exports;
}
