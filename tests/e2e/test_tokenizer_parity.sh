#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tokenizer parity: build/kvtok (C) against the reference (Hugging Face tokenizers 0.22 through
# npm @anush008/tokenizers) on the generated corpus (tests/js/gen_corpus.mjs: >= 2,000 strings in
# 16 categories) for Qwen3, and on a short corpus (~170 strings, every other one with
# add_special_tokens true, the family's own added tokens mixed in) for other families.
# Expected ids are generated here, at test time, by the reference itself. The long run (>= 10,000
# strings a family) is bench/tokenizer/parity.sh.
# Env: TOK_SEEDS="1 2" to run more Qwen3 corpora (default: seed 1), KVTOK_TOKENIZER to use another
# file, TOK_FAMILIES to choose the families of the short corpora (default: one a pipeline kind
# beside Qwen3's: deepseek_v3 gemma3 llama2 llama3_2 mistral_nemo; the suite's time is short. Every
# family, qwen2_5 qwen3 gptoss too: TOK_FAMILIES="$(ls models)").
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

tokjson=${KVTOK_TOKENIZER:-models/qwen3/tokenizer.json}
tmp=$(mktemp -d /tmp/kvs-tokparity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$tokjson" ] || [ ! -x build/kvtok ]; then
	ok 1 "tokenizer file ($tokjson) and build/kvtok present (run make deps && make)"
	exit 1
fi

for seed in ${TOK_SEEDS:-1}; do
	node tests/js/gen_corpus.mjs --seed "$seed" >"$tmp/corpus.jsonl" 2>"$tmp/gen.log"
	n=$(wc -l <"$tmp/corpus.jsonl")
	[ "$n" -ge 2000 ]
	ok $? "corpus seed $seed has $n >= 2000 strings"
	node tests/js/ref_tokenize.mjs --tokenizer "$tokjson" "$tmp/corpus.jsonl" >"$tmp/ref.jsonl"
	ok $? "reference tokenized corpus seed $seed"
	build/kvtok --tokenizer "$tokjson" <"$tmp/corpus.jsonl" >"$tmp/c.jsonl"
	ok $? "kvtok tokenized corpus seed $seed with no line in error"
	node tests/js/compare_ids.mjs "$tmp/corpus.jsonl" "$tmp/ref.jsonl" "$tmp/c.jsonl" "seed $seed"
	TAP_FAILED=$((TAP_FAILED + $?))
done

# Every family, short: a directory (tokenizer.json + tokenizer_config.json), add_special_tokens
# both ways; the last two lines check BOS where vLLM's tokenizer puts one (DeepSeek V3's comes from
# its tokenizer_config.json).
declare -A bos=([llama3_2]=128000 [gemma3]=2 [llama2]=1 [mistral_nemo]=1 [deepseek_v3]=0 [qwen3]=none
	[qwen2_5]=none [gptoss]=none)
for f in ${TOK_FAMILIES:-deepseek_v3 gemma3 llama2 llama3_2 mistral_nemo}; do
	node tests/js/gen_corpus.mjs --seed 7 --scale 0.05 --added "models/$f" --special \
		>"$tmp/short.jsonl" 2>/dev/null
	printf '%s\n' '{"cat":"bos","text":"hi","add_special_tokens":true}' '{"cat":"bos","text":"hi"}' \
		>>"$tmp/short.jsonl"
	node tests/js/ref_tokenize.mjs --tokenizer "models/$f" "$tmp/short.jsonl" >"$tmp/short.ref"
	ok $? "$f: reference tokenized the short corpus"
	build/kvtok --tokenizer "models/$f" <"$tmp/short.jsonl" >"$tmp/short.c"
	ok $? "$f: kvtok tokenized the short corpus with no line in error"
	node tests/js/compare_ids.mjs "$tmp/short.jsonl" "$tmp/short.ref" "$tmp/short.c" "$f" |
		grep -v '^ok' | sed 's/^# /#   /'
	cmp -s "$tmp/short.ref" "$tmp/short.c"
	ok $? "$f: $(wc -l <"$tmp/short.jsonl") strings give the reference's ids"
	want=${bos[$f]:-}
	[ -n "$want" ] || continue
	got=$(tail -n 2 "$tmp/short.c" | head -n 1 | sed -E 's/^\{"ids":\[([0-9]+).*/\1/')
	nob=$(tail -n 1 "$tmp/short.c" | sed -E 's/^\{"ids":\[([0-9]+).*/\1/')
	if [ "$want" = none ]; then [ "$got" = "$nob" ]; else [ "$got" = "$want" ] && [ "$nob" != "$want" ]; fi
	ok $? "$f: add_special_tokens puts ${want/none/no BOS} first (got $got; without: $nob)"
done

# kvtok's line handling: order kept, errors as lines, a {"messages": ...} line is not guessed at.
printf '%s\n' '{"text":"a"}' 'not json' '{"text":1}' '{"text":"b\u0000c"}' '' '{"text":""}' >"$tmp/lines.jsonl"
build/kvtok --tokenizer "$tokjson" <"$tmp/lines.jsonl" >"$tmp/lines.out" 2>"$tmp/lines.err"
rc=$?
expect_eq "kvtok exits 1 when a line is in error" 1 "$rc"
expect_eq "kvtok writes one line per non-empty input line" 5 "$(wc -l <"$tmp/lines.out")"
node tests/js/ref_tokenize.mjs --tokenizer "$tokjson" <<<'{"text":"b\u0000c"}' >"$tmp/nul.ref"
expect_eq "text after an escaped U+0000 is kept" "$(cat "$tmp/nul.ref")" "$(sed -n 4p "$tmp/lines.out")"
expect_eq "empty text gives no ids" '{"ids":[]}' "$(sed -n 5p "$tmp/lines.out")"
grep -q '"error"' <(sed -n 2p "$tmp/lines.out")
ok $? "invalid JSON line answered with an error line"

# A tokenizer.json whose pipeline is not implemented is refused, naming the part.
node -e '
const fs = require("fs");
const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
j.normalizer = { type: "NFKC" };
fs.writeFileSync(process.argv[2], JSON.stringify(j));
' "$tokjson" "$tmp/nfkc.json"
out=$(build/kvtok --tokenizer "$tmp/nfkc.json" </dev/null 2>&1)
rc=$?
[ "$rc" -ne 0 ] && [[ "$out" == *"normalizer"*"NFKC"* ]]
ok $? "a NFKC tokenizer.json is refused at load naming the normalizer ($out)"

# kvtok --bench, plain and through a new piece cache each encode: the same ids
node bench/tokenizer/prompt.mjs >"$tmp/prompt.txt"
for fam in gemma3 deepseek_v3; do
	[ -d "models/$fam" ] || continue
	a=$(build/kvtok --tokenizer "models/$fam" --bench "$tmp/prompt.txt" --runs 3 | grep -o '"ids":[0-9]*')
	b=$(build/kvtok --tokenizer "models/$fam" --bench "$tmp/prompt.txt" --runs 3 --cache |
		grep -o '"ids":[0-9]*')
	[ -n "$a" ] && [ "$a" = "$b" ]
	ok $? "$fam: kvtok --bench --cache encodes as many ids as without ($a, $b)"
done
tap_done
