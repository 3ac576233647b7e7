// Hugging Face hub ids: `org/name` (or `name`) is the folder
// {endpoint}/{id}/resolve/{revision}/ — endpoint from the hubUrl option, else (in Node.js)
// HF_ENDPOINT as huggingface_hub reads it, else the public hub. The hub's answers become
// errors a user can act on: a missing or private repository, a missing revision or file.

import { isNode } from './platform.js';

export const PUBLIC_HUB = 'https://huggingface.co';

/** Each part: a letter or digit, then letters, digits, `-`, `_` and `.` (not `..`). */
const HUB_ID = /^[A-Za-z0-9][\w.-]*(\/[A-Za-z0-9][\w.-]*)?$/;

/** Whether `model` reads as a hub id (a folder URL starts with `/`, `./`, a scheme, or ends with `/`). */
export function isHubId(model) {
  return typeof model === 'string' && HUB_ID.test(model) && !model.includes('..');
}

const env = (name) => (isNode ? process.env[name] || undefined : undefined);

/** Where `id`'s files are: {base (the folder URL), revision}. */
export function hubFolder(id, options) {
  const endpoint = String(options.hubUrl ?? env('HF_ENDPOINT') ?? PUBLIC_HUB).replace(/\/+$/, '');
  const revision = options.revision ?? 'main';
  if (typeof revision !== 'string' || !revision) throw new TypeError('sesame-lm: revision must be a branch, tag or commit name');
  return { base: `${endpoint}/${id}/resolve/${encodeURIComponent(revision)}/`, revision };
}

/** fetch options with the hub token (the hubToken option, else HF_TOKEN in Node.js), if any. */
export function hubFetchOptions(options) {
  const token = options.hubToken ?? env('HF_TOKEN');
  if (!token) return options.fetchOptions;
  const headers = new Headers(options.fetchOptions?.headers);
  headers.set('authorization', `Bearer ${token}`);
  return { ...options.fetchOptions, headers };
}

/**
 * What a failed answer for `file` of hub model `id` means: undefined when the file is
 * optional and the repository simply lacks it, else the Error to throw.
 */
export function hubFailure(id, revision, file, response, optional) {
  const code = response.headers.get('x-error-code');
  const status = `HTTP ${response.status}`;
  if (code === 'RepoNotFound' || response.status === 401) {
    const notLocal = isNode ? ', and there is no local folder of that name' : '';
    return new Error(`sesame-lm: the hub has no model "${id}" that can be read (${status})${notLocal}: check the id; a private model needs a token (hubToken, or HF_TOKEN in Node.js)`);
  }
  if (code === 'RevisionNotFound') return new Error(`sesame-lm: the model "${id}" on the hub has no revision "${revision}" (${status})`);
  if (code === 'GatedRepo' || response.status === 403) return new Error(`sesame-lm: the model "${id}" on the hub is gated or forbidden to this token (${status}): accept its terms on the hub, or use a token that may read it`);
  if (response.status === 404) return optional ? undefined : new Error(`sesame-lm: the model "${id}" on the hub has no ${file} (revision "${revision}")`);
  return new Error(`sesame-lm: fetching ${file} of "${id}" from the hub failed: ${status} ${response.statusText}`);
}
