#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tokenizer's shipped Unicode tables against the reference (HF tokenizers 0.22) itself, on a
# sample of code points: every 64th, every class boundary, every letter that case-folds to ASCII,
# every code point NFC may change, and every canonical composition. The full run (all 1,112,063
# code points, ~10 min here) is `node tests/js/verify_unicode.mjs`; see tools/unicode/README.md.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
if [ ! -x build/kvunicode ] || [ ! -x build/kvtok ] || [ ! -f models/qwen3/tokenizer.json ]; then
	ok 1 "build/kvunicode, build/kvtok and models/qwen3/tokenizer.json present (make deps && make)"
	exit 1
fi
node tests/js/verify_unicode.mjs --sample 64
