// fineTuneInWorker(): fineTune in a Web Worker (in Node, a worker thread), so that the page
// stays responsive while the model trains. Progress comes back as messages, an abort goes
// there as one; the trained model stays in the worker until the run is disposed, and runs as
// a pipeline in a worker of its own.

import { newWorker, pipelineInWorker } from './worker-client.js';
import { isNode } from './platform.js';
import { filesSource } from './loading.js';

/** The page's handle on a run in a worker: as fineTune's FineTuneRun. */
class WorkerFineTuneRun {
  #call;
  #end;

  constructor(task, call, end) {
    this.task = task;
    this.#call = call;
    this.#end = end;
    this.labels = [];
    this.steps = 0;
    /** The CPU threads the run's wasm kernels split their work over (in the worker). */
    this.threads = 1;
    /** The loss of each step taken. */
    this.losses = [];
  }

  async evaluate(data) {
    return this.#call({ type: 'evaluate', data });
  }

  async save() {
    return this.#call({ type: 'save' });
  }

  /** The trained model as a pipeline in a worker of its own (pipelineInWorker). */
  async pipeline(options = {}) {
    return pipelineInWorker(this.task, await this.save(), options);
  }

  /** Frees the run and ends its worker. */
  dispose() {
    this.#end();
  }
}

/**
 * fineTune(task, model, options) in a new worker (or `options.worker`, a Web Worker running
 * dist/fine-tune-worker.js). Resolves to a run like fineTune's; rejects like fineTune, the
 * error's `run` holding the work when it was kept.
 */
export async function fineTuneInWorker(task, givenModel, givenOptions = {}) {
  // A loaded model stays on this thread: the worker reads the files it was loaded from.
  const { model, options } = filesSource(givenModel, givenOptions, 'fineTuneInWorker');
  const { onProgress, signal, worker: given, ...rest } = options;
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('sesame-lm: onProgress must be a function');
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('sesame-lm: signal must be an AbortSignal');
  signal?.throwIfAborted();
  // A literal URL, which bundlers find and build as a worker.
  const worker = given ?? (isNode ? await newWorker('fine-tune') : new Worker(new URL('./fine-tune-worker.js', import.meta.url), { type: 'module' }));
  const pending = new Map();
  let nextId = 0;
  let failed;
  const end = (error) => {
    failed = error;
    worker.terminate();
    for (const call of pending.values()) call.reject(error);
    pending.clear();
  };
  const call = (message, handlers = {}) => {
    if (failed) return Promise.reject(failed);
    const id = nextId++;
    const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject, ...handlers }));
    worker.ref?.();
    try {
      worker.postMessage({ ...message, id });
    } catch (e) {
      pending.get(id).reject(new TypeError(`sesame-lm: the options cannot be sent to the worker (${e.message}): give data, not functions`));
      pending.delete(id);
    }
    return done;
  };
  const run = new WorkerFineTuneRun(task, call, () => end(new Error('sesame-lm: the fine-tuning run was disposed')));
  worker.onmessage = ({ data }) => {
    const pendingCall = pending.get(data.id);
    if (!pendingCall) return;
    if (data.type === 'progress') {
      if (data.progress.status === 'training') run.losses.push(data.progress.loss);
      pendingCall.onProgress?.(data.progress);
      return;
    }
    pending.delete(data.id);
    if (!pending.size) worker.unref?.();
    if (data.type === 'result') pendingCall.resolve(data.value);
    else {
      const error = data.name === 'AbortError' ? new DOMException(data.message, 'AbortError') : new Error(data.message);
      if (data.kept) Object.assign(run, data.kept);
      pendingCall.reject(data.kept ? Object.assign(error, { run }) : error);
    }
  };
  worker.onerror = (event) => {
    event.preventDefault?.();
    end(new Error(`sesame-lm: the fine-tuning worker failed: ${event.message || 'unknown error'} (the run is lost)`));
  };
  worker.onmessageerror = () => end(new Error('sesame-lm: a message from the fine-tuning worker could not be read'));
  const abort = () => worker.postMessage({ type: 'abort' });
  signal?.addEventListener('abort', abort, { once: true });
  try {
    const started = await call({ type: 'start', task, model: model instanceof URL ? model.href : model, options: rest }, { onProgress });
    Object.assign(run, { labels: started.labels, steps: started.steps, threads: started.threads, losses: started.losses });
    return run;
  } catch (e) {
    if (!e.run) end(e);
    throw e;
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}
