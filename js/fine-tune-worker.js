// The worker side of fineTuneInWorker(): one fine-tuning run per worker, driven by messages
// {id, type: 'start' | 'abort' | 'evaluate' | 'save' | 'dispose'}; answers {id, type:
// 'progress' | 'result' | 'error'}. An error that keeps the run (an abort, a loss that is not
// finite) says so (`kept`: its labels and steps): the page can still evaluate, save or run it.

// Not index.js: this worker needs the trainer only (the page runs the trained model's
// pipeline in a worker of its own), and a bundler must not meet the pipeline worker here.
import { fineTune } from './fine-tune.js';
import { workerChannel } from './platform.js';

let run;
let controller;

/** The run's pipeline() is the page's (fine-tune-client.js): it runs in a worker of its own. */
function noPipeline() {
  throw new Error('sesame-lm: a run in a worker makes its pipeline on the page (run.pipeline() there)');
}

/** The run, once trained (or stopped with its work kept). */
function trained() {
  if (!run) throw new Error('sesame-lm: the worker has no fine-tuning run');
  return run;
}

const onMessage = async ({ data }) => {
  const { id, type } = data;
  try {
    if (type === 'start') {
      controller = new AbortController();
      const onProgress = (progress) => reply({ id, type: 'progress', progress });
      try {
        run = await fineTune(data.task, data.model, { ...data.options, onProgress, signal: controller.signal }, noPipeline);
      } catch (e) {
        run = e.run;
        reply({ id, type: 'error', message: e.message, name: e.name, kept: run && { labels: run.labels, steps: run.steps, threads: run.threads } });
        return;
      }
      reply({ id, type: 'result', value: { labels: run.labels, steps: run.steps, threads: run.threads, losses: run.losses } });
    } else if (type === 'abort') {
      controller?.abort();
    } else if (type === 'evaluate') {
      reply({ id, type: 'result', value: await trained().evaluate(data.data) });
    } else if (type === 'save') {
      const files = await trained().save();
      reply({ id, type: 'result', value: files }, Object.values(files).map((bytes) => bytes.buffer));
    } else if (type === 'dispose') {
      run?.dispose();
      run = undefined;
      reply({ id, type: 'result' });
    }
  } catch (e) {
    reply({ id, type: 'error', message: e instanceof Error ? e.message : String(e), name: e?.name });
  }
};
const reply = workerChannel(onMessage);
