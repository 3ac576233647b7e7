// The Web Worker side of pipelineInWorker(): one pipeline per worker, driven by messages
// {id, type: 'load' | 'run' | 'dispose'}; answers {id, type: 'progress' | 'token' | 'result' | 'error'}.

import { pipeline } from './index.js';

let pipe;

function reply(message, transfer) {
  self.postMessage(message, transfer ?? []);
}

self.onmessage = async ({ data }) => {
  const { id, type } = data;
  try {
    if (type === 'load') {
      const onProgress = (progress) => reply({ id, type: 'progress', progress });
      pipe = await pipeline(data.task, data.model, { ...data.options, onProgress });
      reply({ id, type: 'result', value: pipe.model.info });
    } else if (type === 'run') {
      if (!pipe) throw new Error('sesame-lm: the worker has no pipeline loaded');
      const args = [...data.args];
      if (data.streamTokens) {
        const options = args.pop() ?? {};
        args.push({ ...options, onToken: (text, token) => reply({ id, type: 'token', text, token }) });
      }
      const value = await pipe(...args);
      // A tensor's tolist() cannot cross; the page side puts it back.
      const plain = value && value.tolist ? { data: value.data, dims: value.dims } : value;
      reply({ id, type: 'result', value: plain }, plain?.data ? [plain.data.buffer] : undefined);
    } else if (type === 'dispose') {
      pipe?.dispose();
      pipe = undefined;
      reply({ id, type: 'result' });
    }
  } catch (e) {
    reply({ id, type: 'error', message: e instanceof Error ? e.message : String(e) });
  }
};
