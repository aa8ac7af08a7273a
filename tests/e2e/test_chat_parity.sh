#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Chat-template parity: seeded conversations (multi-turn with reasoning, tool messages, list
# content, unicode, other roles, tools and tool calls with chosen number spellings,
# enable_thinking true/false/absent, add_generation_prompt false, plus requests that must be
# refused) rendered by userspace/prompt/chat.c (through the sanitizer build of
# tests/unit/test_chat --render) and by two references running models/qwen3/tokenizer_config.json's
# chat_template with vLLM's request handling: tests/js/ref_chat.mjs (@huggingface/jinja) and
# tests/e2e/ref_chat.py (Python jinja2, configured as transformers configures it, i.e. what vLLM
# runs). Compared as strings (all three must agree; tool definitions and tool-call arguments
# with Python's jinja2 only, as @huggingface/jinja's tojson is not json.dumps), then as token ids: build/kvtok's messages
# mode against the reference rendering tokenized by Hugging Face tokenizers. CHAT_SEED / CHAT_COUNT change the corpus.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

seed=${CHAT_SEED:-20260701}
count=${CHAT_COUNT:-300}
tmp=$(mktemp -d /tmp/kvs-chat-parity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

bin=build-asan/tests/test_chat
[ -x "$bin" ] || bin=build/tests/test_chat
if [ ! -x "$bin" ] || [ ! -f models/qwen3/tokenizer_config.json ]; then
	echo "not ok - chat parity: $bin or models/qwen3/tokenizer_config.json missing (make deps tests)"
	exit 1
fi

check "generate $count seeded cases (seed $seed)" \
	node tests/js/ref_chat.mjs --gen "$tmp" --seed "$seed" --count "$count"
check "reference renders every case" \
	bash -c 'node tests/js/ref_chat.mjs < "$1/requests.jsonl" > "$1/ref.jsonl"' _ "$tmp"
check "Python jinja2 (as vLLM renders, tests/e2e/ref_chat.py) renders every case" \
	bash -c 'python3 tests/e2e/ref_chat.py < "$1/requests.jsonl" > "$1/py.jsonl"' _ "$tmp"
check "chat.c renders every case ($bin)" \
	bash -c '"$2" --render < "$1/requests.jsonl" > "$1/c.jsonl"' _ "$tmp" "$bin"
node tests/js/ref_chat.mjs --check "$tmp"
ok $? "chat.c and the references agree on every case"

# Token ids: build/kvtok's {"messages": ...} mode (chat.c, then the C tokenizer) against the
# Python jinja2 rendering tokenized by Hugging Face tokenizers (tests/js/ref_tokenize.mjs).
tokjson=models/qwen3/tokenizer.json
if [ ! -x build/kvtok ]; then
	ok 1 "build/kvtok present (make)"
else
	node tests/js/ref_chat.mjs --ids-inputs "$tmp"
	check "kvtok renders and tokenizes every rendered case" \
		bash -c 'build/kvtok --tokenizer "$2" < "$1/ok_requests.jsonl" > "$1/c_ids.jsonl"' _ "$tmp" "$tokjson"
	check "the reference tokenizes every reference rendering" \
		bash -c 'node tests/js/ref_tokenize.mjs --tokenizer "$2" "$1/ok_texts.jsonl" > "$1/ref_ids.jsonl"' \
		_ "$tmp" "$tokjson"
	node tests/js/compare_ids.mjs "$tmp/ok_texts.jsonl" "$tmp/ref_ids.jsonl" "$tmp/c_ids.jsonl" \
		"chat ids, kvtok vs reference"
	TAP_FAILED=$((TAP_FAILED + $?))
	printf '%s\n' '{"messages":[{"role":"user","content":"hi"}],"continue_final_message":true}' |
		build/kvtok --tokenizer "$tokjson" > "$tmp/cfm.out" 2>/dev/null
	grep -q "\"error\":\"continue_final_message and add_generation_prompt are not compatible" "$tmp/cfm.out"
	ok $? "kvtok answers a request vLLM refuses (continue_final_message with add_generation_prompt) with an error line"
	mkdir "$tmp/other" && cp "$tokjson" "$tmp/other/" &&
		node -e 'const f = require("fs"), [src, dst] = process.argv.slice(1);
			const j = JSON.parse(f.readFileSync(src, "utf8"));
			j.chat_template += " ";
			f.writeFileSync(dst, JSON.stringify(j));' \
			models/qwen3/tokenizer_config.json "$tmp/other/tokenizer_config.json" &&
		printf '%s\n' '{"messages":[{"role":"user","content":"hi"}]}' |
		build/kvtok --tokenizer "$tmp/other/tokenizer.json" > "$tmp/other.out" 2>/dev/null
	printf '%s\n' '{"messages":[{"role":"user","content":"hi"}]}' |
		build/kvtok --tokenizer "$tokjson" > "$tmp/same.out" 2>/dev/null
	# another template (the Qwen3 one with a space after it) goes through the Jinja interpreter:
	# the same ids and then the space's
	python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["ids"]; b = json.load(open(sys.argv[2]))["ids"]
sys.exit(0 if b[:-1] == a and b[-1] == 220 else 1)' "$tmp/same.out" "$tmp/other.out"
	ok $? "a model with another chat template renders it through the interpreter ($(head -c 80 "$tmp/other.out"))"
fi
tap_done
