// pipelineInWorker(): the same pipelines, run in a Web Worker so that the page stays
// responsive while a model loads and runs. Callbacks (onProgress, onToken) are forwarded as
// messages; results arrive as the page-side pipeline returns them.

import { tokenStream, tensorResult } from './stream.js';

/**
 * Loads `task` on `model` in a new module worker (or `options.worker`) and returns a pipeline
 * function like pipeline()'s, with dispose() ending the worker.
 */
export async function pipelineInWorker(task, model, options = {}) {
  const { onProgress, worker: given, ...rest } = options;
  const worker = given ?? new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  const pending = new Map();
  let nextId = 0;
  worker.onmessage = ({ data }) => {
    const call = pending.get(data.id);
    if (!call) return;
    if (data.type === 'progress') call.onProgress?.(data.progress);
    else if (data.type === 'token') call.onToken?.(data.text, data.token);
    else {
      pending.delete(data.id);
      if (data.type === 'error') call.reject(new Error(data.message));
      else call.resolve(data.value);
    }
  };
  worker.onerror = (event) => {
    const error = new Error(`sesame-lm: the worker failed: ${event.message ?? 'unknown error'}`);
    for (const call of pending.values()) call.reject(error);
    pending.clear();
  };
  // Posts `message` and returns {id, done}: done settles with the worker's answer.
  const post = (message, handlers = {}) => {
    const id = nextId++;
    const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject, ...handlers }));
    worker.postMessage({ ...message, id });
    return { id, done };
  };
  const send = (message, handlers) => post(message, handlers).done;

  const info = await send({ type: 'load', task, model, options: rest }, { onProgress }).catch((e) => {
    worker.terminate();
    throw e;
  });
  const runGeneration = async (prompt, options = {}) => {
    // Neither callbacks nor an AbortSignal cross to the worker: the worker streams tokens
    // here, and a stop (onToken answering false, or the signal) goes back as a message.
    const { onToken, signal, ...plain } = options;
    signal?.throwIfAborted();
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
    const value = await send({ type: 'run', args });
    return value && value.data instanceof Float32Array && value.dims ? tensorResult(value.data, value.dims) : value;
  };
  run.task = task;
  run.info = info;
  run.dispose = () => {
    worker.terminate();
    for (const call of pending.values()) call.reject(new Error('sesame-lm: the worker pipeline was disposed'));
    pending.clear();
  };
  if (task === 'text-generation') {
    run.stream = (prompt, opts = {}) => tokenStream((onToken) => run(prompt, { ...opts, onToken }));
  }
  return run;
}
