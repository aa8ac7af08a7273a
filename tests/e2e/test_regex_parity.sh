#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Split-regex parity: userspace/prompt/regex (through build/bench/regex --split) against the
# reference (HF tokenizers 0.22 through npm @anush008/tokenizers: Oniguruma on Unicode 16) for the
# seven family patterns (Llama 3, Qwen2, DeepSeek V3 B1/B2/B3, gpt-oss, Mistral-Nemo, read from
# models/*/tokenizer.json), on the corpus of tests/js/gen_regex_corpus.mjs (the tokenizer corpus,
# Unicode 15/16 characters, every General_Category boundary, every prefix and suffix of tricky
# strings, contractions, white space runs). The suite runs a short corpus; the full one
# (>= 11,000 strings, every category boundary, about a minute):
#   REGEX_SCALE=1 REGEX_BOUNDARY_EVERY=1 REGEX_MAX_LEN=1e9 bash tests/e2e/test_regex_parity.sh
# Env: REGEX_SEEDS="1 2" for more corpora (default 1).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

tmp=$(mktemp -d /tmp/kvs-regexparity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x build/bench/regex ] || [ ! -f models/llama3_2/tokenizer.json ]; then
	ok 1 "build/bench/regex and models/*/tokenizer.json present (make deps && make)"
	exit 1
fi
scale=${REGEX_SCALE:-0.05}
every=${REGEX_BOUNDARY_EVERY:-24}
maxlen=${REGEX_MAX_LEN:-4000}
for seed in ${REGEX_SEEDS:-1}; do
	node tests/js/gen_regex_corpus.mjs --seed "$seed" --scale "$scale" --boundary-every "$every" --max-len "$maxlen" \
		>"$tmp/corpus.jsonl" 2>"$tmp/gen.log"
	ok $? "corpus seed $seed: $(cat "$tmp/gen.log")"
	node tests/js/regex_parity.mjs "$tmp/corpus.jsonl"
	TAP_FAILED=$((TAP_FAILED + $?))
done

# A search that fails (-E2BIG) is reported as such, never as a wrong split.
printf '%s\n' "$(printf 'a%.0s' $(seq 40) | xxd -p | tr -d '\n')" >"$tmp/exp.hex"
out=$(build/bench/regex --split --regex '(?:a|a)*b' <"$tmp/exp.hex")
rc=$?
expect_eq "exponential search: exit status 1" 1 "$rc"
expect_eq "exponential search: reported as error -7 (E2BIG)" "error -7" "$out"
out=$(build/bench/regex --split --regex 'a(?<=b)' </dev/null 2>&1)
[[ "$out" == *lookbehind* ]]
ok $? "an unsupported pattern is refused naming the construct ($out)"
tap_done
