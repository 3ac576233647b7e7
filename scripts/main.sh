#!/usr/bin/env bash
# The README's main command, until the demo site lands: builds the CLI, prints the adapter,
# and runs the kernel benchmark (one JSON line per kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --locked --bin sesame
./target/release/sesame info
./target/release/sesame bench kernels "$@"
