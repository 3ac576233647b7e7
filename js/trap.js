// A wasm trap — a panic in the Rust core, which is a bug, never bad input — leaves the module's
// memory in an unknown state, and a trap inside an async call (one that wasm-bindgen polls from a
// microtask) would leave its promise pending forever. So every call into the core goes through
// guard(): its promise rejects when the module traps, in the call or in work it queued, and
// every call after a trap rejects at once with an Error that says so. A pipelineInWorker replaces
// its worker after a trap; a page reloads.

/** The RuntimeError of the module's first trap, if it trapped. */
let trapped;
/** The reject functions of the core's calls in flight. */
const inFlight = new Set();

const isTrap = (e) => typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError;

export function hasTrapped() {
  return Boolean(trapped);
}

function trappedError() {
  return new Error(`sesame-lm: the wasm module trapped (${trapped.message}): this is a bug in sesame-lm, please report it; the module cannot be used again here (reload the page; a pipelineInWorker starts a new worker by itself)`, { cause: trapped });
}

function onTrap(error) {
  if (trapped) return;
  trapped = error;
  for (const reject of inFlight) reject(trappedError());
  inFlight.clear();
}

// A trap in a task the core queued surfaces as an uncaught error or an unhandled rejection;
// handled here, it is not reported again (in a worker, as the worker's own failure).
const onUncaught = (error, event) => {
  if (!isTrap(error)) return;
  onTrap(error);
  event.preventDefault();
};
globalThis.addEventListener?.('error', (event) => onUncaught(event.error, event));
globalThis.addEventListener?.('unhandledrejection', (event) => onUncaught(event.reason, event));

/** Runs `f`, a call into the core: its result, or for a promise one that settles even if the module traps. */
export function callCore(f) {
  if (trapped) throw trappedError();
  let result;
  try {
    result = f();
  } catch (e) {
    if (!isTrap(e)) throw e;
    onTrap(e);
    throw trappedError();
  }
  if (!(result instanceof Promise)) return result;
  return new Promise((resolve, reject) => {
    inFlight.add(reject);
    result.then(resolve, (e) => {
      if (isTrap(e)) onTrap(e);
      reject(isTrap(e) ? trappedError() : e);
    }).finally(() => inFlight.delete(reject));
  });
}

/** A view of a core object whose every method call goes through callCore(). */
export function guard(core) {
  return new Proxy(core, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? (...args) => callCore(() => value.apply(target, args)) : value;
    },
  });
}
