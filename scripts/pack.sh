#!/usr/bin/env bash
# `npm run pack [-- FOLDER]`: the npm package as a tarball, sesame-lm-<version>.tgz in FOLDER
# (default: the repository's folder), with the package's own README (js/README.md: install,
# pipelines, devices, threads, bundlers, Node.js, dtypes, fine-tuning) in place of this
# repository's, which is written for contributors. Builds dist/ first where it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f dist/index.js ] || bash scripts/build-web.sh
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -r package.json LICENSE-MIT LICENSE-APACHE dist "$stage"/
cp js/README.md "$stage"/README.md
npm pack "$stage" --pack-destination "${1:-.}"
