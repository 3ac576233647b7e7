// What the package runs in: a browser (or a bundler's build of one), or Node.js. Node's own
// modules are imported only in Node, through a specifier bundlers leave alone.

/** Whether this is Node.js (not a browser, nor a Node-like bundle running in one). */
export const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string' && typeof window === 'undefined';

/** One of Node's built-in modules (`node:fs/promises`, …); call it only when isNode. */
export function nodeModule(name) {
  return import(/* @vite-ignore */ /* webpackIgnore: true */ name);
}

/**
 * Whether `location` names a file to read from disk rather than fetch: in Node, a `file:` URL,
 * or a string with no URL scheme (a path). `http:`/`https:`/`data:`/`blob:` are fetched.
 */
export function isLocalPath(location) {
  if (!isNode) return false;
  if (location instanceof URL) return location.protocol === 'file:';
  if (typeof location !== 'string') return false;
  return location.startsWith('file:') || !/^[a-z][a-z0-9+.-]*:/i.test(location) || /^[a-z]:[\\/]/i.test(location);
}

/** A path from a string or a `file:` URL. */
export async function toPath(location) {
  if (location instanceof URL || String(location).startsWith('file:')) {
    const { fileURLToPath } = await nodeModule('node:url');
    return fileURLToPath(location);
  }
  return location;
}

/**
 * A wasm module's source for wasm-bindgen's init: `wasmUrl` when given (a URL, bytes or a
 * compiled module), else `nodeDefault` (in Node, the file beside the package's code; in a
 * browser undefined: wasm-bindgen finds the file itself, and bundlers see it there). Node's
 * fetch cannot read `file:` URLs, so there a path or file URL is read from disk.
 */
export async function wasmSource(wasmUrl, nodeDefault) {
  const location = wasmUrl ?? nodeDefault;
  if (!isLocalPath(location)) return location;
  const { readFile } = await nodeModule('node:fs/promises');
  const path = await toPath(location);
  try {
    return await readFile(path);
  } catch (e) {
    throw new Error(`sesame-lm: reading the wasm module ${path} failed: ${e.message}`);
  }
}

/**
 * A worker's channel to the page: in a Web Worker its global scope, in a Node worker thread its
 * parentPort (which holds messages until its listener is set; no top-level await, which
 * bundlers' classic worker builds refuse). Calls `onMessage({data})` for each message; returns
 * the function that posts a message (and its transferables) to the page.
 */
export function workerChannel(onMessage) {
  let port = isNode ? undefined : self;
  if (isNode) {
    nodeModule('node:worker_threads').then(({ parentPort }) => {
      port = parentPort;
      port.on('message', (data) => onMessage({ data }));
    });
  } else {
    self.onmessage = onMessage;
  }
  return (message, transfer) => port.postMessage(message, transfer ?? []);
}
