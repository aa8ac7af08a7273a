#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tokenizer parity at scale: build/kvtok (C) against the reference (Hugging Face tokenizers 0.22
# through npm @anush008/tokenizers, tests/js/ref_tokenize.mjs) for each model family, on the
# generated corpus (tests/js/gen_corpus.mjs with the family's own added tokens, every other line
# with add_special_tokens true). Prints one line per family: strings, mismatches, seconds.
# Usage: bash bench/tokenizer/parity.sh [FAMILY...]   (default: every models/<family>)
# Env: SCALE (corpus scale, default 4: ~11,500 strings a family), SEEDS (default "1").
set -uo pipefail
cd "$(dirname "$0")/../.."
families=("$@")
[ ${#families[@]} -gt 0 ] || families=($(ls models))
tmp=$(mktemp -d /tmp/kvs-tokparity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bad=0
printf '| family | seed | strings | with add_special_tokens | mismatches | seconds |\n|---|---:|---:|---:|---:|---:|\n'
for f in "${families[@]}"; do
	for seed in ${SEEDS:-1}; do
		t0=$(date +%s)
		node tests/js/gen_corpus.mjs --seed "$seed" --scale "${SCALE:-4}" --added "models/$f" --special \
			>"$tmp/corpus.jsonl" 2>/dev/null
		node tests/js/ref_tokenize.mjs --tokenizer "models/$f" "$tmp/corpus.jsonl" >"$tmp/ref.jsonl"
		build/kvtok --tokenizer "models/$f" <"$tmp/corpus.jsonl" >"$tmp/c.jsonl"
		n=$(wc -l <"$tmp/corpus.jsonl")
		ns=$(grep -c '"add_special_tokens":true' "$tmp/corpus.jsonl")
		miss=$(paste -d '\n' "$tmp/ref.jsonl" "$tmp/c.jsonl" | paste - - | awk -F'\t' '$1 != $2' | wc -l)
		[ "$(wc -l <"$tmp/c.jsonl")" -eq "$n" ] || miss="$miss (line counts differ)"
		[ "$miss" = 0 ] || bad=1
		printf '| %s | %s | %s | %s | %s | %s |\n' "$f" "$seed" "$n" "$ns" "$miss" "$(($(date +%s) - t0))"
		if [ "$miss" != 0 ]; then
			node tests/js/compare_ids.mjs "$tmp/corpus.jsonl" "$tmp/ref.jsonl" "$tmp/c.jsonl" "$f" | grep -v '^ok' | head -20
		fi
	done
done
exit $bad
