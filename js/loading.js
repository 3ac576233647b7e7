// Model files: fetched from a Hugging Face-layout folder or a hub id (with progress, kept in the
// Cache API and checked on the way out of it), read from a local folder (Node.js), or handed
// over in memory (File, Blob, ArrayBuffer, typed array).

import { isLocalPath, isNode, nodeModule, toPath } from './platform.js';
import { ByteCollector, byteLength, joined, readLocalFile } from './bytes.js';
import { cachedHubFolder } from './hub-cache.js';
import { hubFailure, hubFetchOptions, hubFolder, isHubId } from './hub.js';

/** The files a model folder must hold besides its weights: a Hugging Face folder, or an ELMo one (no tokenizer). */
const CONFIG = 'config.json';
const ELMO_CONFIG = 'options.json';
/** The weights: one file, or a sharded checkpoint's index (and the shards it names). */
const WEIGHTS = 'model.safetensors';
const WEIGHTS_INDEX = 'model.safetensors.index.json';
/** As many shards as the core reads. */
const MAX_SHARDS = 10000;
const TOKENIZER_CHOICES = [['tokenizer.json'], ['vocab.txt'], ['vocab.json', 'merges.txt']];
const CACHE_NAME = 'sesame-lm-models-v1';
const DIGEST_HEADER = 'x-sesame-sha256';
/** A file in pieces is cached with its length only (a digest would need it in one buffer). */
const LENGTH_HEADER = 'x-sesame-length';

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest('SHA-256', joined(bytes));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

function joinUrl(base, name) {
  const href = typeof location === 'undefined' ? undefined : location.href;
  return new URL(name, new URL(base.endsWith('/') ? base : base + '/', href)).href;
}

/** Reads a response body, reporting progress; returns its bytes (in pieces when large, see bytes.js). */
async function readBody(response, file, onProgress) {
  const total = Number(response.headers.get('content-length')) || 0;
  if (!response.body) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    onProgress?.({ status: 'progress', file, loaded: bytes.length, total: bytes.length, progress: 100 });
    return bytes;
  }
  const reader = response.body.getReader();
  const collected = new ByteCollector();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    collected.push(value);
    const loaded = collected.length;
    onProgress?.({ status: 'progress', file, loaded, total, progress: total ? (100 * loaded) / total : undefined });
  }
  return collected.finish();
}

/** The cached copy of `url` if its digest (or, for a file in pieces, its length) still matches, else undefined (a bad copy is dropped). */
async function fromCache(cache, url, file, onProgress) {
  const hit = await cache.match(url);
  if (!hit) return undefined;
  const digest = hit.headers.get(DIGEST_HEADER);
  const length = hit.headers.get(LENGTH_HEADER);
  const bytes = await readBody(hit, file, onProgress);
  if (digest && (await sha256Hex(bytes)) === digest) return bytes;
  if (length && byteLength(bytes) === Number(length)) return bytes;
  await cache.delete(url);
  return undefined;
}

async function openCache(useCache) {
  if (!useCache || typeof caches === 'undefined') return undefined;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return undefined; // e.g. an insecure origin: load without caching
  }
}

/** A failed answer from a folder URL: undefined for an optional file's 404, else the Error. */
function folderFailure(base, url, file, response, optional) {
  if (response.status === 404) return optional ? undefined : new Error(`sesame-lm: the model folder ${base} has no ${file} (HTTP 404 at ${url})`);
  return new Error(`sesame-lm: fetching ${url} failed: HTTP ${response.status} ${response.statusText}`);
}

/**
 * Fetches one file of the folder (`failure` says what a failed answer means, by default as a
 * plain folder's). Resolves to its bytes, or to undefined when the server says
 * 404 and the file is optional.
 */
async function fetchFile(base, file, { optional, onProgress, cache, integrity, fetchOptions, failure, unreachable, allowRemote }) {
  const url = joinUrl(base, file);
  onProgress?.({ status: 'initiate', file, url });
  let bytes = cache && (await fromCache(cache, url, file, onProgress));
  const cached = Boolean(bytes);
  if (!bytes && allowRemote === false) {
    if (optional) return undefined;
    throw new Error(`sesame-lm: ${url} is not in the cache, and downloads are off (allowRemote: false)`);
  }
  if (!bytes) {
    let response;
    try {
      response = await fetch(url, fetchOptions);
    } catch (e) {
      throw unreachable ? unreachable(e) : new Error(`sesame-lm: fetching ${url} failed: ${e.message}`);
    }
    if (!response.ok) {
      const error = failure ? failure(file, response, optional) : folderFailure(base, url, file, response, optional);
      if (!error) return undefined;
      throw error;
    }
    bytes = await readBody(response, file, onProgress);
  }
  const expected = integrity?.[file];
  const pieces = Array.isArray(bytes);
  const store = cache && !cached;
  const digest = expected || (store && !pieces) ? await sha256Hex(bytes) : undefined;
  if (expected && digest !== expected.replace(/^sha256-/, '')) {
    if (cached) await cache.delete(url);
    throw integrityError(url, digest, expected);
  }
  if (store) await cacheFile(cache, url, bytes, pieces ? { [LENGTH_HEADER]: String(byteLength(bytes)) } : { [DIGEST_HEADER]: digest });
  onProgress?.({ status: 'done', file, url, cached, bytes: byteLength(bytes) });
  return bytes;
}

async function cacheFile(cache, url, bytes, headers) {
  const body = Array.isArray(bytes) ? new Blob(bytes) : bytes;
  // A full quota only costs the cache.
  await cache.put(url, new Response(body, { headers: { 'content-length': String(byteLength(bytes)), ...headers } })).catch(() => {});
}

function integrityError(where, digest, expected) {
  return new Error(`sesame-lm: ${where} failed its integrity check (sha256 ${digest}, expected ${expected})`);
}

/** A reader of the folder at `base` (a URL): name, {optional} → bytes, or undefined when optional and missing. */
function urlFolder(base, options, cache) {
  return (file, { optional } = {}) => fetchFile(base, file, { ...options, cache, optional });
}

/** `read`, with each file it gives checked against its `integrity` digest (if any). */
function withIntegrity(read, integrity, where) {
  return async (file, options) => {
    const bytes = await read(file, options);
    const expected = integrity?.[file];
    if (bytes && expected) {
      const digest = await sha256Hex(bytes);
      if (digest !== expected.replace(/^sha256-/, '')) throw integrityError(`${where} ${file}`, digest, expected);
    }
    return bytes;
  };
}

/** Whether `model` names a local folder that exists (Node.js): it wins over a hub id of the same name. */
async function localFolderExists(model) {
  if (!isLocalPath(model)) return false;
  const { stat } = await nodeModule('node:fs/promises');
  return stat(await toPath(model)).then(() => true, () => false);
}

/** The same for a local folder (Node.js: a path or a file: URL). */
async function localFolder(location, { onProgress }) {
  const { stat } = await nodeModule('node:fs/promises');
  const { join } = await nodeModule('node:path');
  const dir = await toPath(location);
  const info = await stat(dir).catch((e) => {
    throw new Error(`sesame-lm: the model folder ${dir} cannot be read: ${e.code === 'ENOENT' ? 'it does not exist' : e.message}`);
  });
  if (!info.isDirectory()) throw new Error(`sesame-lm: ${dir} is not a folder (give the folder that holds the model's files)`);
  return async (file, { optional } = {}) => {
    const path = join(dir, file);
    onProgress?.({ status: 'initiate', file, url: path });
    let bytes;
    try {
      bytes = await readLocalFile(path);
    } catch (e) {
      if (e.code === 'ENOENT' && optional) return undefined;
      if (e.code === 'ENOENT') throw new Error(`sesame-lm: the model folder ${dir} has no ${file}`);
      throw new Error(`sesame-lm: reading ${path} failed: ${e.message}`);
    }
    const length = byteLength(bytes);
    onProgress?.({ status: 'progress', file, loaded: length, total: length, progress: 100 });
    onProgress?.({ status: 'done', file, url: path, cached: false, bytes: length });
    return bytes;
  };
}

/** The shard files a sharded checkpoint's index names: plain file names beside it. */
function shardNames(indexBytes) {
  let map;
  try {
    map = JSON.parse(new TextDecoder().decode(joined(indexBytes))).weight_map;
  } catch (e) {
    throw new Error(`sesame-lm: ${WEIGHTS_INDEX} is not JSON: ${e.message}`);
  }
  if (!map || typeof map !== 'object') throw new Error(`sesame-lm: ${WEIGHTS_INDEX} has no weight_map ({tensor: file})`);
  const names = [...new Set(Object.values(map))];
  const bad = names.find((n) => typeof n !== 'string' || !n || /[/\\]/.test(n) || n === '.' || n === '..');
  if (bad !== undefined) throw new Error(`sesame-lm: ${WEIGHTS_INDEX} names the shard ${JSON.stringify(bad)}; expected a file name beside the index`);
  if (!names.length || names.length > MAX_SHARDS) throw new Error(`sesame-lm: ${WEIGHTS_INDEX} names ${names.length} shard files; expected 1 to ${MAX_SHARDS}`);
  return names;
}

/** The weights a folder's reader gives: model.safetensors, else the sharded index and its shards. */
async function readWeights(read, files) {
  const single = await read(WEIGHTS, { optional: true });
  if (single) {
    files[WEIGHTS] = single;
    return;
  }
  const index = await read(WEIGHTS_INDEX, { optional: true });
  // Neither: the reader's own error for the missing weights.
  if (!index) files[WEIGHTS] = await read(WEIGHTS);
  else {
    files[WEIGHTS_INDEX] = index;
    for (const shard of shardNames(index)) files[shard] = await read(shard);
  }
}

/** Whether a config.json's family reads tokenizer_config.json's text rules (fastai's, AWD-LSTM). */
function readsTextRules(configBytes) {
  try {
    return JSON.parse(new TextDecoder().decode(configBytes)).model_type === 'awd_lstm';
  } catch {
    return false;
  }
}

/**
 * The files a model folder's reader `read` gives: the config, the weights, the first
 * tokenizer whose files are all there, and tokenizer_config.json beside a vocab.txt or where
 * the family has text rules.
 */
async function readFolder(read, elmo) {
  const files = {};
  const config = elmo ? ELMO_CONFIG : CONFIG;
  files[config] = await read(config);
  await readWeights(read, files);
  if (elmo) return files;
  for (const choice of TOKENIZER_CHOICES) {
    const got = [];
    for (const name of choice) {
      const bytes = await read(name, { optional: true });
      if (!bytes) break;
      got.push([name, bytes]);
    }
    if (got.length === choice.length) {
      Object.assign(files, Object.fromEntries(got));
      break;
    }
  }
  if (files['vocab.txt'] || readsTextRules(files[config])) {
    // Only a vocab.txt tokenizer (for do_lower_case) and fastai's (for its text rules) read
    // it; not fetched otherwise, as every failed probe is a console error on the page.
    const bytes = await read('tokenizer_config.json', { optional: true });
    if (bytes) files['tokenizer_config.json'] = bytes;
  }
  return files;
}

/** Bytes of one in-memory file (an array of parts stays in pieces). */
async function toBytes(name, value) {
  if (Array.isArray(value)) return Promise.all(value.map((part) => toBytes(name, part)));
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (typeof Blob !== 'undefined' && value instanceof Blob) return new Uint8Array(await value.arrayBuffer());
  if (typeof value === 'string') return new TextEncoder().encode(value);
  throw new TypeError(`sesame-lm: file "${name}" must be a File, Blob, ArrayBuffer, typed array or string, got ${Object.prototype.toString.call(value)}`);
}

/**
 * The files of `model` as `{name: Uint8Array}`: `model` is a hub id (`org/name` or `name`;
 * in Node.js a local folder of that name wins), a folder URL, a local folder (in Node.js: a
 * path or a file: URL), an object of name → File | Blob | ArrayBuffer | typed array | string,
 * or a FileList / File[] (a picked folder). Options: onProgress, cache (default true; the
 * browser's Cache API), integrity ({file: sha256 hex}), fetchOptions, elmo (an ELMo folder:
 * options.json + model.safetensors); for hub ids hubUrl, revision (default "main") and hubToken.
 */
export async function loadModelFiles(model, options = {}) {
  if (isHubId(model) && !(await localFolderExists(model))) {
    const { base, revision } = hubFolder(model, options);
    const failure = (file, response, optional) => hubFailure(model, revision, file, response, optional);
    // No answer at all: offline, or the hub is down.
    const unreachable = (e) => new Error(`sesame-lm: the hub at ${new URL(base).origin} cannot be reached for "${model}" (${e.message}): check the connection; a model loaded before is read from the cache`);
    const hubOptions = { ...options, fetchOptions: hubFetchOptions(options), failure, unreachable };
    if (isNode && (options.cache ?? true)) {
      const read = await cachedHubFolder(model, revision, base, { ...hubOptions, readBody });
      return readFolder(withIntegrity(read, options.integrity, `hub model "${model}"`), options.elmo);
    }
    return readFolder(urlFolder(base, hubOptions, await openCache(options.cache ?? true)), options.elmo);
  }
  if (isLocalPath(model)) return readFolder(withIntegrity(await localFolder(model, options), options.integrity, String(model)), options.elmo);
  if (typeof model === 'string' || model instanceof URL) {
    const cache = await openCache(options.cache ?? true);
    return readFolder(urlFolder(String(model), options, cache), options.elmo);
  }
  if (model && typeof model === 'object') {
    const entries = Array.isArray(model) || (typeof FileList !== 'undefined' && model instanceof FileList)
      ? Array.from(model, (f) => [f.name, f])
      : Object.entries(model);
    const files = {};
    for (const [name, value] of entries) files[name] = await toBytes(name, value);
    const given = () => `given: ${Object.keys(files).join(', ') || 'none'}`;
    const config = options.elmo ? ELMO_CONFIG : CONFIG;
    if (!files[config]) throw new Error(`sesame-lm: the model files have no ${config} (${given()})`);
    if (!files[WEIGHTS] && !files[WEIGHTS_INDEX]) throw new Error(`sesame-lm: the model files have no ${WEIGHTS} (nor a sharded ${WEIGHTS_INDEX}) (${given()})`);
    if (!files[WEIGHTS]) {
      const missing = shardNames(files[WEIGHTS_INDEX]).find((shard) => !files[shard]);
      if (missing) throw new Error(`sesame-lm: the model files have no ${missing}, a shard ${WEIGHTS_INDEX} names (${given()})`);
    }
    return files;
  }
  throw new TypeError(`sesame-lm: a model is a folder URL or an object of files, got ${model === null ? 'null' : typeof model}`);
}

// The options that say where a model's files are and how to read them: a loaded model keeps
// them beside its source so that its files can be read again (fineTune trains a copy of them).
const SOURCE_OPTIONS = ['cache', 'integrity', 'fetchOptions', 'hubUrl', 'revision', 'hubToken'];
const MODEL_SOURCE = Symbol('sesame-lm model source');

/** Whether `value` (a file of an in-memory model) holds its bytes in the JS heap. */
const holdsBytes = (value) => value instanceof ArrayBuffer || ArrayBuffer.isView(value) || (Array.isArray(value) && value.some(holdsBytes));

/**
 * Marks `loaded` as read from `model` with `options` (loadModelFiles's arguments). A model
 * given as bytes in memory is not kept (its bytes would stay in the heap beside the loaded
 * copy for the model's whole life); names, URLs, Files and Blobs are.
 */
export function keepSource(loaded, model, options) {
  const inMemory = model && typeof model === 'object' && !(model instanceof URL) && Object.values(model).some(holdsBytes);
  // A fetch's abort signal belongs to that load, not to a later reading of the files.
  const { signal: _loadSignal, ...fetchOptions } = options.fetchOptions ?? {};
  const kept = Object.fromEntries(SOURCE_OPTIONS.filter((name) => options[name] !== undefined).map((name) => [name, name === 'fetchOptions' ? fetchOptions : options[name]]));
  Object.defineProperty(loaded, MODEL_SOURCE, { value: inMemory ? undefined : { model, options: kept } });
}

/**
 * `model` as a source of files: a loaded model (or a pipeline or `{ model }`: its model)
 * becomes the source it was loaded from, with the options that found it beneath `options`;
 * anything else is returned as it is. `purpose` names the caller in errors.
 */
export function filesSource(model, options, purpose) {
  const inner = model && (typeof model === 'function' || typeof model === 'object') ? model.model : undefined;
  const loaded = inner && typeof inner === 'object' && MODEL_SOURCE in inner ? inner : model;
  if (loaded && typeof loaded === 'object' && MODEL_SOURCE in loaded) {
    const source = loaded[MODEL_SOURCE];
    if (!source) throw new TypeError(`sesame-lm: ${purpose} reads a model's files, and this model was loaded from bytes in memory, which it does not keep (they would stay in memory as long as the model): give ${purpose} the files`);
    return { model: source.model, options: { ...source.options, ...options } };
  }
  if (loaded && typeof loaded === 'object' && 'info' in loaded && typeof loaded.dispose === 'function') {
    const what = loaded.info?.modelType === 'elmo' ? 'ELMo models (sesame train trains them natively)' : 'this loaded model: give its hub id, URL, folder or files';
    throw new TypeError(`sesame-lm: ${purpose} does not train ${what}`);
  }
  return { model, options };
}

/** Deletes every cached model file. */
export async function clearCache() {
  if (typeof caches !== 'undefined') await caches.delete(CACHE_NAME);
}
