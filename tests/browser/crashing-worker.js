// The package's worker with two ways to fail, for the tests that every promise settles: 'crash'
// throws an uncaught error (as a worker that runs out of memory dies), 'trap' raises the
// RuntimeError a wasm trap raises, from a microtask as when wasm-bindgen polls a future.

import '/dist/worker.js';

self.addEventListener('message', ({ data }) => {
  if (data.type === 'crash') setTimeout(() => { throw new Error('the worker crashed on purpose'); });
  if (data.type === 'trap') queueMicrotask(() => { throw new WebAssembly.RuntimeError('unreachable'); });
});
