// The package's type declarations (dist/index.d.ts, type-checked by `tsc -p tests/types`)
// name exactly what the module exports: a function or class added without its types, or a
// declaration of one that is gone, fails here.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as sesame from '../../dist/index.js';

test('index.d.ts declares every value the module exports, and no other', () => {
  const declarations = readFileSync(new URL('../../dist/index.d.ts', import.meta.url), 'utf8');
  const declared = [...declarations.matchAll(/^export (?:async )?(?:function|class|const) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual([...new Set(declared)].sort(), Object.keys(sesame).sort());
});
