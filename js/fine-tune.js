// fineTune: a model fine-tuned on the page's own examples, on the page's own machine. The
// training runs in a training wasm module (./wasm-train/, or ./wasm-train-threads/ in a worker
// of a cross-origin isolated page; loaded on the first call only, so a page that runs
// pipelines downloads no more): the run `sesame train` makes of the same
// spec and files (src/web/train.rs), stepped from here so that progress, abort and
// validation happen between steps. The trained model runs through the inference module's
// pipeline() from its saved files.

import { filesSource, loadModelFiles } from './loading.js';
import { describe, requireCount, requireText } from './checks.js';
import { isNode, wasmSource } from './platform.js';
import { startThreaded, threadCount } from './threads.js';

/** Read from disk in Node (a variable, so that bundlers do not copy the file a second time). */
const NODE_TRAINING_WASM_FILE = './wasm-train/sesame_bg.wasm';

/** Where the run's files live in the training module's memory. */
const MODEL_DIR = 'model';
const DATA_DIR = 'data';

/** The training module, once loaded: { core, memory, threads }. */
let trainingModule;
/** The training module's device of each kind ("auto", "webgpu", "wasm"), made once. */
const devices = new Map();

/** How threadCount names the ways to more threads for a run. */
const FINE_TUNE_THREADS = { inWorker: 'fineTuneInWorker', alternative: '' };

/**
 * The training module, loaded and instantiated once (a failure lets a later call try again):
 * the plain build, or with `threads` > 1 the threaded one (wasm-train-threads/) and its pool.
 * A worker keeps the build it loaded first.
 */
function loadTrainingModule({ wasmTrainingUrl, wasmTrainingThreadsUrl }, threads) {
  trainingModule ??= (async () => {
    if (threads > 1) {
      const module = await import('./wasm-train-threads/sesame.js');
      const exports = await startThreaded(module, wasmTrainingThreadsUrl, threads);
      return { core: module, memory: exports.memory, threads };
    }
    const nodeDefault = isNode ? new URL(NODE_TRAINING_WASM_FILE, import.meta.url) : undefined;
    const [module, source] = await Promise.all([import('./wasm-train/sesame.js'), wasmSource(wasmTrainingUrl, nodeDefault)]);
    const exports = await module.default(source === undefined ? undefined : { module_or_path: source });
    // The module's memory, whose size (it only grows) is the run's peak.
    return { core: module, memory: exports.memory, threads: 1 };
  })();
  trainingModule.catch(() => { trainingModule = undefined; });
  return trainingModule.then((loaded) => {
    if (loaded.threads !== threads) {
      throw new Error(`sesame-lm: this ${loaded.threads > 1 ? 'worker' : 'page'}'s training module was loaded with ${loaded.threads} thread(s), so threads: ${threads} cannot be used too (use fineTuneInWorker for another)`);
    }
    return loaded;
  });
}

async function trainingDevice(core, kind) {
  if (!['auto', 'webgpu', 'wasm'].includes(kind)) throw new TypeError(`sesame-lm: device must be "auto", "webgpu" or "wasm", got ${describe(kind)}`);
  const hasWebGPU = typeof navigator !== 'undefined' && Boolean(navigator.gpu);
  if (kind === 'webgpu' && !hasWebGPU) throw new Error('sesame-lm: this browser has no WebGPU (navigator.gpu is missing): fine-tune with device "wasm" (the CPU)');
  if (!devices.has(kind)) {
    const made = core.Device.create(hasWebGPU ? kind : 'wasm', undefined);
    devices.set(kind, made);
    made.catch(() => devices.delete(kind));
  }
  return devices.get(kind);
}

/** Text as one field of a line: tabs and line breaks become spaces. */
const oneLine = (text) => text.replace(/[\t\r\n]+/g, ' ');

function requireExamples(what, examples) {
  if (!Array.isArray(examples)) throw new TypeError(`sesame-lm: ${what} must be an array of examples, got ${describe(examples)}`);
  if (examples.length === 0) throw new Error(`sesame-lm: ${what} has no examples`);
  return examples;
}

function requireObject(what, value) {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`sesame-lm: ${what} must be an object, got ${describe(value)}`);
  return value;
}

/** The label of `example` (at `what`) as its class id among `labels`. */
function labelId(what, label, labels) {
  const id = labels.indexOf(label);
  if (id < 0) throw new Error(`sesame-lm: ${what} has the label ${describe(label)}, which is not one of labels (${labels.map(describe).join(', ')})`);
  return id;
}

/**
 * Each task: the objective `sesame train` trains, how examples are written as the file it
 * reads, and what a label is. `labelsOf` gives an example's labels (for the default set).
 */
const TASKS = {
  'text-classification': {
    objective: 'classify',
    file: 'train.tsv',
    labelsOf: (e) => [e.label],
    /** `text<TAB>[textPair<TAB>]label id` lines. */
    write(what, examples, labels) {
      const pairs = examples.map((e, i) => requireObject(`${what}[${i}]`, e).textPair !== undefined);
      const lines = examples.map((e, i) => {
        const at = `${what}[${i}]`;
        requireText(`${at}.text`, e.text);
        if (pairs[i] !== pairs[0]) throw new Error(`sesame-lm: ${at} ${pairs[i] ? 'has a textPair' : 'has no textPair'}, and ${what}[0] ${pairs[0] ? 'has one' : 'has none'}: the examples are all single texts or all pairs`);
        const pair = pairs[i] ? `${oneLine(requireText(`${at}.textPair`, e.textPair))}\t` : '';
        return `${oneLine(e.text)}\t${pair}${labelId(at, e.label, labels)}`;
      });
      return lines.join('\n');
    },
    scores: (s) => ({ accuracy: s.metrics.eval_accuracy, f1: s.metrics.eval_f1, loss: s.loss }),
  },
  'token-classification': {
    objective: 'token-classify',
    file: 'train.conll',
    labelsOf: (e) => e.labels,
    /** CoNLL: `token label` lines, a blank line after each example. */
    write(what, examples, labels) {
      return examples.map((e, i) => {
        const at = `${what}[${i}]`;
        requireObject(at, e);
        if (!Array.isArray(e.tokens) || e.tokens.length === 0) throw new TypeError(`sesame-lm: ${at}.tokens must be a non-empty array of words`);
        if (!Array.isArray(e.labels) || e.labels.length !== e.tokens.length) throw new Error(`sesame-lm: ${at}.labels must be an array with a label for each of its ${e.tokens.length} tokens`);
        return e.tokens.map((token, t) => {
          requireText(`${at}.tokens[${t}]`, token);
          if (/\s/.test(token)) throw new Error(`sesame-lm: ${at}.tokens[${t}] (${describe(token)}) holds white space: a token is one word`);
          labelId(`${at}.labels[${t}]`, e.labels[t], labels);
          return `${token} ${e.labels[t]}`;
        }).join('\n');
      }).join('\n\n');
    },
    scores: (s) => ({ accuracy: s.metrics.eval_accuracy, loss: s.loss }),
  },
  'fill-mask': {
    objective: 'mlm',
    file: 'train.txt',
    /** Unlabelled text, a document each: blank lines between them (and none within one). */
    write(what, examples) {
      return examples.map((text, i) => requireText(`${what}[${i}]`, text).replace(/\n\s*\n/g, '\n').trim()).join('\n\n');
    },
    scores: (s) => ({ loss: s.loss, perplexity: s.metrics.eval_perplexity }),
  },
};

/** The task names fineTune knows. */
export const FINE_TUNE_TASKS = Object.freeze(Object.keys(TASKS));

/** The classes: `labels` as given (distinct strings), else the sorted distinct labels of `train`. */
function classNames(task, train, labels) {
  if (labels === undefined) {
    const seen = new Set();
    train.forEach((e, i) => {
      const named = task.labelsOf(requireObject(`train[${i}]`, e));
      (Array.isArray(named) ? named : []).forEach((label) => seen.add(label));
    });
    labels = [...seen].sort();
  }
  if (!Array.isArray(labels) || labels.length === 0) throw new TypeError(`sesame-lm: labels must be a non-empty array of strings, got ${describe(labels)}`);
  labels.forEach((label, i) => {
    requireText(`labels[${i}]`, label);
    if (/[,\s]/.test(label)) throw new Error(`sesame-lm: labels[${i}] (${describe(label)}) holds a comma or white space, which a class name cannot`);
  });
  if (new Set(labels).size !== labels.length) throw new Error('sesame-lm: labels names a class twice');
  return labels;
}

function requireNumber(what, value, { min = -Infinity, max = Infinity, above } = {}) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max || (above !== undefined && value <= above)) {
    const range = above !== undefined ? `> ${above}` : `from ${min} to ${max}`;
    throw new RangeError(`sesame-lm: ${what} must be a finite number ${range}, got ${describe(value)}`);
  }
  return value;
}

/** The `RunSpec` (src/train/run/spec.rs, as JSON) of the options. */
function runSpecOf(task, options, labels) {
  const {
    epochs = 3, batchSize = 16, learningRate = 5e-5, weightDecay = 0.01, schedule = 'linear', warmupRatio = 0.1,
    maxLength, seed = 0, shuffle = true, groupByLength = false, dropout, freeze = 'none',
  } = options;
  if (!['linear', 'constant'].includes(schedule)) throw new TypeError(`sesame-lm: schedule must be "linear" or "constant", got ${describe(schedule)}`);
  if (freeze !== 'none' && freeze !== 'encoder' && !(Number.isInteger(freeze) && freeze >= 0 && freeze <= 1000)) {
    throw new TypeError(`sesame-lm: freeze must be "none", "encoder" or a number of bottom layers, got ${describe(freeze)}`);
  }
  return {
    objective: task.objective,
    model_init: MODEL_DIR,
    data: `${DATA_DIR}/${task.file}`,
    out: 'out',
    epochs: requireNumber('epochs', epochs, { above: 0, max: 1e6 }),
    batch_size: requireCount('batchSize', batchSize, 1),
    lr: requireNumber('learningRate', learningRate, { min: 0 }),
    weight_decay: requireNumber('weightDecay', weightDecay, { min: 0, max: 1 }),
    schedule,
    warmup_ratio: requireNumber('warmupRatio', warmupRatio, { min: 0, max: 1 }),
    // Default: the model's positions, at most 128.
    seq_len: maxLength === undefined ? undefined : requireCount('maxLength', maxLength, 3),
    seed: requireCount('seed', seed),
    shuffle: Boolean(shuffle),
    group_by_length: Boolean(groupByLength),
    dropout: dropout === undefined ? undefined : requireNumber('dropout', dropout, { min: 0, max: 0.99 }),
    // The base model's weights that stay as they are: all ("encoder") or its embeddings and bottom layers.
    freeze: freeze === 'none' || freeze === 0 ? undefined : String(freeze),
    labels,
  };
}

/** The path of a data file `name` in the training module's files, of the task's kind (its extension). */
const dataFile = (recipe, name) => `${DATA_DIR}/${name}${recipe.file.slice(recipe.file.lastIndexOf('.'))}`;

/** A fine-tuning run: its losses, and the trained model to evaluate, run or save. */
export class FineTuneRun {
  #core;
  #task;
  #pipeline;
  #options;

  /** @internal made by fineTune */
  constructor(core, task, { taskName, labels, steps, threads, pipeline, options }) {
    this.#core = core;
    this.#task = task;
    this.#pipeline = pipeline;
    this.#options = options;
    this.task = taskName;
    this.labels = labels;
    this.steps = steps;
    /** The CPU threads the run's wasm kernels split their work over. */
    this.threads = threads;
    /** The loss of each step taken. */
    this.losses = [];
  }

  /** @internal the training module's run */
  get core() {
    if (!this.#core) throw new Error('sesame-lm: this fine-tuning run was disposed');
    return this.#core;
  }

  /**
   * The model as trained so far on `data` (examples as `train` takes them): {accuracy, f1,
   * loss}; token-classification {accuracy, loss}; fill-mask {loss, perplexity} of 20 batches of
   * rows masked at random.
   */
  async evaluate(data) {
    const text = this.#task.write('data', requireExamples('data', data), this.labels);
    const scores = JSON.parse(await this.core.evaluate(dataFile(this.#task, 'evaluate'), new TextEncoder().encode(text)));
    return this.#task.scores(scores);
  }

  /** The model as trained so far, as a Hugging Face folder: {'config.json', 'model.safetensors', 'tokenizer.json', …} of Uint8Arrays. */
  async save() {
    return this.core.files();
  }

  /** The model as trained so far as a pipeline of its task (`options` as pipeline() takes them). */
  async pipeline(options = {}) {
    return this.#pipeline(this.task, await this.save(), { ...this.#options, ...options });
  }

  /** Frees the run's model and optimizer state. */
  dispose() {
    this.#core?.free();
    this.#core = undefined;
  }
}

/** `sesame train`'s flags, which the core's messages name, as fineTune's options. */
const OPTION_NAMES = [['--freeze', 'freeze'], ['--batch-size', 'batchSize'], ['--seq-len', 'maxLength'], ['--labels', 'labels'], ['--epochs', 'epochs'], ['--lr', 'learningRate'], ['--warmup-ratio', 'warmupRatio'], ['--data', 'train']];

function inOptionNames(message) {
  // fineTune has no gradient accumulation to suggest.
  const plain = message.replace(/ \(with --grad-accum \d+ for as large a batch\)/, '');
  return OPTION_NAMES.reduce((text, [flag, option]) => text.replaceAll(new RegExp(`${flag}(?![\\w-])`, 'g'), option), plain);
}

/** Lets the page run (events, an abort, a repaint) between steps. */
const breathe = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Fine-tunes `given` (anything loadModelFiles takes, or a loaded model or pipeline: the files
 * it was loaded from) on `options.train` for `task` ('text-classification',
 * 'token-classification', or 'fill-mask': continued masked-LM training on unlabelled texts);
 * resolves to a FineTuneRun. An abort
 * (`options.signal`) or a loss that is not finite stops between steps: the promise rejects
 * with an Error (an AbortError for the abort) whose `run` holds the weights of the last good
 * step. `pipeline` is the package's pipeline(), which runs the trained model.
 */
export async function fineTune(task, given, givenOptions, pipeline) {
  const recipe = TASKS[task];
  if (!recipe) throw new Error(`sesame-lm: fineTune does not train task ${describe(task)} (it trains: ${FINE_TUNE_TASKS.join(', ')})`);
  requireObject('options', givenOptions);
  // A loaded model is trained from the files it was loaded from: the copy is the run's own.
  const { model, options } = filesSource(given, givenOptions, 'fineTune');
  const { train, validation, onProgress, signal, device = 'auto', threads = 'auto' } = options;
  requireExamples('train', train);
  if (validation !== undefined) requireExamples('validation', validation);
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('sesame-lm: onProgress must be a function');
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('sesame-lm: signal must be an AbortSignal');
  const threadsUsed = threadCount(threads, device, FINE_TUNE_THREADS);
  if (!recipe.labelsOf && options.labels !== undefined) throw new Error(`sesame-lm: ${task} learns from unlabelled text: it takes no labels`);
  if (!recipe.labelsOf && options.shuffle === false) throw new Error(`sesame-lm: ${task} draws its rows of text at random: shuffle: false orders labelled examples only`);
  const labels = recipe.labelsOf ? classNames(recipe, train, options.labels) : [];
  const runSpec = runSpecOf(recipe, options, labels);
  const trainText = recipe.write('train', train, labels);
  // Encoded once: evaluated after every epoch.
  const validationBytes = validation === undefined ? undefined : new TextEncoder().encode(recipe.write('validation', validation, labels));
  signal?.throwIfAborted();

  const [training, files] = await Promise.all([loadTrainingModule(options, threadsUsed), loadModelFiles(model, options)]);
  const gpu = await trainingDevice(training.core, device);
  signal?.throwIfAborted();
  const runFiles = { [`${DATA_DIR}/${recipe.file}`]: new TextEncoder().encode(trainText) };
  for (const [name, bytes] of Object.entries(files)) runFiles[`${MODEL_DIR}/${name}`] = bytes;
  let core;
  try {
    core = training.core.TrainingRun.prepare(gpu, runFiles, JSON.stringify(runSpec));
  } catch (e) {
    throw new Error(`sesame-lm: ${inOptionNames(e.message)}`);
  }
  const run = new FineTuneRun(core, recipe, { taskName: task, labels, steps: core.steps, threads: training.threads, pipeline, options: { device: options.device, threads: options.threads } });
  const perEpoch = core.batchesPerEpoch;
  // Whatever stops the run (an abort, a loss that is not finite, a failed evaluation, an
  // onProgress that throws) rejects with the run, so that no work is lost.
  const stop = (error) => Object.assign(error, { run });
  try {
    for (let step = 0; step < run.steps; step++) {
      if (signal?.aborted) throw stop(new DOMException(`sesame-lm: fine-tuning aborted after ${step} of ${run.steps} steps (error.run holds the model as trained so far)`, 'AbortError'));
      const started = performance.now();
      let report;
      try {
        report = JSON.parse(await core.step());
      } catch (e) {
        throw stop(new Error(`sesame-lm: fine-tuning stopped: ${e.message} (error.run holds the model as trained so far)`));
      }
      run.losses.push(report.loss);
      const done = step + 1;
      const progress = {
        status: 'training', step: done, steps: run.steps, epoch: done / perEpoch, loss: report.loss, learningRate: report.lr,
        examplesPerSecond: runSpec.batch_size / ((performance.now() - started) / 1000),
        memoryBytes: training.memory.buffer.byteLength,
      };
      // Validation at the end of each epoch and of the run.
      if (validationBytes !== undefined && (done % perEpoch === 0 || done === run.steps)) {
        progress.validation = recipe.scores(JSON.parse(await core.evaluate(dataFile(recipe, 'validation'), validationBytes)));
      }
      onProgress?.(progress);
      await breathe();
    }
  } catch (e) {
    throw e.run ? e : stop(e);
  }
  return run;
}
