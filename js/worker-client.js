// pipelineInWorker(): the same pipelines, run in a Web Worker so that the page stays
// responsive while a model loads and runs. Callbacks (onProgress, onToken) are forwarded as
// messages; results arrive as the page-side pipeline returns them. With `workers: n`, n
// workers each hold the model: a batch is split among them, so that on the CPU (the wasm
// device, one thread per worker) every core works.

import { tokenStream, tensorResult } from './stream.js';
import { isNode, nodeModule } from './platform.js';

/** Read from disk in Node (variables, so that bundlers leave them to the Workers below). */
const WORKER_FILES = { pipeline: './worker.js', 'fine-tune': './fine-tune-worker.js' };

/**
 * The process's Node flags a worker thread can take: not the ones about the main script
 * (`-e`/`-p` and their code, `--input-type`), which make a worker fail to start.
 */
function workerExecArgv(execArgv) {
  const kept = [];
  for (let i = 0; i < execArgv.length; i++) {
    const flag = execArgv[i];
    if (['-e', '--eval', '-p', '--print'].includes(flag)) i++;
    else if (!flag.startsWith('--input-type') && !/^--(eval|print)=/.test(flag)) kept.push(flag);
  }
  return kept;
}

/**
 * A new worker running worker.js (`kind` "pipeline") or, in Node only, fine-tune-worker.js
 * ("fine-tune"; fine-tune-client.js starts its Web Worker itself, so that a bundler meets that
 * worker only behind fineTuneInWorker): a module Web Worker, or in Node a worker_threads Worker
 * behind the same interface (onmessage, onerror, onmessageerror, postMessage, terminate).
 */
export async function newWorker(kind = 'pipeline') {
  // A literal URL, which bundlers find and build as a worker.
  if (!isNode) return new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  const { Worker: NodeWorker } = await nodeModule('node:worker_threads');
  const thread = new NodeWorker(new URL(WORKER_FILES[kind], import.meta.url), { execArgv: workerExecArgv(process.execArgv) });
  // Like a terminated Web Worker, an ended thread reports nothing more.
  let ended = false;
  const crash = (message) => {
    if (!ended) worker.onerror?.({ message });
    ended = true;
  };
  const worker = {
    postMessage: (message, transfer) => thread.postMessage(message, transfer),
    terminate: () => {
      ended = true;
      thread.terminate();
    },
    // An idle thread does not keep the process alive; one with a call in flight does.
    ref: () => thread.ref(),
    unref: () => thread.unref(),
  };
  thread.on('message', (data) => !ended && worker.onmessage?.({ data }));
  thread.on('messageerror', () => !ended && worker.onmessageerror?.());
  thread.on('error', (e) => crash(e.message));
  // A thread that ends by itself (process.exit in it) is a crash too.
  thread.on('exit', (code) => crash(`the worker thread exited (code ${code})`));
  return worker;
}

/** Tasks whose array input is a batch of independent items, answered in the same order. */
const BATCHED = new Set(['feature-extraction', 'elmo-embeddings']);

/**
 * Loads `task` on `model` in a new module worker (or `options.worker`), or in
 * `options.workers` of them, and returns a pipeline function like pipeline()'s, with
 * dispose() ending the workers.
 */
export async function pipelineInWorker(task, model, options = {}) {
  const { workers = 1, ...rest } = options;
  if (!Number.isInteger(workers) || workers < 1 || workers > 64) throw new TypeError(`sesame-lm: workers must be an integer from 1 to 64, got ${workers}`);
  if (workers === 1) return oneWorker(task, model, rest);
  if (rest.worker) throw new TypeError('sesame-lm: give either worker or workers, not both');
  return workerPool(task, model, workers, rest);
}

/**
 * `count` workers with the model: the first loads it (fetching it once, into the cache, with
 * the progress reported), then the rest. A batch of feature-extraction or elmo-embeddings is
 * split into contiguous parts, one a worker, and put back together; any other call goes to
 * the next worker in turn.
 */
async function workerPool(task, model, count, options) {
  // The workers are the parallelism: one thread each unless asked (threads "auto" in n
  // workers of an isolated page would start n pools of every core).
  options = { threads: 1, ...options };
  const members = [await oneWorker(task, model, options)];
  const { onProgress, ...quiet } = options;
  try {
    members.push(...await Promise.all(Array.from({ length: count - 1 }, () => oneWorker(task, model, quiet))));
  } catch (e) {
    members.forEach((m) => m.dispose());
    throw e;
  }
  let turn = 0;
  const run = async (input, ...rest) => {
    if (!BATCHED.has(task) || !Array.isArray(input) || input.length < 2) return members[turn++ % count](input, ...rest);
    const size = Math.ceil(input.length / count);
    const parts = [];
    for (let start = 0; start < input.length; start += size) parts.push(input.slice(start, start + size));
    const results = await Promise.all(parts.map((part, i) => members[i](part, ...rest)));
    if (results[0].dims) {
      const data = new Float32Array(results.reduce((n, r) => n + r.data.length, 0));
      results.reduce((at, r) => { data.set(r.data, at); return at + r.data.length; }, 0);
      return tensorResult(data, [results.reduce((n, r) => n + r.dims[0], 0), ...results[0].dims.slice(1)]);
    }
    return results.flat(1);
  };
  run.task = task;
  run.info = members[0].info;
  run.adapter = members[0].adapter;
  run.workers = count;
  run.dispose = () => members.forEach((m) => m.dispose());
  if (task === 'text-generation') {
    run.stream = (prompt, opts = {}) => tokenStream((onToken) => run(prompt, { ...opts, onToken }));
  }
  return run;
}

/**
 * One worker holding the pipeline. Every promise it returns settles: a disposed pipeline, a
 * failed load and a crashed worker reject each call (in flight or later) with an Error. After a
 * wasm trap or a crash, a worker this module started is replaced, and the model loaded again,
 * on the next call; a worker given in `options.worker` cannot be, and its pipeline stays failed.
 */
async function oneWorker(task, model, options) {
  const { onProgress, worker: given, ...rest } = options;
  let worker;
  /** Why the worker can take no more calls (disposed, crashed, trapped), or undefined. */
  let failed;
  /** Whether the pipeline was disposed: no worker is started again. */
  let disposed = false;
  const pending = new Map();
  let nextId = 0;
  let info;
  /** The worker's device (adapterInfo()): its kernels and threads. */
  let adapter;

  // A Web Worker reports nothing when it is terminated: a given worker's terminate() fails this
  // pipeline first, so that no call waits forever on a worker that is gone.
  const terminateGiven = given?.terminate;
  if (given) given.terminate = (...args) => fail(new Error('sesame-lm: the worker was terminated'), ...args);
  // Ends the current worker: every call in flight rejects with `error`.
  const fail = (error, ...terminateArgs) => {
    failed = error;
    if (given) terminateGiven.apply(given, terminateArgs);
    else worker?.terminate();
    for (const call of pending.values()) call.reject(error);
    pending.clear();
  };
  // A call has its answer (in Node, a worker with none in flight lets the process exit).
  const answered = (id) => {
    pending.delete(id);
    if (!pending.size) worker?.unref?.();
  };
  // Posts `message` and returns {id, done}: done settles with the worker's answer.
  const post = (message, handlers = {}) => {
    const id = nextId++;
    if (failed) return { id, done: Promise.reject(failed) };
    const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject, ...handlers }));
    worker.ref?.();
    try {
      worker.postMessage({ ...message, id });
    } catch (e) {
      // A function or symbol among the arguments cannot be copied to the worker.
      pending.get(id).reject(new TypeError(`sesame-lm: the arguments cannot be sent to the worker (${e.message})`));
      answered(id);
    }
    return { id, done };
  };
  const send = (message, handlers) => post(message, handlers).done;

  // Starts a worker and loads the pipeline in it (again, after a trap or a crash).
  const start = async (handlers) => {
    failed = undefined;
    worker = given ?? (await newWorker());
    worker.onmessage = ({ data }) => {
      const call = pending.get(data.id);
      if (!call) return;
      if (data.type === 'progress') call.onProgress?.(data.progress);
      else if (data.type === 'token') call.onToken?.(data.text, data.token);
      else if (data.type === 'error') {
        const error = new Error(data.message);
        if (data.trapped) fail(error);
        else {
          answered(data.id);
          call.reject(error);
        }
      } else {
        answered(data.id);
        call.resolve(data.value);
      }
    };
    worker.onerror = (event) => {
      event.preventDefault?.();
      fail(new Error(`sesame-lm: the worker failed: ${event.message || 'unknown error'}`));
    };
    worker.onmessageerror = () => fail(new Error('sesame-lm: a message from the worker could not be read'));
    try {
      ({ info, adapter } = await send({ type: 'load', task, model: model instanceof URL ? model.href : model, options: rest }, handlers));
    } catch (e) {
      fail(e);
      throw e;
    }
  };
  // The worker for a call: a new one after a trap or a crash, when this module owns it.
  const ready = async () => {
    if (disposed) throw new Error('sesame-lm: the worker pipeline was disposed');
    if (failed && !given) await start();
  };

  await start({ onProgress });
  const runGeneration = async (prompt, options = {}) => {
    // Neither callbacks nor an AbortSignal cross to the worker: the worker streams tokens
    // here, and a stop (onToken answering false, or the signal) goes back as a message.
    const { onToken, signal, ...plain } = options;
    signal?.throwIfAborted();
    await ready();
    let call;
    let stopRequested = false;
    const stop = () => {
      if (stopRequested) return;
      stopRequested = true;
      worker.postMessage({ type: 'stop', target: call.id });
    };
    const forward = (text, token) => {
      if (onToken?.(text, token) === false) stop();
    };
    call = post({ type: 'run', args: [prompt, plain], generation: true, streamTokens: Boolean(onToken) }, { onToken: forward });
    signal?.addEventListener('abort', stop, { once: true });
    try {
      return await call.done;
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  };
  const run = task === 'text-generation' ? runGeneration : async (...args) => {
    await ready();
    const value = await send({ type: 'run', args });
    return value && value.data instanceof Float32Array && value.dims ? tensorResult(value.data, value.dims) : value;
  };
  run.task = task;
  run.info = info;
  run.adapter = adapter;
  run.dispose = () => {
    disposed = true;
    fail(new Error('sesame-lm: the worker pipeline was disposed'));
  };
  if (task === 'text-generation') {
    run.stream = (prompt, opts = {}) => tokenStream((onToken) => run(prompt, { ...opts, onToken }));
  }
  return run;
}
