// A bundler consumer of the package: imports `sesame-lm` by name and runs one pipeline on the
// page and one in a worker (the URL of the model folder comes from ?model=).
import { pipeline, pipelineInWorker } from 'sesame-lm';

const model = new URLSearchParams(location.search).get('model');
const result = document.getElementById('result');
try {
  const fill = await pipeline('fill-mask', model);
  const onPage = await fill('the cat sat on the [MASK] .', { topK: 3 });
  fill.dispose();
  const inWorker = await pipelineInWorker('fill-mask', model);
  const fromWorker = await inWorker('the cat sat on the [MASK] .', { topK: 3 });
  inWorker.dispose();
  result.textContent = JSON.stringify({ onPage, fromWorker });
} catch (e) {
  result.textContent = `error: ${e.message}`;
}
