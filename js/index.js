// sesame-lm: BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ALBERT, ERNIE, ELECTRA, GPT-2, GPT and
// ELMo on the user's GPU through WebGPU (or the CPU), with pipelines in the style of
// transformers.js. Which pipelines a model serves is the core's answer (`info.tasks`). The work is done by the Rust/wasm core (./wasm/, or
// ./wasm-threads/ in a worker of a cross-origin isolated page); this layer loads
// files, checks arguments and shapes results.

import { clearCache, keepSource, loadModelFiles } from './loading.js';
import { tokenStream, tensorResult } from './stream.js';
import { callCore, guard, hasTrapped, isLive, recovered } from './trap.js';
import { isNode, wasmSource } from './platform.js';
import { describe, requireCount, requireText } from './checks.js';
import { startThreaded, threadCount } from './threads.js';

/** Read from disk in Node (a variable, so that bundlers do not copy the file a second time). */
const NODE_WASM_FILE = './wasm/sesame_bg.wasm';

export { loadModelFiles, clearCache };
export { pipelineInWorker } from './worker-client.js';

/** How threadCount names the ways to more threads for a pipeline. */
const PIPELINE_THREADS = { inWorker: 'pipelineInWorker', alternative: 'use pipelineInWorker(task, model, { workers: n })' };

let wasmReady;
let devicePromise;
/** The `device` option the shared device was asked for. */
let deviceKind;
/** The options the shared device was made with, to make another if it is lost. */
let deviceOptions;

/**
 * The wasm build in use, once loaded: the plain one (wasm/), or the threaded one
 * (wasm-threads/). A page imports only the glue of the build it runs.
 */
let core;
/** Whether `core` is the threaded build. */
let coreThreaded = false;

/** Loads the wasm module once: the plain build, or with `threads` > 1 the threaded one and its pool. */
function ready(wasmUrl, threads = 1, wasmThreadsUrl = undefined) {
  wasmReady ??= (async () => {
    if (threads === 1) {
      const [plain, source] = await Promise.all([import('./wasm/sesame.js'), wasmSource(wasmUrl, isNode ? new URL(NODE_WASM_FILE, import.meta.url) : undefined)]);
      await plain.default(source === undefined ? undefined : { module_or_path: source });
      core = plain;
      return;
    }
    const threaded = await import('./wasm-threads/sesame.js');
    await startThreaded(threaded, wasmThreadsUrl, threads);
    [core, coreThreaded] = [threaded, true];
  })();
  wasmReady.catch(() => { wasmReady = undefined; }); // let a later call try again
  return wasmReady;
}

/**
 * The device every model shares, created on first use. `options.device`: "auto" (default) runs
 * on WebGPU where it is a GPU, and on wasm SIMD where the browser has no WebGPU or its WebGPU
 * is a CPU rasterizer (SwiftShader); "webgpu" insists on WebGPU (a clear Error without it);
 * "wasm" always runs on the CPU.
 */
export function getDevice(options = {}) {
  if (hasTrapped()) {
    // The threaded build's memory is shared with its pool's workers: it cannot start afresh.
    if (coreThreaded) return Promise.reject(new Error('sesame-lm: the threaded wasm module trapped and cannot start afresh in this worker: start a new worker (pipelineInWorker does so by itself)'));
    // The trapped instance's memory, device and models are abandoned; a new instance starts
    // from the module already compiled.
    core.__wbg_reset_state();
    recovered();
    devicePromise = undefined;
    deviceKind = undefined;
  }
  // One device a page: a later request for another kind would silently not be honoured.
  if (devicePromise && options.device !== undefined && options.device !== deviceKind) {
    return Promise.reject(new Error(`sesame-lm: this page's models already run on device "${deviceKind}"; a page has one device, so device "${options.device}" cannot be used too (use a worker for another)`));
  }
  let threads;
  try {
    threads = threadCount(options.threads, options.device ?? deviceKind, PIPELINE_THREADS);
  } catch (e) {
    return Promise.reject(e);
  }
  if (devicePromise && options.threads !== undefined && threads !== deviceOptions.threads) {
    return Promise.reject(new Error(`sesame-lm: this page's device already runs on ${deviceOptions.threads} thread(s); a page has one device, so threads: ${options.threads} cannot be used too (use a worker for another)`));
  }
  if (!devicePromise) {
    deviceKind = options.device ?? 'auto';
    deviceOptions = { device: deviceKind, kernels: options.kernels, wasmUrl: options.wasmUrl, wasmThreadsUrl: options.wasmThreadsUrl, threads };
    startDevice();
  }
  const current = devicePromise;
  return current.then((device) => {
    if (callCore(() => device.lost()) === undefined) return device;
    // A lost device (destroyed, or its GPU reset) runs nothing again: the models on it say so,
    // and the next load gets a new device of the same kind.
    if (devicePromise === current) startDevice();
    return devicePromise;
  });
}

/** Creates the shared device of `deviceOptions`; a failure lets a later call try again. */
function startDevice() {
  devicePromise = createDevice(deviceOptions);
  devicePromise.catch(() => { devicePromise = undefined; deviceKind = undefined; });
}

async function createDevice({ device, kernels, wasmUrl, wasmThreadsUrl, threads }) {
  if (!['auto', 'webgpu', 'wasm'].includes(device)) throw new TypeError(`sesame-lm: device must be "auto", "webgpu" or "wasm", got ${JSON.stringify(device)}`);
  const hasWebGPU = typeof navigator !== 'undefined' && Boolean(navigator.gpu);
  if (device === 'webgpu' && !hasWebGPU) {
    throw new Error('sesame-lm: this browser has no WebGPU (navigator.gpu is missing). Use a recent Chrome or Edge, a browser with WebGPU enabled, or device "wasm".');
  }
  await ready(wasmUrl, threads, wasmThreadsUrl);
  if (coreThreaded !== threads > 1) {
    throw new Error(`sesame-lm: this page's wasm module was loaded ${coreThreaded ? 'with threads' : 'without threads'}, so threads: ${threads} cannot be used (use a worker for another)`);
  }
  return callCore(() => core.Device.create(hasWebGPU ? device : 'wasm', kernels));
}

/** Gives the device's pooled buffers back after a model is disposed (not after a trap: the next load starts afresh). */
function trimPool() {
  if (!hasTrapped()) devicePromise?.then((d) => callCore(() => d.trimPool()), () => {});
}

/** The adapter (name, kernels, limits) as an object. */
export async function adapterInfo() {
  const device = await getDevice();
  return JSON.parse(callCore(() => device.info()));
}

/** Live GPU buffers and bytes (tensors in use) and pooled ones (kept for reuse). */
export async function stats() {
  const device = await getDevice();
  const s = JSON.parse(callCore(() => device.stats()));
  return { liveBuffers: s.live_buffers, liveBytes: s.live_bytes, pooledBuffers: s.pooled_buffers, pooledBytes: s.pooled_bytes };
}

/** A number from an id list; anything else becomes NaN (Number() throws on some objects). */
const idNumber = (x) => (typeof x === 'number' || typeof x === 'bigint' ? Number(x) : NaN);

/** Arrays and typed arrays only: an array-like's claimed length could be anything. */
const isIdList = (v) => Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView));

/**
 * Flattens ids given as number[], number[][], number[][][] (multiple choice), a typed array or
 * {data, dims} to [Uint32Array, dims]; `dims` is [batch, seq] or [batch, choices, seq], and must
 * equal `like` when given.
 */
function flattenIds(name, value, like) {
  if (value === undefined || value === null) return [undefined, like];
  let data;
  let dims;
  if (value.data !== undefined && value.dims !== undefined) {
    if (!isIdList(value.data) || !isIdList(value.dims)) throw new TypeError(`sesame-lm: ${name}'s data and dims must be arrays or typed arrays`);
    data = Array.from(value.data, idNumber);
    dims = Array.from(value.dims, idNumber);
  } else if (Array.isArray(value) && Array.isArray(value[0]) && Array.isArray(value[0][0])) {
    dims = [value.length, value[0].length, value[0][0].length];
    if (value.some((ex) => !Array.isArray(ex) || ex.length !== dims[1])) throw new Error(`sesame-lm: ${name} examples differ in their number of choices`);
    if (value.some((ex) => ex.some((row) => !Array.isArray(row) || row.length !== dims[2]))) throw new Error(`sesame-lm: ${name} rows differ in length: pad the batch`);
    data = value.flat(2);
  } else if (Array.isArray(value) && Array.isArray(value[0])) {
    dims = [value.length, value[0].length];
    if (value.some((row) => !Array.isArray(row) || row.length !== dims[1])) throw new Error(`sesame-lm: ${name} rows differ in length: pad the batch`);
    data = value.flat();
  } else if (isIdList(value)) {
    data = Array.from(value, idNumber);
    dims = [1, data.length];
  } else {
    throw new TypeError(`sesame-lm: ${name} must be number[], number[][], number[][][], a typed array or {data, dims}`);
  }
  if (dims.length !== 2 && dims.length !== 3) throw new Error(`sesame-lm: ${name} must be [batch, seq] or [batch, choices, seq], got dims [${dims}]`);
  if (dims.some((d) => !Number.isInteger(d) || d < 0 || d > 0xffffffff)) throw new Error(`sesame-lm: ${name} dims must be non-negative integers, got [${dims}]`);
  if (data.length !== dims.reduce((a, d) => a * d, 1)) throw new Error(`sesame-lm: ${name} has ${data.length} ids for dims [${dims}]`);
  if (data.some((x) => !Number.isInteger(x) || x < 0 || x > 0xffffffff)) throw new Error(`sesame-lm: ${name} must hold non-negative integer ids`);
  if (like && (dims.length !== like.length || dims.some((d, i) => d !== like[i]))) throw new Error(`sesame-lm: ${name} is [${dims}], input_ids is [${like}]`);
  return [Uint32Array.from(data), dims];
}

/** Code point offsets (as the core counts) → UTF-16 offsets (as JS strings index). */
function utf16Offsets(text) {
  const map = [0];
  let units = 0;
  for (const ch of text) {
    units += ch.length;
    map.push(units);
  }
  return (i) => map[Math.min(i, map.length - 1)];
}

/** A model on the GPU: forward passes, the tokenizer, and the tasks its head supports. */
export class SesameModel {
  #model;
  #guarded;

  /** @internal use loadModel() */
  constructor(model) {
    this.#model = model;
    this.#guarded = guard(model);
    const info = JSON.parse(model.info());
    this.info = {
      modelType: info.model_type, family: info.family, architecture: info.architecture, tasks: info.tasks,
      layers: info.layers, heads: info.heads, hiddenSize: info.hidden_size, vocabSize: info.vocab_size,
      maxPositions: info.max_positions, tokenTypes: info.token_types, taskTypes: info.task_types,
      parameters: info.parameters, weightBytes: info.weight_bytes, labels: info.labels, maskToken: info.mask_token ?? undefined,
    };
  }

  /** @internal the wasm object, for the pipelines */
  get core() {
    if (!this.#model) throw new Error('sesame-lm: this model was disposed');
    return this.#guarded;
  }

  /**
   * One forward pass. `inputs`: {input_ids, attention_mask?, token_type_ids?, task_type_ids?},
   * each number[] (one sequence), number[][] ([batch, seq]), number[][][] ([batch, choices, seq],
   * for a multiple-choice model) or {data, dims}. Resolves to named tensors {data, dims}:
   * logits, last_hidden_state, hidden_states.{i}, attentions.{i}, … as `sesame forward` names them.
   */
  async forward(inputs, { hiddenStates = false, attentions = false } = {}) {
    if (!inputs || typeof inputs !== 'object') throw new TypeError('sesame-lm: forward(inputs) takes {input_ids, attention_mask?, token_type_ids?, task_type_ids?, char_ids?}');
    const [ids, dims] = flattenIds('input_ids', inputs.input_ids);
    if (!ids) throw new Error('sesame-lm: forward needs input_ids');
    const [mask] = flattenIds('attention_mask', inputs.attention_mask, dims);
    const [types] = flattenIds('token_type_ids', inputs.token_type_ids, dims);
    const [tasks] = flattenIds('task_type_ids', inputs.task_type_ids, dims);
    // A character-reading model's (CVT's) rows of character ids: [batch, seq, width].
    const [chars, charDims] = flattenIds('char_ids', inputs.char_ids);
    if (chars && (dims.length !== 2 || charDims.length !== 3 || charDims[0] !== dims[0] || charDims[1] !== dims[1])) {
      throw new Error(`sesame-lm: char_ids must be [batch, seq, width] for input_ids [${dims}], got [${charDims}]`);
    }
    const choices = dims.length === 3 ? dims[1] : undefined;
    return this.core.forward(ids, mask, types, tasks, chars, dims[0], choices, dims[dims.length - 1], Boolean(hiddenStates), Boolean(attentions));
  }

  /** Token ids (with special tokens), token types and token strings of a text or pair. */
  tokenize(text, { pair } = {}) {
    requireText('the text', text);
    if (pair !== undefined) requireText('the pair', pair);
    const e = JSON.parse(this.core.encode(text, pair));
    return { inputIds: e.input_ids, tokenTypeIds: e.token_type_ids, tokens: e.tokens };
  }

  decode(ids, { skipSpecialTokens = true } = {}) {
    return this.core.decode(Uint32Array.from(ids), skipSpecialTokens);
  }

  /** Frees the model's GPU memory; the model cannot be used afterwards. */
  dispose() {
    if (!this.#model) return;
    // After a trap the module's memory is gone with it: nothing to free.
    if (isLive(this.#guarded)) this.#model.free();
    this.#model = undefined;
    trimPool();
  }

  get disposed() {
    return !this.#model;
  }
}

/**
 * Loads a model: `model` is the URL of a Hugging Face-layout folder (config.json,
 * model.safetensors, tokenizer.json) or an object of in-memory files. Options: onProgress,
 * cache, integrity, fetchOptions (see loadModelFiles), truncation (cut over-long texts),
 * dtype ('fp32', 'f16', 'q8', 'q4': the weight matrices' precision; default as stored),
 * kernels, wasmUrl.
 */
export async function loadModel(source, options = {}) {
  const device = await getDevice(options);
  const files = await loadModelFiles(source, options);
  options.onProgress?.({ status: 'loading', file: 'model.safetensors' });
  if (options.dtype !== undefined && typeof options.dtype !== 'string') throw new TypeError(`sesame-lm: dtype must be 'fp32', 'f16', 'q8' or 'q4', got ${typeof options.dtype}`);
  const loaded = callCore(() => core.Model.load(device, files, Boolean(options.truncation), options.dtype));
  options.onProgress?.({ status: 'ready' });
  const model = new SesameModel(loaded);
  // fineTune(task, model) trains a copy of the files the model was loaded from.
  keepSource(model, source, options);
  return model;
}

/** An ELMo model on the GPU (see `pipeline('elmo-embeddings', …)`). */
export class ElmoModel {
  #core;
  #guarded;

  /** @internal use loadElmo() */
  constructor(core) {
    this.#core = core;
    this.#guarded = guard(core);
    const i = JSON.parse(core.info());
    this.info = { modelType: 'elmo', family: 'ELMo', tasks: ['elmo-embeddings'], cells: i.cells, projectionDim: i.projection_dim, layers: i.layers, filters: i.filters, mixes: i.mixes, outputDim: i.output_dim };
  }

  /** @internal the wasm object */
  get core() {
    if (!this.#core) throw new Error('sesame-lm: this model was disposed');
    return this.#guarded;
  }

  dispose() {
    if (!this.#core) return;
    if (isLive(this.#guarded)) this.#core.free();
    this.#core = undefined;
    trimPool();
  }

  get disposed() {
    return !this.#core;
  }
}

/** Loads an ELMo folder (options.json, model.safetensors) by URL or from in-memory files. */
export async function loadElmo(model, options = {}) {
  const device = await getDevice(options);
  const files = await loadModelFiles(model, { ...options, elmo: true });
  options.onProgress?.({ status: 'loading', file: 'model.safetensors' });
  const loaded = callCore(() => core.Elmo.load(device, files));
  options.onProgress?.({ status: 'ready' });
  return new ElmoModel(loaded);
}

/** A sentence for ELMo: a text (split into words by the core) or its words. */
function requireSentence(i, sentence) {
  const parts = typeof sentence === 'string' ? [sentence] : sentence;
  if (!Array.isArray(parts) || parts.some((w) => typeof w !== 'string')) throw new TypeError(`sesame-lm: sentence ${i} must be a string or a string[] of words`);
  // A lone UTF-16 surrogate has no UTF-8 form: ELMo's characters are UTF-8 bytes.
  if (parts.some((w) => !w.isWellFormed())) throw new Error(`sesame-lm: sentence ${i} holds a lone UTF-16 surrogate (not valid Unicode text)`);
  if (!parts.some((w) => w.trim())) throw new Error(`sesame-lm: sentence ${i} is empty`);
}

/** An Error unless the model serves `task` (its info.tasks, as the core reports them). */
function requireTask(model, task) {
  if (model.info.tasks.includes(task)) return;
  const serves = model.info.tasks.length ? `it serves ${model.info.tasks.join(', ')}` : 'it serves no pipeline (only forward passes)';
  throw new Error(`sesame-lm: ${task} cannot run on this model (${model.info.architecture}); ${serves}`);
}

/** A non-empty string[] of non-empty strings. */
function requireTexts(what, values) {
  if (!Array.isArray(values) || values.length === 0) throw new TypeError(`sesame-lm: ${what} must be a non-empty string[]`);
  values.forEach((v, i) => requireText(`${what}[${i}]`, v));
  return values;
}

/** Each task: which models it takes, and how it runs. */
const TASKS = {
  'feature-extraction': {
    async run(model, texts, { pooling = 'mean', normalize = false } = {}) {
      const list = typeof texts === 'string' ? [texts] : texts;
      if (!Array.isArray(list) || list.length === 0) throw new TypeError('sesame-lm: feature-extraction takes a string or a non-empty string[]');
      list.forEach((t, i) => requireText(`text ${i}`, t));
      if (pooling !== 'mean' && pooling !== 'cls') throw new Error(`sesame-lm: pooling must be "mean" or "cls", got ${describe(pooling)}`);
      const t = await model.core.embed(list, pooling, Boolean(normalize));
      return tensorResult(t.data, t.dims);
    },
  },
  'fill-mask': {
    async run(model, text, { topK = 5 } = {}) {
      requireText('the text', text);
      const masks = JSON.parse(await model.core.fillMask(text, requireCount('topK', topK, 1)));
      const shaped = masks.map((c) => c.map(({ score, token, token_str: tokenStr, sequence }) => ({ score, token, tokenStr, sequence })));
      return shaped.length === 1 ? shaped[0] : shaped;
    },
  },
  'text-generation': {
    async run(model, prompt, { maxNewTokens = 20, temperature = 0, topK = 0, topP = 1, seed, truncation = false, onToken, signal } = {}) {
      requireText('the prompt', prompt);
      if (typeof temperature !== 'number' || !(temperature >= 0 && temperature < Infinity)) throw new Error(`sesame-lm: temperature must be a number ≥ 0, got ${describe(temperature)}`);
      if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) throw new Error(`sesame-lm: topP must be a number in (0, 1], got ${describe(topP)}`);
      if (seed !== undefined) requireCount('seed', seed);
      if (onToken !== undefined && typeof onToken !== 'function') throw new TypeError('sesame-lm: onToken must be a function');
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('sesame-lm: signal must be an AbortSignal');
      signal?.throwIfAborted();
      // Returning false from the callback stops the generation after the current token.
      let stopped = false;
      const each = (text, token) => {
        stopped ||= onToken?.(text, token) === false || Boolean(signal?.aborted);
        return !stopped;
      };
      const out = JSON.parse(await model.core.generate(prompt, requireCount('maxNewTokens', maxNewTokens), temperature, requireCount('topK', topK), topP, seed, Boolean(truncation), each));
      return { generatedText: out.text, tokenIds: out.ids, newTokens: out.new_tokens, promptTokensCut: out.prompt_tokens_cut, stopped };
    },
  },
  'next-sentence-prediction': {
    async run(model, first, second) {
      requireText('the first sentence', first);
      requireText('the second sentence', second);
      const score = await model.core.nextSentence(first, second);
      return { isNext: score >= 0.5, score };
    },
  },
  'text-classification': {
    // As transformers.js: a text gives its topK labels; an array of texts gives one label each
    // (topK 1) or each text's list, and `textPair` is then an array of the same length.
    async run(model, texts, { topK = 1, textPair } = {}) {
      const many = Array.isArray(texts);
      if (!many && typeof texts !== 'string') throw new TypeError(`sesame-lm: text-classification takes a text or a non-empty string[], got ${describe(texts)}`);
      const list = many ? requireTexts('the texts', texts) : [requireText('the text', texts)];
      // Each text's pair text, if any.
      let pairOf = () => undefined;
      if (many && textPair !== undefined) {
        const pairs = requireTexts('textPair', textPair);
        if (pairs.length !== list.length) throw new Error(`sesame-lm: textPair holds ${pairs.length} texts for ${list.length} texts: give one pair text per text`);
        pairOf = (i) => pairs[i];
      } else if (textPair !== undefined) {
        const pair = requireText('textPair', textPair);
        pairOf = () => pair;
      }
      const count = topK === null ? Infinity : requireCount('topK', topK, 1);
      const results = [];
      for (const [i, text] of list.entries()) {
        const labels = JSON.parse(await model.core.classifyText(text, pairOf(i)));
        results.push(labels.slice(0, count));
      }
      return !many ? results[0] : count === 1 ? results.map(([best]) => best) : results;
    },
  },
  'token-classification': {
    async run(model, text, { ignoreLabels = ['O'] } = {}) {
      requireText('the text', text);
      const at = utf16Offsets(text);
      return JSON.parse(await model.core.classifyTokens(text, ignoreLabels)).map((e) => ({ ...e, start: at(e.start), end: at(e.end) }));
    },
  },
  'replaced-token-detection': {
    async run(model, text) {
      requireText('the text', text);
      const at = utf16Offsets(text);
      return JSON.parse(await model.core.replacedTokens(text)).map((t) => ({ ...t, start: at(t.start), end: at(t.end) }));
    },
  },
  'question-answering': {
    async run(model, question, context, { topK = 1, maxAnswerLen = 15, maxSeqLen = 384, docStride } = {}) {
      requireText('the question', question);
      requireText('the context', context);
      const at = utf16Offsets(context);
      const stride = docStride === undefined || docStride === null ? undefined : requireCount('docStride', docStride, 0);
      const answers = JSON.parse(await model.core.answerQuestion(question, context, requireCount('topK', topK, 1), requireCount('maxAnswerLen', maxAnswerLen, 1), requireCount('maxSeqLen', maxSeqLen, 1), stride))
        .map((a) => ({ ...a, start: at(a.start), end: at(a.end) }));
      return topK === 1 ? answers[0] : answers;
    },
  },
  'zero-shot-classification': {
    async run(model, text, candidateLabels, { multiLabel = false, hypothesisTemplate = 'This example is {}.' } = {}) {
      requireText('the text', text);
      const labels = requireTexts('candidateLabels', typeof candidateLabels === 'string' ? candidateLabels.split(',').map((l) => l.trim()).filter(Boolean) : candidateLabels);
      requireText('hypothesisTemplate', hypothesisTemplate);
      const scored = JSON.parse(await model.core.zeroShot(text, labels, hypothesisTemplate, Boolean(multiLabel)));
      return { sequence: text, labels: scored.map((s) => s.label), scores: scored.map((s) => s.score) };
    },
  },
  'multiple-choice': {
    async run(model, prompt, choices) {
      requireText('the prompt', prompt);
      requireTexts('choices', choices);
      return JSON.parse(await model.core.choose(prompt, choices));
    },
  },
  'elmo-embeddings': {
    load: loadElmo,
    async run(model, sentences) {
      // One text → one result; string[] → texts; string[][] → sentences already split into words.
      const single = typeof sentences === 'string';
      const list = single ? [sentences] : sentences;
      if (!Array.isArray(list) || list.length === 0) throw new TypeError('sesame-lm: elmo-embeddings takes a sentence or a non-empty array of sentences (texts, or arrays of words)');
      list.forEach((s, i) => requireSentence(i, s));
      const out = await model.core.embed(JSON.stringify(list));
      const [, layers, tokens, width] = out.layers.dims;
      const results = out.words.map((words, b) => {
        const n = words.length;
        const slice = (t, rows) => Array.from({ length: rows }, (_, r) => t.data.subarray((b * rows + r) * tokens * width, ((b * rows + r) * tokens + n) * width));
        const stack = (parts, dims) => {
          const data = new Float32Array(dims.reduce((a, d) => a * d, 1));
          parts.forEach((p, k) => data.set(p, k * n * width));
          return { data, dims };
        };
        return {
          tokens: words,
          layers: stack(slice(out.layers, layers), [layers, n, width]),
          representations: out.representations.map((r) => stack(slice(r, 1), [n, width])),
        };
      });
      return single ? results[0] : results;
    },
  },
  perplexity: {
    async run(model, text, { window, stride } = {}) {
      requireText('the text', text);
      if (window !== undefined) requireCount('window', window, 2);
      if (stride !== undefined) requireCount('stride', stride, 1);
      const p = JSON.parse(await model.core.perplexity(text, window, stride));
      return { perplexity: p.perplexity, meanNll: p.mean_nll, scoredTokens: p.scored_tokens, windows: p.windows };
    },
  },
};

/** The tasks `pipeline` knows. */
export const TASK_NAMES = Object.freeze(Object.keys(TASKS));

/**
 * A task on a model, as a function: `const fill = await pipeline('fill-mask', url);
 * await fill('Paris is the [MASK] of France.')`. `model` is a URL or in-memory files (loaded
 * here; dispose() frees it), or a SesameModel already loaded (shared: dispose() leaves it
 * loaded). The function also has `.model`, `.dispose()`, and for text-generation
 * `.stream(prompt, options)`, an async iterator of {text, token}.
 */
export async function pipeline(task, model, options = {}) {
  const spec = TASKS[task];
  if (!spec) throw new Error(`sesame-lm: unknown task ${JSON.stringify(task)} (known: ${TASK_NAMES.join(', ')})`);
  const owned = !(model instanceof SesameModel || model instanceof ElmoModel);
  const loaded = owned ? await (spec.load ?? loadModel)(model, options) : model;
  try {
    requireTask(loaded, task);
  } catch (e) {
    if (owned) loaded.dispose();
    throw e;
  }
  const run = (...args) => spec.run(loaded, ...args);
  run.task = task;
  run.model = loaded;
  run.dispose = () => { if (owned) loaded.dispose(); };
  if (task === 'text-generation') {
    run.stream = (prompt, opts = {}) => tokenStream((onToken) => spec.run(loaded, prompt, { ...opts, onToken }));
  }
  return run;
}

/**
 * fineTune in a Web Worker (in Node, a worker thread), so that the page stays responsive:
 * progress and an abort cross as messages; the run's pipeline() runs in a worker too.
 */
export async function fineTuneInWorker(task, model, options = {}) {
  const client = await import('./fine-tune-client.js');
  return client.fineTuneInWorker(task, model, options);
}

/**
 * Fine-tunes `model` on the page's own labelled examples, on this machine (nothing is
 * uploaded): `const run = await fineTune('text-classification', url, { train: [{ text, label }], … })`;
 * `run.losses`, `await run.evaluate(data)`, `await run.pipeline()`, `await run.save()`.
 * The training module (dist/wasm-train/) loads on the first call. See README "Fine-tuning".
 */
export async function fineTune(task, model, options = {}) {
  // Imported here: a page that never fine-tunes does not download it.
  const training = await import('./fine-tune.js');
  return training.fineTune(task, model, options, pipeline);
}
