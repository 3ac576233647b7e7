// The browser benchmark: MiniLM embedding latency (1×128 and 32×128 tokens), GPT-2-shaped
// greedy decoding (6 layers × 384, vocabulary 50257, random weights made here), and the time
// from page load to the first result. Each latency is the median of `runs` after a warm-up.
// The page runs it in a worker (bench-worker.js); it runs on a page as well.

import { adapterInfo, getDevice, pipeline, pipelineInWorker } from '/dist/index.js';
import { median, timeRuns } from './timing.js';


/**
 * Safetensors bytes of F32 tensors `shapes` ([name, dims] pairs) holding deterministic small
 * random values (uniform in ±scale/2), except the tensors `ones(name)` picks, which hold 1.
 */
function randomSafetensors(shapes, { scale = 0.1, ones = () => false } = {}) {
  const header = {};
  let offset = 0;
  for (const [name, shape] of shapes) {
    const bytes = 4 * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  const data = new Float32Array(out.buffer, 8 + json.length);
  let seed = 1;
  for (const [name] of shapes) {
    const { data_offsets: [begin, end] } = header[name];
    const values = data.subarray(begin / 4, end / 4);
    if (ones(name)) values.fill(1);
    else for (let i = 0; i < values.length; i++) { seed = (seed * 1664525 + 1013904223) >>> 0; values[i] = (seed / 2 ** 32 - 0.5) * scale; }
  }
  return out;
}

/** A GPT2LMHeadModel checkpoint with deterministic small random weights, as safetensors bytes. */
export function randomGpt2({ layers = 6, width = 384, heads = 6, vocab = 50257, positions = 1024 } = {}) {
  const shapes = [['transformer.wte.weight', [vocab, width]], ['transformer.wpe.weight', [positions, width]]];
  for (let i = 0; i < layers; i++) {
    const p = `transformer.h.${i}.`;
    shapes.push([p + 'ln_1.weight', [width]], [p + 'ln_1.bias', [width]], [p + 'attn.c_attn.weight', [width, 3 * width]], [p + 'attn.c_attn.bias', [3 * width]],
      [p + 'attn.c_proj.weight', [width, width]], [p + 'attn.c_proj.bias', [width]], [p + 'ln_2.weight', [width]], [p + 'ln_2.bias', [width]],
      [p + 'mlp.c_fc.weight', [width, 4 * width]], [p + 'mlp.c_fc.bias', [4 * width]], [p + 'mlp.c_proj.weight', [4 * width, width]], [p + 'mlp.c_proj.bias', [width]]);
  }
  shapes.push(['transformer.ln_f.weight', [width]], ['transformer.ln_f.bias', [width]]);
  const out = randomSafetensors(shapes, { ones: (name) => /ln_(1|2|f)\.weight$/.test(name) });
  const config = { model_type: 'gpt2', architectures: ['GPT2LMHeadModel'], vocab_size: vocab, n_embd: width, n_layer: layers, n_head: heads, n_positions: positions };
  return { 'config.json': JSON.stringify(config), 'model.safetensors': out, shape: `${layers} layers × ${width}, vocab ${vocab}` };
}

/** The 2048-filter character CNN of the ELMo releases: [width, count] pairs. */
const ELMO_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]];

/** The benchmarked ELMo shapes, as `sesame bench elmo` runs them natively. */
export const ELMO_SHAPES = {
  small: { cells: 1024, projection: 128, highways: 1 }, // 2x1024_128_2048cnn_1xhighway
  original: { cells: 4096, projection: 512, highways: 2 }, // 2x4096_512_2048cnn_2xhighway
};

/** An ELMo checkpoint (options.json + AllenNLP-named safetensors) with random weights. */
export function randomElmo({ cells, projection, highways, layers = 2, filters = ELMO_FILTERS }) {
  const n = filters.reduce((sum, [, count]) => sum + count, 0);
  const embedder = '_elmo_lstm._token_embedder.';
  const shapes = [[embedder + '_char_embedding_weights', [262, 16]]];
  filters.forEach(([width, count], i) => shapes.push([`${embedder}char_conv_${i}.weight`, [count, 16, width]], [`${embedder}char_conv_${i}.bias`, [count]]));
  for (let k = 0; k < highways; k++) shapes.push([`${embedder}_highways._layers.${k}.weight`, [2 * n, n]], [`${embedder}_highways._layers.${k}.bias`, [2 * n]]);
  shapes.push([embedder + '_projection.weight', [projection, n]], [embedder + '_projection.bias', [projection]]);
  for (let i = 0; i < layers; i++) {
    for (const direction of ['forward', 'backward']) {
      const p = `_elmo_lstm._elmo_lstm.${direction}_layer_${i}.`;
      shapes.push([p + 'input_linearity.weight', [4 * cells, projection]], [p + 'state_linearity.weight', [4 * cells, projection]],
        [p + 'state_linearity.bias', [4 * cells]], [p + 'state_projection.weight', [projection, cells]]);
    }
  }
  shapes.push(['scalar_mix_0.gamma', [1]], ...Array.from({ length: layers + 1 }, (_, j) => [`scalar_mix_0.scalar_parameters.${j}`, [1]]));
  const options = {
    lstm: { dim: cells, projection_dim: projection, n_layers: layers, cell_clip: 3, proj_clip: 3, use_skip_connections: true },
    char_cnn: { activation: 'relu', filters, n_highway: highways, embedding: { dim: 16 }, n_characters: 262, max_characters_per_token: 50 },
  };
  return {
    'options.json': JSON.stringify(options),
    'model.safetensors': randomSafetensors(shapes, { ones: (name) => name.endsWith('gamma') }),
    shape: `${cells} cells, ${projection} projection, ${n} CNN filters, ${highways} highway`,
  };
}

/** Words per ELMo benchmark sentence; like `sesame bench elmo`, words of 3 to 11 letters. */
const ELMO_WORDS = 20;
const elmoSentence = Array.from({ length: ELMO_WORDS }, (_, i) => 'sesamesesame'.slice(0, 3 + (i % 9))).join(' ');

/**
 * Runs every benchmark; `log(record)` gets each result as it is measured. `elmo`: the
 * ELMO_SHAPES to run (their batch-32 passes take minutes on a CPU adapter, so they are timed
 * `elmoBatchRuns` times without a warm-up of their own). `device` and `threads`: as in
 * sesame-lm's options ("auto", "webgpu" or "wasm"; "auto" or a count). `dtypes`: the weight
 * precisions MiniLM and GPT-2 run at ("fp32", "f16", "q8", "q4"). `timeOrigin`: when the page
 * started loading (its performance.timeOrigin; by default this context's own).
 */
export async function runBench({ runs = 5, newTokens = 32, elmo = Object.keys(ELMO_SHAPES), elmoBatchRuns = 1, device = 'auto', threads = 'auto', dtypes = ['fp32'], timeOrigin = performance.timeOrigin, log = () => {} } = {}) {
  await getDevice({ device, threads });
  const info = await adapterInfo();
  const records = [];
  const record = (r) => { const full = { ...r, adapter: info.name, threads: info.threads }; records.push(full); log(full); };

  const text128 = Array(126).fill('the').join(' '); // [CLS] + 126 + [SEP] = 128 tokens
  for (const dtype of dtypes) {
    const embed = await pipeline('feature-extraction', '/models/all-MiniLM-L6-v2/', { dtype });
    await embed(text128);
    if (dtype === dtypes[0]) {
      record({ bench: 'page_load_to_first_result', dtype, ms: performance.timeOrigin + performance.now() - timeOrigin, note: 'navigation start → wasm, device, MiniLM load, first 1×128 embedding' });
    }
    for (const batch of [1, 32]) {
      const texts = Array(batch).fill(text128);
      const ms = await timeRuns(runs, () => embed(texts));
      record({ bench: 'minilm_embeddings', dtype, shape: `${batch}x128`, ms, per_second: (1000 * batch) / ms, unit: 'texts' });
    }
    embed.dispose();
  }
  // The same batch split among a worker per core (one thread each): how the wasm device uses
  // more than one core on a page that is not cross-origin isolated.
  const workers = navigator.hardwareConcurrency ?? 1;
  if (workers > 1) {
    const pool = await pipelineInWorker('feature-extraction', '/models/all-MiniLM-L6-v2/', { device, workers, threads: 1 });
    await pool(Array(workers).fill(text128));
    const ms = await timeRuns(runs, () => pool(Array(32).fill(text128)));
    record({ bench: 'minilm_embeddings_workers', dtype: 'fp32', shape: `32x128, ${workers} workers`, ms, per_second: (1000 * 32) / ms, unit: 'texts' });
    pool.dispose();
  }

  const vocab = await Promise.all(['vocab.json', 'merges.txt'].map(async (f) => new Uint8Array(await (await fetch(`/models/gpt2-vocab/${f}`)).arrayBuffer())));
  const { shape, ...files } = randomGpt2();
  for (const dtype of dtypes) {
    const generate = await pipeline('text-generation', { ...files, 'vocab.json': vocab[0], 'merges.txt': vocab[1] }, { dtype });
    const prompt = 'The quick brown fox jumps over the lazy dog.';
    const decode = [];
    await generate(prompt, { maxNewTokens: 4 }); // warm-up
    for (let i = 0; i < Math.max(1, Math.floor(runs / 2)); i++) {
      const stamps = [];
      const t0 = performance.now();
      await generate(prompt, { maxNewTokens: newTokens, onToken: () => stamps.push(performance.now()) });
      record({ bench: 'gpt2_prefill_first_token', dtype, shape, ms: stamps[0] - t0 });
      decode.push((stamps.length - 1) / ((stamps[stamps.length - 1] - stamps[0]) / 1000));
    }
    record({ bench: 'gpt2_greedy_decode', dtype, shape, tokens_per_second: median(decode), new_tokens: newTokens });
    generate.dispose();
  }

  for (const name of elmo) {
    if (!ELMO_SHAPES[name]) throw new Error(`unknown ELMo shape "${name}" (known: ${Object.keys(ELMO_SHAPES).join(', ')})`);
    const { shape, ...files } = randomElmo(ELMO_SHAPES[name]);
    const embed = await pipeline('elmo-embeddings', files);
    await embed(elmoSentence); // warm-up: pipelines compile, buffers pool
    for (const batch of [1, 32]) {
      const sentences = Array(batch).fill(elmoSentence);
      const ms = await timeRuns(batch === 1 ? runs : elmoBatchRuns, () => embed(sentences), { warmUp: false });
      record({ bench: `elmo_${name}`, shape: `${shape}, batch ${batch} × ${ELMO_WORDS} words`, ms, per_second: (1000 * batch * ELMO_WORDS) / ms, unit: 'words', sentences_per_second: (1000 * batch) / ms });
    }
    embed.dispose();
  }
  return records;
}
