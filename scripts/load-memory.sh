#!/usr/bin/env bash
# The memory peak of loading a model natively: the maximum resident set size of `sesame
# forward` (the load and one 4-token forward pass) on the host device and on lavapipe, for each
# model folder given; with none, a random bert-base (110M parameters, 418 MB of f32) that
# transformers saves under target/load-memory/, once whole and once in 100 MB shards.
#   scripts/load-memory.sh [MODEL_DIR ...]
# Prints a Markdown table (BENCHMARKS.md, "Loading memory").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin sesame >&2
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
    out=target/load-memory
    if [ ! -f "$out/bert-base-sharded/model.safetensors.index.json" ]; then
        OUT="$out" python3 - <<'PY' >&2
import os
import torch
import transformers
torch.manual_seed(0)
model = transformers.BertModel(transformers.BertConfig(architectures=["BertModel"])).eval()
model.save_pretrained(os.path.join(os.environ["OUT"], "bert-base-single"), max_shard_size="10GB")
model.save_pretrained(os.path.join(os.environ["OUT"], "bert-base-sharded"), max_shard_size="100MB")
PY
    fi
    dirs=("$out/bert-base-single" "$out/bert-base-sharded")
fi
measure=$(mktemp)
outputs=$(mktemp --suffix=.safetensors)
ids=$(mktemp --suffix=.json)
trap 'rm -f "$measure" "$outputs" "$ids"' EXIT
echo '{"input_ids": [[101, 7592, 2088, 102]]}' > "$ids"
echo "| model | weights | device | peak RSS | seconds |"
echo "|---|---|---|---|---|"
for dir in "${dirs[@]}"; do
    weights=$(cat "$dir"/*.safetensors | wc -c)
    for adapter in host llvmpipe; do
        /usr/bin/time -o "$measure" -f "%M %e" target/release/sesame forward --adapter "$adapter" --model "$dir" \
            --ids "$ids" --out "$outputs" > /dev/null
        read -r kilobytes seconds < "$measure"
        echo "| $(basename "$dir") | $((weights / 1000000)) MB | $adapter | $((kilobytes / 1000)) MB | $seconds |"
    done
done
