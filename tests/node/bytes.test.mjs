// Large files stay in pieces (js/bytes.js): a download or a local file over 64 MiB is kept as
// pieces of about 64 MiB, in order, never joined into one buffer.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ByteCollector, PIECE_BYTES, byteLength, joined, readLocalFile } from '../../dist/bytes.js';

/** `length` bytes of a pattern that shows any misplaced byte. */
function pattern(length) {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 7 + (i >> 16)) & 0xff;
  return bytes;
}

test('a stream over 64 MiB is gathered into pieces, in order', () => {
  const data = pattern(2 * PIECE_BYTES + 12345);
  const collected = new ByteCollector();
  // Chunks of odd sizes, as a network stream gives them.
  for (let at = 0, i = 0; at < data.length; i++) {
    const size = [65536, 1000003, 17][i % 3];
    collected.push(data.subarray(at, at + size));
    at += size;
  }
  const bytes = collected.finish();
  assert.ok(Array.isArray(bytes) && bytes.length >= 2, `${bytes.length} pieces`);
  assert.ok(bytes.slice(0, -1).every((piece) => piece.length >= PIECE_BYTES && piece.length < PIECE_BYTES + 1000003));
  assert.equal(byteLength(bytes), data.length);
  assert.deepEqual(joined(bytes), data);

  const small = new ByteCollector();
  small.push(new Uint8Array([1, 2]));
  small.push(new Uint8Array([3]));
  assert.deepEqual(small.finish(), new Uint8Array([1, 2, 3]));
  assert.deepEqual(new ByteCollector().finish(), new Uint8Array(0));
});

test('a local file over 64 MiB is read in pieces', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sesame-bytes-'));
  try {
    const data = pattern(PIECE_BYTES + 4321);
    writeFileSync(path.join(dir, 'big'), data);
    const bytes = await readLocalFile(path.join(dir, 'big'));
    assert.deepEqual(bytes.map((piece) => piece.length), [PIECE_BYTES, 4321]);
    assert.deepEqual(joined(bytes), data);
    writeFileSync(path.join(dir, 'small'), 'config');
    assert.equal(new TextDecoder().decode(await readLocalFile(path.join(dir, 'small'))), 'config');
  } finally {
    rmSync(dir, { recursive: true });
  }
});
