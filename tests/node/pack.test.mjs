// The tarball `npm run pack` makes, as a user installs it: the package's own README (not the
// repository's), the licenses and the built package, and `import 'sesame-lm'` working from an
// app that installed it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');

test('npm run pack makes a tarball with the package README that an app installs and imports', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'sesame-pack-'));
  try {
    execFileSync('bash', [path.join(root, 'scripts/pack.sh'), work], { stdio: 'pipe' });
    const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    const tarball = path.join(work, `sesame-lm-${version}.tgz`);
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
    for (const file of ['README.md', 'LICENSE-MIT', 'LICENSE-APACHE', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/wasm/sesame_bg.wasm']) {
      assert.ok(files.includes(`package/${file}`), `${file} is packed: ${files.join(', ')}`);
    }
    const readme = execFileSync('tar', ['xzf', tarball, '-O', 'package/README.md'], { encoding: 'utf8' });
    assert.equal(readme, readFileSync(path.join(root, 'js/README.md'), 'utf8'));
    // An app installs the tarball (offline: the package has no dependencies) and imports it by name.
    const app = path.join(work, 'app');
    mkdirSync(app);
    writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: app, stdio: 'pipe' });
    const exported = execFileSync('node', ['--input-type=module', '-e', "const m = await import('sesame-lm'); console.log(typeof m.pipeline, typeof m.fineTune)"], { cwd: app, encoding: 'utf8' });
    assert.equal(exported.trim(), 'function function');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
