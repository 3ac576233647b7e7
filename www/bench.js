// The browser benchmark: MiniLM embedding latency (1×128 and 32×128 tokens), GPT-2-shaped
// greedy decoding (6 layers × 384, vocabulary 50257, random weights made here), and the time
// from page load to the first result. Each latency is the median of `runs` after a warm-up.

import { adapterInfo, pipeline } from '/dist/index.js';
import { median, timeRuns } from './timing.js';


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
  for (const [name, shape] of shapes) {
    const { data_offsets: [begin, end] } = header[name];
    const values = data.subarray(begin / 4, end / 4);
    if (name.endsWith('ln_1.weight') || name.endsWith('ln_2.weight') || name.endsWith('ln_f.weight')) values.fill(1);
    else for (let i = 0; i < values.length; i++) { seed = (seed * 1664525 + 1013904223) >>> 0; values[i] = (seed / 2 ** 32 - 0.5) * 0.1; }
  }
  const config = { model_type: 'gpt2', architectures: ['GPT2LMHeadModel'], vocab_size: vocab, n_embd: width, n_layer: layers, n_head: heads, n_positions: positions };
  return { 'config.json': JSON.stringify(config), 'model.safetensors': out, shape: `${layers} layers × ${width}, vocab ${vocab}` };
}

/** Runs every benchmark; `log(record)` gets each result as it is measured. */
export async function runBench({ runs = 5, newTokens = 32, log = () => {} } = {}) {
  const adapter = (await adapterInfo()).name;
  const records = [];
  const record = (r) => { const full = { ...r, adapter }; records.push(full); log(full); };

  const embed = await pipeline('feature-extraction', '/models/all-MiniLM-L6-v2/');
  const text128 = Array(126).fill('the').join(' '); // [CLS] + 126 + [SEP] = 128 tokens
  await embed(text128);
  record({ bench: 'page_load_to_first_result', ms: performance.now(), note: 'navigation start → wasm, device, MiniLM load, first 1×128 embedding' });
  for (const batch of [1, 32]) {
    const texts = Array(batch).fill(text128);
    const ms = await timeRuns(runs, () => embed(texts));
    record({ bench: 'minilm_embeddings', shape: `${batch}x128`, ms, per_second: (1000 * batch) / ms });
  }
  embed.dispose();

  const vocab = await Promise.all(['vocab.json', 'merges.txt'].map(async (f) => new Uint8Array(await (await fetch(`/models/gpt2-vocab/${f}`)).arrayBuffer())));
  const { shape, ...files } = randomGpt2();
  const generate = await pipeline('text-generation', { ...files, 'vocab.json': vocab[0], 'merges.txt': vocab[1] });
  const prompt = 'The quick brown fox jumps over the lazy dog.';
  const decode = [];
  await generate(prompt, { maxNewTokens: 4 }); // warm-up
  for (let i = 0; i < Math.max(1, Math.floor(runs / 2)); i++) {
    const stamps = [];
    const t0 = performance.now();
    await generate(prompt, { maxNewTokens: newTokens, onToken: () => stamps.push(performance.now()) });
    record({ bench: 'gpt2_prefill_first_token', shape, ms: stamps[0] - t0 });
    decode.push((stamps.length - 1) / ((stamps[stamps.length - 1] - stamps[0]) / 1000));
  }
  record({ bench: 'gpt2_greedy_decode', shape, tokens_per_second: median(decode), new_tokens: newTokens });
  generate.dispose();
  return records;
}
