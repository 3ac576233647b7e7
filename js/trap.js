// A wasm trap — a panic in the Rust core, which is a bug, never bad input — leaves the module's
// memory in an unknown state, and a trap inside an async call (one that wasm-bindgen polls from a
// microtask) would leave its promise pending forever. So every call into the core goes through
// callCore() or a guard(): its promise rejects when the module traps, in the call or in work it
// queued, and every call after a trap rejects at once with an Error that says so. The next model
// load instantiates the module afresh (index.js, through wasm-bindgen's reset-state function);
// the core objects of the trapped instance stay unusable, with an Error that says to load the
// model again. A pipelineInWorker replaces its worker instead — the only recovery for the
// threaded build (wasm-threads/), whose memory its pool's workers share. A panic on one of
// that pool's threads traps that thread's worker alone, and the call waiting for it does not
// return: the twins check what they index before they split their work, so that bad input is
// an error there, never a panic.

/** The RuntimeError of the module's trap, until the module is instantiated afresh. */
let trapped;
/** The trap that ended the previous instance, for the errors of its core objects. */
let previousTrap;
/** Which instance of the module runs: the count of recoveries from a trap. */
let instance = 0;
/** The instance each guarded core object was made in. */
const bornIn = new WeakMap();
/** The reject functions of the core's calls in flight. */
const inFlight = new Set();

const isTrap = (e) => typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError;

export function hasTrapped() {
  return Boolean(trapped);
}

/** Marks the trap as dealt with: the caller has just instantiated the module afresh. */
export function recovered() {
  previousTrap = trapped;
  trapped = undefined;
  instance += 1;
}

function trappedError() {
  return new Error(`sesame-lm: the wasm module trapped (${trapped.message}): this is a bug in sesame-lm, please report it; the models loaded in it are lost (load them again: the next load starts the module afresh; a pipelineInWorker, and a threaded module's worker, starts a new worker by itself)`, { cause: trapped });
}

function staleError() {
  return new Error(`sesame-lm: this model was lost when the wasm module trapped (${previousTrap.message}); load it again`, { cause: previousTrap });
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
  const born = instance;
  const view = new Proxy(core, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      return (...args) => {
        if (born !== instance) throw staleError();
        return callCore(() => value.apply(target, args));
      };
    },
  });
  bornIn.set(view, born);
  return view;
}

/** Whether a guarded core object's memory can still be freed: its instance runs, untrapped. */
export function isLive(view) {
  return !trapped && bornIn.get(view) === instance;
}
