// transformers.js on the same benchmarks as www/bench.js measures for Sesame: MiniLM embedding latency (1×128 and
// 32×128 tokens, mean-pooled, not normalised: Sesame's feature-extraction defaults), GPT-2-shaped greedy decoding
// (6 layers × 384, vocabulary 50257, the same random weights, the same prompt, no stop at EOS), and the time from
// page load to the first result. Each latency is the median of `runs` after a warm-up, as in www/bench.js.
// Everything is served locally by run.mjs: transformers.js under /tjs/, onnxruntime-web's wasm under /ort/ and the
// ONNX exports of export_onnx.py under /onnx/.

import { env, pipeline } from '/tjs/transformers.js';
import { median, timeRuns } from '/www/timing.js';


/** Points transformers.js at the local files only; `threads`: onnxruntime-web's wasm thread count (0: its default). */
function configure(threads) {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = '/onnx/';
  env.useBrowserCache = false;
  const wasm = env.backends.onnx.wasm;
  wasm.wasmPaths = { mjs: '/ort/ort-wasm-simd-threaded.asyncify.mjs', wasm: '/ort/ort-wasm-simd-threaded.asyncify.wasm' };
  if (threads > 0) wasm.numThreads = threads;
}

/**
 * Runs every benchmark on `device` ('wasm' or 'webgpu'); `log(record)` gets each result as it is measured.
 * `batches`: the MiniLM batch sizes (of 128-token texts); `generateRuns`/`newTokens`: the generation runs (default as
 * www/bench.js: max(1, floor(runs / 2)) of 32 tokens).
 */
export async function runBench({ device = 'wasm', runs = 5, batches = [1, 32], generateRuns, newTokens = 32, threads = 0, dtypes = ['fp32'], log = () => {} } = {}) {
  configure(threads);
  let adapter = null;
  if (device === 'webgpu') {
    const a = await navigator.gpu?.requestAdapter();
    if (!a) throw new Error('no WebGPU adapter');
    adapter = a.info?.description || a.info?.architecture || a.info?.vendor || 'unknown';
  }
  const wasm = env.backends.onnx.wasm;
  const meta = () => ({
    library: 'transformers.js',
    version: env.version,
    onnxruntime_web: env.backends.onnx.versions?.web,
    device,
    wasm_threads: wasm.numThreads, // after the first session: what onnxruntime-web actually uses
    cross_origin_isolated: self.crossOriginIsolated,
    hardware_concurrency: navigator.hardwareConcurrency,
    ...(adapter ? { adapter } : {}),
  });
  const records = [];
  const record = (r) => { const full = { ...r, ...meta() }; records.push(full); log(full); };

  for (const dtype of dtypes) {
    const embed = await pipeline('feature-extraction', 'all-MiniLM-L6-v2', { device, dtype });
    const text128 = Array(126).fill('the').join(' '); // [CLS] + 126 + [SEP] = 128 tokens
    const tokens = embed.tokenizer(text128).input_ids.dims[1];
    if (tokens !== 128) throw new Error(`expected 128 tokens, got ${tokens}`);
    const options = { pooling: 'mean', normalize: false };
    const first = await embed(text128, options);
    const loaded = performance.now();
    if (first.dims.join('x') !== '1x384') throw new Error(`unexpected embedding shape ${first.dims}`);
    // The first embedding values, to check against other implementations.
    const head = Array.from(first.data.slice(0, 4), (x) => Number(x.toFixed(5)));
    if (dtype === dtypes[0]) {
      record({ bench: 'page_load_to_first_result', dtype, ms: loaded, embedding_head: head, note: 'navigation start → transformers.js, onnxruntime-web, MiniLM load, first 1×128 embedding' });
    }
    for (const batch of batches) {
      const texts = Array(batch).fill(text128);
      const ms = await timeRuns(runs, () => embed(texts, options));
      record({ bench: 'minilm_embeddings', dtype, shape: `${batch}x128`, ms, per_second: (1000 * batch) / ms });
    }
    await embed.dispose();
  }

  const shape = '6 layers × 384, vocab 50257';
  for (const dtype of dtypes) {
    const generate = await pipeline('text-generation', 'gpt2-6x384', { device, dtype });
    const prompt = 'The quick brown fox jumps over the lazy dog.';
    const promptTokens = generate.tokenizer(prompt).input_ids.dims[1];
    // Greedy, and never stopping at EOS (as Sesame, whose random GPT-2 has no eos_token_id): exactly n new tokens.
    const gen = (n, streamer) => generate(prompt, { max_new_tokens: n, do_sample: false, eos_token_id: null, streamer });
    await gen(4); // warm-up
    const decode = [];
    let generated = [];
    for (let i = 0; i < (generateRuns ?? Math.max(1, Math.floor(runs / 2))); i++) {
      // The streamer's first put() is the prompt; each later one is one new token.
      const stamps = [];
      let puts = 0;
      const streamer = { put: (ids) => { if (puts++ > 0) { stamps.push(performance.now()); generated.push(Number(ids[0][0])); } }, end: () => {} };
      generated = [];
      const t0 = performance.now();
      await gen(newTokens, streamer);
      if (stamps.length !== newTokens) throw new Error(`expected ${newTokens} new tokens, got ${stamps.length}`);
      record({ bench: 'gpt2_prefill_first_token', dtype, shape, prompt_tokens: promptTokens, ms: stamps[0] - t0 });
      decode.push((stamps.length - 1) / ((stamps[stamps.length - 1] - stamps[0]) / 1000));
    }
    record({ bench: 'gpt2_greedy_decode', dtype, shape, prompt_tokens: promptTokens, tokens_per_second: median(decode), new_tokens: newTokens, first_token_ids: generated.slice(0, 8) });
    await generate.dispose();
  }
  return records;
}
