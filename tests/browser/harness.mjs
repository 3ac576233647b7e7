// Shared by the browser tests: the demo server on a free port and headless Debian Chromium
// with WebGPU (SwiftShader where there is no GPU), driven by playwright-core.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { serve } from '../../scripts/serve.mjs';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const artifacts = path.join(root, 'test-artifacts');
mkdirSync(artifacts, { recursive: true });

const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/**
 * Starts the server and the browser; returns {base, browser, close()}. `mounts` and `headers` go to serve()
 * (default: the demo site).
 */
export async function start({ mounts, headers } = {}) {
  const server = await serve(0, mounts, { headers });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS, headless: true });
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    browser,
    async close() {
      await browser.close();
      server.close();
    },
  };
}

/**
 * Failed loads that are expected: loading a sharded fixture probes its (absent)
 * model.safetensors first, as a folder's loader must, and the browser logs the 404.
 */
const EXPECTED_404 = [/\/GPT2LMHeadModel-sharded\/model\.safetensors$/];

/**
 * A new page of `browser` (or of a browser context) that fails the test on any console error
 * or uncaught exception: returns the page and a function that throws if any were seen.
 */
export async function newPage(browser, url) {
  const page = await browser.newPage();
  const errors = [];
  const expected = (m) => m.text().includes('404') && EXPECTED_404.some((re) => re.test(m.location().url ?? ''));
  page.on('console', (m) => { if (m.type() === 'error' && !expected(m)) errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  if (url) await page.goto(url);
  const checkErrors = () => {
    if (errors.length) throw new Error(`console errors on ${url}:\n${errors.join('\n')}`);
  };
  return { page, checkErrors, errors };
}
