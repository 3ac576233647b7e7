// The Web Worker side of pipelineInWorker(): one pipeline per worker, driven by messages
// {id, type: 'load' | 'run' | 'stop' | 'dispose'}; answers {id, type: 'progress' | 'token' | 'result' | 'error'}
// (an error says `trapped` when the wasm module trapped).
// 'stop' {target} asks the generation run `target` to end after its current token.

import { adapterInfo, pipeline } from './index.js';
import { hasTrapped } from './trap.js';
import { workerChannel } from './platform.js';

let pipe;
/** Generation runs in flight, by id: whether each was asked to stop. */
const generations = new Map();

const onMessage = async ({ data }) => {
  const { id, type } = data;
  try {
    if (type === 'load') {
      const onProgress = (progress) => reply({ id, type: 'progress', progress });
      pipe = await pipeline(data.task, data.model, { ...data.options, onProgress });
      reply({ id, type: 'result', value: { info: pipe.model.info, adapter: await adapterInfo() } });
    } else if (type === 'run') {
      if (!pipe) throw new Error('sesame-lm: the worker has no pipeline loaded');
      const args = [...data.args];
      if (data.generation) {
        const options = args.pop() ?? {};
        generations.set(id, false);
        const onToken = (text, token) => {
          if (data.streamTokens) reply({ id, type: 'token', text, token });
          return !generations.get(id);
        };
        args.push({ ...options, onToken });
      }
      const value = await pipe(...args).finally(() => generations.delete(id));
      // A tensor's tolist() cannot cross; the page side puts it back.
      const plain = value && value.tolist ? { data: value.data, dims: value.dims } : value;
      reply({ id, type: 'result', value: plain }, plain?.data ? [plain.data.buffer] : undefined);
    } else if (type === 'stop') {
      if (generations.has(data.target)) generations.set(data.target, true);
      return;
    } else if (type === 'dispose') {
      pipe?.dispose();
      pipe = undefined;
      reply({ id, type: 'result' });
    }
  } catch (e) {
    // After a trap this worker's module is unusable: the page side replaces the worker.
    reply({ id, type: 'error', message: e instanceof Error ? e.message : String(e), trapped: hasTrapped() });
  }
};
const reply = workerChannel(onMessage);
