#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Split-regex benchmark: every family's Split pattern (userspace/prompt/regex) over the 10 KB mixed
# prompt of bench/tokenizer/prompt.mjs, all matches as the reference iterates them; also DeepSeek
# V3's chain of three Splits and tokenizer.c's hand-written Qwen2 split on the same text. Prints
# the table and writes it as JSON to build/bench/regex.json (or $OUT).
# Usage: bash bench/regex/run.sh [RUNS]     (default 3000; needs make deps && make)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/bench/regex.json}
runs=${1:-3000}
tmp=$(mktemp -d /tmp/kvs-regexbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
node bench/tokenizer/prompt.mjs >"$tmp/prompt.txt"
build/bench/regex --bench "$tmp/prompt.txt" --runs "$runs" --json "$out"
echo "json: $out"
