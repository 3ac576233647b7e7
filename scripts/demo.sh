#!/usr/bin/env bash
# The README's main command (`npm run demo`): set-up, the MiniLM download, the npm package
# build, then the demo site at http://localhost:8080 (PORT=… or --port N to change it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-models.sh || echo "!!! demo: MiniLM could not be downloaded; the similarity page will offer only random-weight models" >&2
bash scripts/build-web.sh
exec node scripts/serve.mjs "$@"
