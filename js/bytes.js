// A model file's bytes: one Uint8Array, or — for a file over PIECE_BYTES — an array of
// Uint8Array pieces in order, so that a multi-gigabyte checkpoint never needs one ArrayBuffer
// (some browsers cap them at 2 GB) nor a second, concatenated copy. The core reads a weights
// file in pieces as it is (a tensor at a time); other files are small.

import { nodeModule } from './platform.js';

/** The size of a piece, and the largest file kept in one Uint8Array. */
export const PIECE_BYTES = 64 * 1024 * 1024;

/** The length of a file's bytes. */
export function byteLength(bytes) {
  return Array.isArray(bytes) ? bytes.reduce((n, piece) => n + piece.length, 0) : bytes.length;
}

/** A file's bytes as one Uint8Array (a copy, for a file in pieces). */
export function joined(bytes) {
  return Array.isArray(bytes) ? concat(bytes, byteLength(bytes)) : bytes;
}

/** Joins chunks into one Uint8Array of `length` bytes. */
function concat(chunks, length) {
  if (chunks.length === 1) return chunks[0];
  const whole = new Uint8Array(length);
  chunks.reduce((at, chunk) => { whole.set(chunk, at); return at + chunk.length; }, 0);
  return whole;
}

/** Gathers a stream's chunks into a file's bytes: one Uint8Array, or pieces of PIECE_BYTES or so. */
export class ByteCollector {
  #pieces = [];
  #pending = [];
  #pendingBytes = 0;
  length = 0;

  push(chunk) {
    this.#pending.push(chunk);
    this.#pendingBytes += chunk.length;
    this.length += chunk.length;
    if (this.#pendingBytes >= PIECE_BYTES) this.#flush();
  }

  #flush() {
    if (this.#pending.length) this.#pieces.push(concat(this.#pending, this.#pendingBytes));
    this.#pending = [];
    this.#pendingBytes = 0;
  }

  /** The bytes: one Uint8Array up to PIECE_BYTES, else the pieces. */
  finish() {
    this.#flush();
    if (this.#pieces.length <= 1) return this.#pieces[0] ?? new Uint8Array(0);
    return this.#pieces;
  }
}

/** Reads a local file (Node.js), in pieces when it is large. */
export async function readLocalFile(path) {
  const { open } = await nodeModule('node:fs/promises');
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    if (size <= PIECE_BYTES) return await handle.readFile();
    const pieces = [];
    for (let at = 0; at < size;) {
      const piece = new Uint8Array(Math.min(PIECE_BYTES, size - at));
      const { bytesRead } = await handle.read(piece, 0, piece.length, at);
      if (bytesRead === 0) break; // the file shrank while being read
      pieces.push(piece.subarray(0, bytesRead));
      at += bytesRead;
    }
    return pieces;
  } finally {
    await handle.close();
  }
}

/** Writes a file's bytes to a local file (Node.js), a piece at a time. */
export async function writeLocalFile(path, bytes) {
  const { open } = await nodeModule('node:fs/promises');
  const handle = await open(path, 'w');
  try {
    for (const piece of Array.isArray(bytes) ? bytes : [bytes]) await handle.write(piece);
  } finally {
    await handle.close();
  }
}
