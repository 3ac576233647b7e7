// Types of sesame-lm: BERT, GPT-2 and GPT on the GPU through WebGPU.

/** A tensor as the library returns it: row-major data and its dimensions. */
export interface Tensor {
  data: Float32Array;
  dims: number[];
}

/** feature-extraction's result: [texts, hidden] embeddings. */
export interface EmbeddingTensor extends Tensor {
  tolist(): number[][];
}

/** What onProgress receives while a model loads. */
export type ProgressEvent =
  | { status: 'initiate'; file: string; url: string }
  | { status: 'progress'; file: string; loaded: number; total: number; progress?: number }
  | { status: 'done'; file: string; url: string; cached: boolean; bytes: number }
  | { status: 'loading'; file: string }
  | { status: 'ready' };

/** A file given in memory: one piece of data, or its parts in order (a weights file larger than one ArrayBuffer). */
export type FileData = File | Blob | ArrayBuffer | ArrayBufferView | string | Array<Blob | ArrayBuffer | ArrayBufferView>;

/**
 * A model: a Hugging Face hub id (`org/name` or `name`), the URL of a Hugging Face-layout folder
 * (config.json; model.safetensors, or a sharded model.safetensors.index.json and the shards it
 * names; and tokenizer.json or vocab.txt or vocab.json + merges.txt; a relative URL starts with
 * `/` or `./`); in Node.js also a local folder (a path or a file: URL; a folder named like a hub
 * id wins over the hub); or in-memory files (name → data), or a FileList / File[] (a picked
 * folder). Weights are copied into the wasm module a tensor at a time, and files over 64 MiB are
 * kept in 64 MiB pieces, so a checkpoint never needs one ArrayBuffer of its size.
 */
export type ModelSource = string | URL | Record<string, FileData> | FileList | File[];

/** A file's bytes: one Uint8Array, or (over 64 MiB) its pieces in order. */
export type FileBytes = Uint8Array | Uint8Array[];

export interface LoadFilesOptions {
  onProgress?: (event: ProgressEvent) => void;
  /** Keep fetched files in the Cache API and load them from there next time (default true). */
  cache?: boolean;
  /** Expected sha256 (hex, optionally prefixed "sha256-") per file name. */
  integrity?: Record<string, string>;
  fetchOptions?: RequestInit;
  /** The hub a hub id is read from (default: HF_ENDPOINT in Node.js, else https://huggingface.co). */
  hubUrl?: string;
  /** The branch, tag or commit of a hub id (default "main"). */
  revision?: string;
  /** A token for private models (default: HF_TOKEN in Node.js), sent as `Authorization: Bearer`. */
  hubToken?: string;
  /** false: read hub models from the cache alone (Node.js: also HF_HUB_OFFLINE=1). */
  allowRemote?: boolean;
}

export interface DeviceOptions {
  /**
   * Where models run (decided by the first model loaded on the page): "auto" (default) uses
   * WebGPU on a GPU, and wasm SIMD on the CPU where the browser has no WebGPU or its WebGPU is a
   * CPU rasterizer such as SwiftShader; "webgpu" requires WebGPU; "wasm" always uses the CPU.
   * On the CPU a pipeline computes on the calling thread: use pipelineInWorker to keep a page
   * responsive. A page has one device: asking for another kind later is an Error.
   */
  device?: 'auto' | 'webgpu' | 'wasm';
  /** Force a WGSL kernel variant: "tiled" (GPUs) or "blocked" (CPU adapters such as SwiftShader). Under "auto" it keeps WebGPU where the browser has it; the wasm device ignores it. */
  kernels?: 'tiled' | 'blocked';
  /** Where the wasm module is served, if not beside the package's JS. */
  wasmUrl?: string | URL;
  /** Where the threaded wasm module is served, if not in wasm-threads/ beside the package's JS. */
  wasmThreadsUrl?: string | URL;
  /**
   * The CPU threads the wasm device's kernels split their work over. "auto" (the default): every
   * core (up to 16) inside a Web Worker of a cross-origin isolated page — the threaded wasm build,
   * whose Web Workers share its memory, and whose multiply-adds need WebAssembly relaxed SIMD
   * — and 1 anywhere else. A number above 1 outside such a
   * worker is an Error saying what is missing: the page's COOP/COEP headers
   * ("Cross-Origin-Opener-Policy: same-origin", "Cross-Origin-Embedder-Policy: require-corp"), or
   * a worker (pipelineInWorker(task, model, { threads })). Pages that are not isolated can still
   * use every core through pipelineInWorker's `workers`. Node.js runs one thread a worker.
   */
  threads?: 'auto' | number;
}

export interface LoadModelOptions extends LoadFilesOptions, DeviceOptions {
  /** Cut texts longer than the model's positions instead of throwing. */
  truncation?: boolean;
  /**
   * The precision of the weight matrices: "fp32", "f16", "q8" (int8 in blocks of 32) or
   * "q4" (4-bit blocks of 32), quantized as the model loads; default: as the folder stores
   * them (a folder written by `sesame quantize` loads quantized). Layer norms and biases stay
   * f32. The CPU path multiplies q8 and q4 in integers for up to 31 rows (activations
   * quantized in blocks of 32); everything else computes in f32 (README "Quantized weights").
   */
  dtype?: 'fp32' | 'f16' | 'q8' | 'q4';
}

export interface ModelInfo {
  /** config.json's model_type: 'bert', 'roberta', 'xlm-roberta', 'distilbert', 'albert', 'ernie', 'electra', 'gpt2', 'openai-gpt', … */
  modelType: string;
  /** The family's name ('RoBERTa'). */
  family: string;
  /** The transformers class ('RobertaForSequenceClassification'). */
  architecture: string;
  /** The pipelines this model serves (`pipeline(task, …)` accepts these). */
  tasks: Task[];
  layers: number;
  heads: number;
  hiddenSize: number;
  vocabSize: number;
  maxPositions: number;
  /** It reads token type (segment) ids. */
  tokenTypes: boolean;
  /** It reads task type ids (ERNIE). */
  taskTypes: boolean;
  /** Values in its weights (a shared tensor once). */
  parameters: number;
  /** Bytes its weights take on the device. */
  weightBytes: number;
  /** A classification head's labels by index (empty otherwise). */
  labels: string[];
  /** The tokenizer's mask token ('[MASK]', '<mask>'), for a model that fills masks. */
  maskToken?: string;
}

export interface ModelInputs {
  /** [batch, seq], or [batch, choices, seq] for a multiple-choice model. */
  input_ids: number[] | number[][] | number[][][] | Uint32Array | Int32Array | Tensor | { data: ArrayLike<number | bigint>; dims: number[] };
  attention_mask?: ModelInputs['input_ids'];
  /** Ignored by a family without token types (DistilBERT). */
  token_type_ids?: ModelInputs['input_ids'];
  /** ERNIE's task type ids (default 0). */
  task_type_ids?: ModelInputs['input_ids'];
  /** A CVT tagger's characters: [batch, seq, max_word_length + 4] ids per token. */
  char_ids?: number[][][] | { data: ArrayLike<number | bigint>; dims: number[] };
}

export class SesameModel {
  readonly info: ModelInfo;
  readonly disposed: boolean;
  /**
   * One forward pass; resolves to named tensors (logits, last_hidden_state, pooler_output,
   * hidden_states.{i}, attentions.{i}, start_logits, …) named as `sesame forward` names them.
   */
  forward(inputs: ModelInputs, options?: { hiddenStates?: boolean; attentions?: boolean }): Promise<Record<string, Tensor>>;
  tokenize(text: string, options?: { pair?: string }): { inputIds: number[]; tokenTypeIds: number[]; tokens: string[] };
  decode(ids: ArrayLike<number>, options?: { skipSpecialTokens?: boolean }): string;
  /** Frees the model's GPU memory. */
  dispose(): void;
}

export interface FillMaskCandidate {
  score: number;
  token: number;
  tokenStr: string;
  sequence: string;
}

export interface GenerationOptions {
  /** Default 20; at most 100000 (the context slides past the model's positions). */
  maxNewTokens?: number;
  /** 0 (default): greedy decoding. */
  temperature?: number;
  /** Sample among the k most likely tokens (0: no limit; at most 256). */
  topK?: number;
  topP?: number;
  /** The same seed gives the same sample. */
  seed?: number;
  /** true: a prompt longer than the model's positions loses its start (the result's
   * promptTokensCut says how many tokens) instead of being an Error. */
  truncation?: boolean;
  /** Called with each new piece of text and the token id that completed it; returning
   * `false` stops the generation after that token. */
  onToken?: (text: string, token: number) => boolean | void;
  /** Aborting stops the generation after the current token (the result holds what was made);
   * a signal aborted before the call rejects with its reason. */
  signal?: AbortSignal;
}

export interface GenerationResult {
  /** The prompt and its continuation. */
  generatedText: string;
  tokenIds: number[];
  newTokens: number;
  /** Tokens cut from the prompt's start (option truncation) to fit the model's positions. */
  promptTokensCut: number;
  /** True when onToken or the signal stopped the generation early. */
  stopped: boolean;
}

export interface LabelScore {
  label: string;
  score: number;
}

export interface TokenLabel {
  entity: string;
  score: number;
  index: number;
  word: string;
  /** UTF-16 offsets into the text (text.slice(start, end)). */
  start: number;
  end: number;
}

/** A token as ELECTRA's discriminator judges it. */
export interface ReplacedToken {
  /** The probability that the token was replaced. */
  score: number;
  /** score > 0.5. */
  replaced: boolean;
  index: number;
  word: string;
  /** UTF-16 offsets into the text (text.slice(start, end)). */
  start: number;
  end: number;
}

export interface Answer {
  score: number;
  /** UTF-16 offsets into the context. */
  start: number;
  end: number;
  answer: string;
}

export interface PerplexityResult {
  perplexity: number;
  meanNll: number;
  scoredTokens: number;
  windows: number;
}

interface PipelineBase {
  readonly task: string;
  readonly model: SesameModel;
  dispose(): void;
}

export interface FeatureExtractionPipeline extends PipelineBase {
  (texts: string | string[], options?: { pooling?: 'mean' | 'cls'; normalize?: boolean }): Promise<EmbeddingTensor>;
}
export interface FillMaskPipeline extends PipelineBase {
  /** One list of candidates per mask; a text with one mask gets the list itself. */
  (text: string, options?: { topK?: number }): Promise<FillMaskCandidate[] | FillMaskCandidate[][]>;
}
export interface TextGenerationPipeline extends PipelineBase {
  (prompt: string, options?: GenerationOptions): Promise<GenerationResult>;
  /** The new text piece by piece; leaving the loop early stops the generation. */
  stream(prompt: string, options?: Omit<GenerationOptions, 'onToken'>): AsyncIterable<{ text: string; token: number }>;
}
export interface NextSentencePipeline extends PipelineBase {
  /** The probability that `second` follows `first`. */
  (first: string, second: string): Promise<{ isNext: boolean; score: number }>;
}
export interface TextClassificationPipeline extends PipelineBase {
  /** The topK labels (default 1; null: all), best first. */
  (text: string, options?: { topK?: number | null; textPair?: string }): Promise<LabelScore[]>;
  /** Each text's best label (as transformers.js; `textPair`: one pair text per text). */
  (texts: string[], options?: { topK?: 1; textPair?: string[] }): Promise<LabelScore[]>;
  /** Each text's topK labels (null: all), best first. */
  (texts: string[], options: { topK: number | null; textPair?: string[] }): Promise<LabelScore[][]>;
}
export interface TokenClassificationPipeline extends PipelineBase {
  (text: string, options?: { ignoreLabels?: string[] }): Promise<TokenLabel[]>;
}
export interface ReplacedTokenDetectionPipeline extends PipelineBase {
  /** Every token that is not special, in order (ELECTRA's discriminator, …ForPreTraining). */
  (text: string): Promise<ReplacedToken[]>;
}
export interface QuestionAnsweringPipeline extends PipelineBase {
  /**
   * The best answer, or with topK > 1 the best topK (fewer if the context has fewer spans).
   * A context longer than a window of maxSeqLen tokens (default 384, at most the model's
   * positions) is read in windows sharing docStride tokens (default half a window, at most 128).
   */
  (question: string, context: string, options?: { topK?: number; maxAnswerLen?: number; maxSeqLen?: number; docStride?: number }): Promise<Answer | Answer[]>;
}
/** ELMo's vectors for one sentence: every layer and every scalar mix, one row per word. */
export interface ElmoResult {
  /** The words the sentence was split into (or was given as). */
  tokens: string[];
  /** [layers (token layer, LSTM 1, LSTM 2, …), words, 2·projection]. */
  layers: { data: Float32Array; dims: number[] };
  /** One [words, 2·projection] per scalar mix of the checkpoint. */
  representations: { data: Float32Array; dims: number[] }[];
}
export interface ZeroShotClassificationPipeline extends PipelineBase {
  /**
   * Candidate labels scored by an NLI model, best first: each read as the hypothesis
   * `hypothesisTemplate` (default "This example is {}.") after the text; softmax over the labels'
   * entailment, or with multiLabel each label's entailment against contradiction.
   */
  (text: string, candidateLabels: string[] | string, options?: { multiLabel?: boolean; hypothesisTemplate?: string }): Promise<{ sequence: string; labels: string[]; scores: number[] }>;
}
export interface ChoiceScore {
  /** The choice's position in the array given. */
  index: number;
  choice: string;
  score: number;
}
export interface MultipleChoicePipeline extends PipelineBase {
  /** The choices, best first, each read as the pair (prompt, choice); scores sum to 1. */
  (prompt: string, choices: string[]): Promise<ChoiceScore[]>;
}
export interface ElmoEmbeddingsPipeline {
  readonly task: string;
  readonly model: ElmoModel;
  dispose(): void;
  /** A text gives one result; an array of texts, or of word arrays (pre-tokenized), one each. */
  (sentences: string): Promise<ElmoResult>;
  (sentences: string[] | string[][]): Promise<ElmoResult[]>;
}
export class ElmoModel {
  readonly info: { modelType: 'elmo'; family: 'ELMo'; tasks: ['elmo-embeddings']; cells: number; projectionDim: number; layers: number; filters: number; mixes: number; outputDim: number };
  readonly disposed: boolean;
  dispose(): void;
}
/** Loads an ELMo folder (options.json + model.safetensors). */
export function loadElmo(model: ModelSource, options?: LoadModelOptions): Promise<ElmoModel>;

export interface PerplexityPipeline extends PipelineBase {
  (text: string, options?: { window?: number; stride?: number }): Promise<PerplexityResult>;
}

export interface PipelineTypes {
  'feature-extraction': FeatureExtractionPipeline;
  'fill-mask': FillMaskPipeline;
  'text-generation': TextGenerationPipeline;
  'next-sentence-prediction': NextSentencePipeline;
  'text-classification': TextClassificationPipeline;
  'token-classification': TokenClassificationPipeline;
  'replaced-token-detection': ReplacedTokenDetectionPipeline;
  'question-answering': QuestionAnsweringPipeline;
  'zero-shot-classification': ZeroShotClassificationPipeline;
  'multiple-choice': MultipleChoicePipeline;
  perplexity: PerplexityPipeline;
  'elmo-embeddings': ElmoEmbeddingsPipeline;
}

export type Task = keyof PipelineTypes;

export const TASK_NAMES: readonly Task[];

/**
 * `task` on `model`: a URL or in-memory files (loaded here, freed by dispose()), or a model
 * loaded with loadModel (shared: dispose() leaves it loaded).
 */
export function pipeline<T extends Task>(task: T, model: ModelSource | SesameModel | ElmoModel, options?: LoadModelOptions): Promise<PipelineTypes[T]>;

/**
 * A pipeline whose model lives in a Web Worker: called as the pipeline is; `.info` replaces
 * `.model` (which it has not), `.adapter` is the worker's device (its kernels and threads),
 * dispose() ends the worker.
 */
export type WorkerPipeline<T extends Task> = PipelineTypes[T] & { readonly model: never; readonly info: ModelInfo; readonly adapter: AdapterInfo };

/**
 * `task` in a Web Worker (`worker`: one you made, whose terminate() then also rejects the
 * pipeline's calls in flight; in Node.js a worker_threads Worker, which lets
 * the process exit while no call is in flight), or in `workers` of them (1–64), each holding
 * the model: a batch (an array) given to feature-extraction or elmo-embeddings is split among
 * them and put back in order; other calls take turns. On the wasm device of a page that is
 * cross-origin isolated, one worker runs the threaded wasm build on every core (`threads`,
 * see DeviceOptions); elsewhere each worker is one CPU thread, so
 * `workers: navigator.hardwareConcurrency` uses every core (at that many times the model's memory).
 */
export function pipelineInWorker<T extends Task>(task: T, model: string | URL | Record<string, ArrayBuffer | ArrayBufferView | Blob | string>, options?: LoadModelOptions & { worker?: Worker; workers?: number }): Promise<WorkerPipeline<T>>;

export function loadModel(model: ModelSource, options?: LoadModelOptions): Promise<SesameModel>;

/** The files of a model as {name: bytes}, fetched (with progress and caching) or read from memory. */
export function loadModelFiles(model: ModelSource, options?: LoadFilesOptions): Promise<Record<string, FileBytes>>;

/** Deletes every model file kept in the Cache API. */
export function clearCache(): Promise<void>;

/**
 * The shared device (created on first use; see DeviceOptions.device); with device "webgpu", rejects where the browser has no WebGPU.
 * A device that was lost (its GPU reset or removed), or a wasm module that trapped, is replaced here: the models on the old one reject
 * every call with an Error saying to load them again.
 */
export function getDevice(options?: DeviceOptions): Promise<Device>;

/** The device models run on (one a page): WebGPU, or the CPU through wasm SIMD. */
export interface Device {
  /** The adapter as a JSON string (adapterInfo() parses it). */
  info(): string;
  /** Live and pooled buffers as a JSON string (stats() parses it). */
  stats(): string;
  /** Why the WebGPU device was lost (its GPU reset or removed), if it was. */
  lost(): string | undefined;
  /** Frees the pooled buffers that no tensor uses. */
  trimPool(): void;
}

export interface AdapterInfo {
  name: string;
  backend: string;
  device_type: string;
  driver: string;
  /** "host" when models run on wasm SIMD rather than WebGPU. */
  kernels: 'tiled' | 'blocked' | 'host';
  /** The CPU threads one model's host kernels run on; null on a WebGPU adapter. */
  threads: number | null;
  [key: string]: unknown;
}
export function adapterInfo(): Promise<AdapterInfo>;

export interface GpuStats {
  /** Buffers held by tensors in use. */
  liveBuffers: number;
  liveBytes: number;
  /** Buffers kept for reuse. */
  pooledBuffers: number;
  pooledBytes: number;
}
export function stats(): Promise<GpuStats>;

/** A labelled text (or text pair) for text-classification fine-tuning. */
export interface TextExample {
  text: string;
  textPair?: string;
  label: string;
}

/** A sentence's words and a label for each, for token-classification fine-tuning. */
export interface TokenExample {
  tokens: string[];
  labels: string[];
}

export interface FineTuneExamples {
  'text-classification': TextExample;
  'token-classification': TokenExample;
  /** Unlabelled text, a document each (continued masked-LM training). */
  'fill-mask': string;
}

export type FineTuneTask = keyof FineTuneExamples;

/** Held-out scores: the loss; accuracy (and for text-classification the macro-averaged F1); fill-mask's perplexity. */
export interface FineTuneScores {
  loss: number;
  accuracy?: number;
  f1?: number;
  perplexity?: number;
}

/** A step taken (the model's files loading report as `ProgressEvent`s first). */
export interface FineTuneProgress {
  status: 'training';
  /** Steps taken (1-based) of `steps`. */
  step: number;
  steps: number;
  /** Epochs done, a fraction within one. */
  epoch: number;
  loss: number;
  learningRate: number;
  examplesPerSecond: number;
  /** The training module's memory (it only grows: the run's peak so far). */
  memoryBytes: number;
  /** At the end of each epoch and of the run, when `validation` is given. */
  validation?: FineTuneScores;
}

export interface FineTuneOptions<T extends FineTuneTask> extends Omit<LoadFilesOptions, 'onProgress'> {
  train: FineTuneExamples[T][];
  validation?: FineTuneExamples[T][];
  /** The classes by id (written to config.json's id2label); default: the sorted distinct labels of `train`. */
  labels?: string[];
  /** Passes over `train` (a fraction too); default 3. */
  epochs?: number;
  /** Default 16. */
  batchSize?: number;
  /** AdamW's peak rate; default 5e-5. */
  learningRate?: number;
  /** Decoupled weight decay of matrices and embedding tables (not biases nor LayerNorm); default 0.01. */
  weightDecay?: number;
  /** After the warmup; default 'linear' (to 0). */
  schedule?: 'linear' | 'constant';
  /** Linear warmup over this share of the steps; default 0.1. */
  warmupRatio?: number;
  /** Tokens per example; default the model's positions, at most 128. */
  maxLength?: number;
  /** Seeds the shuffle, dropout and a fresh head; default 0. */
  seed?: number;
  /** A new order of `train` each epoch (seeded); default true. */
  shuffle?: boolean;
  /**
   * Batches of examples of similar length (each window of 50 batches of the epoch's shuffle
   * sorted by length; transformers' group_by_length): far less padding, so faster (MiniLM on
   * SST-2: 1.8×); default false.
   */
  groupByLength?: boolean;
  /** Every dropout probability of the model; default its config's. */
  dropout?: number;
  /**
   * Weights of the base model that stay as they are: 'none' (default), 'encoder' (only the task
   * head learns) or a number: the embeddings and that many bottom layers.
   */
  freeze?: 'none' | 'encoder' | number;
  device?: 'auto' | 'webgpu' | 'wasm';
  /**
   * The CPU threads of the wasm device's kernels. "auto" (the default): every core in a Web
   * Worker of a cross-origin isolated page whose browser has relaxed SIMD (fineTuneInWorker
   * there), else 1. More than one runs the threaded training module
   * (dist/wasm-train-threads/); asked for where it cannot run, an Error says why.
   */
  threads?: 'auto' | number;
  /** The model's files loading, then each step. */
  onProgress?: (progress: ProgressEvent | FineTuneProgress) => void;
  /** Stops between steps: the promise rejects with an AbortError whose `run` holds the model as trained so far. */
  signal?: AbortSignal;
  /** Where the training module is (default: dist/wasm-train/sesame_bg.wasm beside the package). */
  wasmTrainingUrl?: string | URL;
  /** Where the threaded training module is, if not in wasm-train-threads/ beside the package's JS. */
  wasmTrainingThreadsUrl?: string | URL;
}

/** A fine-tuning run: its losses, and the trained model to evaluate, run or save. */
export interface FineTuneRun<T extends FineTuneTask> {
  readonly task: T;
  readonly labels: string[];
  readonly steps: number;
  /** The CPU threads the run's wasm kernels split their work over. */
  readonly threads: number;
  /** The loss of each step taken. */
  readonly losses: number[];
  evaluate(data: FineTuneExamples[T][]): Promise<FineTuneScores>;
  /** The model as trained so far, as a pipeline of its task. */
  pipeline(options?: LoadModelOptions): Promise<PipelineTypes[T]>;
  /** The model as a Hugging Face folder: config.json (id2label/label2id), model.safetensors, the tokenizer's files. */
  save(): Promise<Record<string, Uint8Array>>;
  dispose(): void;
}

/** An error that stopped a fine-tuning run (an abort, a loss that is not finite): `run` holds the weights of the last good step. */
export interface FineTuneError extends Error {
  run?: FineTuneRun<FineTuneTask>;
}

/**
 * A model to fine-tune: its files, or a model loaded by loadModel (or a pipeline's) — the files
 * it was loaded from (not bytes in memory, which a loaded model does not keep).
 */
export type FineTuneSource = ModelSource | SesameModel | { model: SesameModel };

/**
 * Fine-tunes `model` (a hub id, URL, folder or in-memory files; a loaded model trains a copy of
 * the files it was loaded from, and stays as it was) on the page's own examples, on this
 * machine: nothing is uploaded.
 */
export function fineTune<T extends FineTuneTask>(task: T, model: FineTuneSource, options: FineTuneOptions<T>): Promise<FineTuneRun<T>>;

/** fineTune in a Web Worker (in Node, a worker thread), so that the page stays responsive; its pipeline() runs in a worker too. */
export function fineTuneInWorker<T extends FineTuneTask>(
  task: T,
  model: string | URL | Record<string, ArrayBuffer | ArrayBufferView | Blob | string> | SesameModel | { model: SesameModel },
  options: FineTuneOptions<T> & { worker?: Worker },
): Promise<Omit<FineTuneRun<T>, 'pipeline'> & { pipeline(options?: LoadModelOptions): Promise<WorkerPipeline<T>> }>;
