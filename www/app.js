// What every demo page shares: the header, where the models run, and the model picker that loads
// a pipeline in a Web Worker (so the page stays responsive) with a progress bar.

import { adapterInfo, getDevice, pipelineInWorker, loadModel } from '/dist/index.js';
import { MODELS } from './models.js';

const PAGES = [
  ['index.html', 'Overview'],
  ['fill-mask.html', 'Fill the blank'],
  ['generate.html', 'Write on'],
  ['similarity.html', 'Similar sentences'],
  ['sentiment.html', 'Sentiment'],
  ['tags.html', 'Word classes'],
  ['next-sentence.html', 'Next sentence'],
  ['perplexity.html', 'Perplexity'],
  ['attention.html', 'Attention'],
  ['elmo.html', 'Words in context'],
  ['teach.html', 'Teach it'],
  ['models.html', 'Any model'],
  ['bench.html', 'Benchmark'],
];

/** Creates an element: el('div', {class: 'x'}, child, 'text'). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) {
    if (k === 'class') node.className = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

/** The site header; marks the current page. */
export function header() {
  const here = location.pathname.split('/').pop() || 'index.html';
  const nav = PAGES.map(([href, name]) => el('a', { href, class: href === here ? 'here' : '' }, name));
  // `scroll-x`: on a phone the row scrolls sideways (app.css), the current page's link in view.
  const bar = el('header', { class: 'scroll-x' }, el('a', { href: 'index.html', class: 'brand' }, 'Sesame'), ...nav);
  document.body.prepend(bar);
  const current = nav.find((a) => a.classList.contains('here'));
  if (current && bar.scrollWidth > bar.clientWidth) bar.scrollLeft = current.offsetLeft - bar.clientWidth / 3;
  document.querySelectorAll('.scroll-x').forEach(cueHiddenPart);
}

/** Marks each edge of a sideways-scrolling box past which part of it is hidden (app.css fades it). */
function cueHiddenPart(box) {
  const update = () => {
    box.classList.toggle('hidden-left', box.scrollLeft > 1);
    box.classList.toggle('hidden-right', box.scrollLeft + box.clientWidth < box.scrollWidth - 1);
  };
  box.addEventListener('scroll', update, { passive: true });
  // Tables fill in after a run: their size changes, not the box's.
  const watch = new ResizeObserver(update);
  [box, ...box.children].forEach((part) => watch.observe(part));
}

/**
 * A banner saying where this page's models run — "WebGPU: <adapter>" or "CPU: WebAssembly
 * SIMD, N threads" — and, on the CPU, why: no WebGPU at all, or a WebGPU without a GPU behind
 * it (no adapter, or a software one). The workers decide as the page does (`device`, default
 * "auto"), and each model runs in its own worker on `threads` threads.
 */
export async function showWhereItRuns(container, device = 'auto') {
  const banner = el('div', { class: 'banner', id: 'runs-on' }, 'Checking where the models run…');
  container.prepend(banner);
  let info;
  try {
    await getDevice({ device });
    info = await adapterInfo();
  } catch (e) {
    banner.textContent = `Sesame cannot start in this browser: ${e.message}`;
    banner.classList.add('error');
    return undefined;
  }
  if (info.kernels !== 'host') {
    banner.replaceChildren(el('strong', {}, `WebGPU: ${info.name || 'an unnamed adapter'}`), ` (${info.device_type}).`);
    return info;
  }
  const why = navigator.gpu
    ? 'This browser has WebGPU, but no GPU behind it (no adapter, or a software one that is slower than the CPU path)'
    : 'This browser has no WebGPU';
  // The why folds away on a phone (open from the start on a wider screen).
  const details = el('details', {}, el('summary', {}, el('strong', { id: 'cpu-threads' }, cpuThreads(info.threads))),
    ` ${why}, so Sesame runs the models on your processor, more slowly than a GPU would. `
    + 'For your GPU, try a recent Chrome or Edge on desktop, or turn WebGPU on in your browser’s settings.');
  details.open = !matchMedia('(max-width: 640px)').matches;
  banner.replaceChildren(details);
  return info;
}

function cpuThreads(threads) {
  return `CPU: WebAssembly SIMD, ${threads} thread${threads === 1 ? '' : 's'} per model.`;
}

/**
 * The banner's thread count from a worker pipeline's own device: the page's main thread runs
 * on one, while a worker of a cross-origin isolated page runs on every core.
 */
function showWorkerThreads(adapter) {
  const strong = document.getElementById('cpu-threads');
  if (strong && adapter?.kernels === 'host') strong.textContent = cpuThreads(adapter.threads);
}

/** Sets a status line; `error` styles it as one. */
export function setStatus(node, text, error = false) {
  node.textContent = text;
  node.classList.toggle('error', error);
}

/**
 * A model picker for `task`: a list of the demo's models, a box for any Hugging Face-layout
 * URL, a Load button and a progress bar. Calls `onLoaded(pipe, model)` with each loaded
 * pipeline (the previous one is disposed). `inWorker: false` loads a plain SesameModel on the
 * page instead (for pages that need forward()).
 */
/** The page's model picker, if it has one: run buttons wait for its model. */
const picker = { present: false, ready: false };

export function modelPicker(container, { task, onLoaded, inWorker = true }) {
  picker.present = true;
  const choices = MODELS.filter((m) => m.tasks.includes(task));
  const select = el('select', { id: 'model' }, ...choices.map((m, i) => el('option', { value: String(i) }, m.name + (m.random ? ' — random weights' : ''))), el('option', { value: 'custom' }, 'Another model (hub id or URL)…'));
  const url = el('input', { id: 'model-url', type: 'text', placeholder: 'org/name on the Hugging Face hub, or https://…/model-folder/', hidden: '' });
  const load = el('button', { id: 'load' }, 'Load');
  const progress = el('progress', { id: 'progress', max: '100', value: '0', hidden: '' });
  const status = el('div', { class: 'status', id: 'status' });
  const vocabularyNote = el('span', {}, '');
  const warning = el('div', { class: 'random', id: 'random-warning', hidden: '' },
    'Random weights: this model was never trained, so its answers are noise. It shows the real architecture running in your browser; ',
    'a trained model will replace it. ', vocabularyNote);
  container.append(el('div', { class: 'card' }, el('label', { for: 'model' }, 'Model'), el('div', { class: 'row' }, select, load), url, progress, status, warning));

  let current;
  select.addEventListener('change', () => { url.hidden = select.value !== 'custom'; });
  const run = async () => {
    const chosen = select.value === 'custom' ? { url: url.value.trim(), name: url.value.trim() } : choices[Number(select.value)];
    if (!chosen.url) return setStatus(status, 'Type a hub id (org/name) or the URL of a model folder first.', true);
    load.disabled = true;
    progress.hidden = false;
    progress.value = 0;
    setStatus(status, `Loading ${chosen.name}…`);
    const sizes = {};
    const onProgress = (e) => {
      if (e.status === 'progress') {
        sizes[e.file] = e;
        const total = Object.values(sizes).reduce((s, f) => s + (f.total || f.loaded), 0);
        const loaded = Object.values(sizes).reduce((s, f) => s + f.loaded, 0);
        progress.value = total ? (100 * loaded) / total : 0;
        setStatus(status, `Downloading ${e.file}: ${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB`);
      } else if (e.status === 'loading') {
        setStatus(status, 'Preparing the model…');
      }
    };
    try {
      // The page's run button waits for the new model: the old one is gone, and the new one
      // may fail to load.
      current?.dispose();
      current = undefined;
      picker.ready = false;
      const runButton = document.getElementById('run');
      if (runButton) runButton.disabled = true;
      current = inWorker ? await pipelineInWorker(task, chosen.url, { onProgress }) : await loadModel(chosen.url, { onProgress });
      progress.value = 100;
      const info = current.info ?? current.model?.info;
      setStatus(status, info.modelType === 'elmo'
        ? `Ready: ELMo, ${info.layers} layers × ${info.outputDim}.`
        : `Ready: ${info.architecture}, ${info.layers} layers × ${info.hiddenSize}.`);
      if (inWorker) showWorkerThreads(current.adapter);
      warning.hidden = !chosen.random;
      vocabularyNote.textContent = chosen.note ?? 'It knows only a few dozen words.';
      picker.ready = true;
      onLoaded(current, chosen);
    } catch (e) {
      setStatus(status, e.message, true);
    } finally {
      load.disabled = false;
      progress.hidden = true;
    }
  };
  load.addEventListener('click', run);
  return { load: run, status };
}

/**
 * An error's message as a visitor of the page can act on it: the library's hint for an
 * over-long text names a CLI flag and an option, which the pages do not offer.
 */
function inPageTerms(message) {
  return message.replace(/ \(turn truncation on to cut it: [^)]*\)/, ': shorten it');
}

/**
 * Runs `work` when `button` is clicked: the button is disabled meanwhile, `status` says
 * "Working…", then what `work` returns (or its error). `output` (default: the page's #result)
 * is hidden while the work runs and shown when it succeeds, so that an error never sits above
 * the previous run's result as if it were this one's.
 */
export function onRun(button, status, work, output = document.getElementById('result')) {
  button.addEventListener('click', async () => {
    button.disabled = true;
    setStatus(status, 'Working…');
    if (output) output.hidden = true;
    try {
      setStatus(status, (await work()) ?? '');
      if (output) output.hidden = false;
    } catch (e) {
      setStatus(status, inPageTerms(e.message), true);
    } finally {
      // A model load that failed meanwhile leaves nothing to run.
      button.disabled = picker.present && !picker.ready;
    }
  });
}

/**
 * Keeps `box` showing the loaded model's example text (`example` in models.js) until the
 * visitor types there; returns the function to call with each loaded model.
 */
export function exampleText(box) {
  let edited = false;
  box.addEventListener('input', () => { edited = true; });
  return (model) => {
    if (!edited && model.example) box.value = model.example;
  };
}

/** A page's frame: header, where the models run, and the model picker (loading its first model). */
export function page(options) {
  header();
  showWhereItRuns(document.querySelector('main'));
  const picker = modelPicker(document.getElementById('picker'), options);
  picker.load();
  return picker;
}
