#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Chat-template parity: seeded conversations (multi-turn with reasoning, tool messages, list
# content, unicode, other roles, enable_thinking true/false/absent, add_generation_prompt false,
# plus requests that must be refused) rendered by userspace/chat.c (through the sanitizer build of
# tests/unit/test_chat --render) and by two references running models/qwen3/tokenizer_config.json's
# chat_template with vLLM's request handling: tests/js/ref_chat.mjs (@huggingface/jinja) and
# tests/e2e/ref_chat.py (Python jinja2, configured as transformers configures it, i.e. what vLLM
# runs). Compared as strings; all three must agree. CHAT_SEED / CHAT_COUNT change the corpus.
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
ok $? "chat.c and the reference agree on every case"
tap_done
