#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Chat for every model family with a template (models/<family>/tokenizer_config.json): seeded
# requests (tests/js/ref_chat.mjs --gen: multi-turn, reasoning, tools and tool calls, list
# content, media parts, invalid shapes, kwargs) through build/kvtok's messages mode (prompt/chat.c:
# the Qwen3 renderer or the Jinja interpreter, then the C tokenizer) against the reference: Python
# jinja2 as transformers configures it for vLLM (tests/e2e/ref_chat.py, with the tokenizer's special
# tokens and vLLM's content format) tokenized by Hugging Face tokenizers. 0 wrong ids per family;
# what the reference fails (a template that raises, a request vLLM refuses) fails in C too.
# CHAT_SEED / CHAT_COUNT change the corpus (bench runs use thousands).
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

seed=${CHAT_SEED:-20261202}
count=${CHAT_COUNT:-150}
families=${CHAT_FAMILIES:-qwen3 qwen2_5 llama3_2 deepseek_v3 gemma3 mistral_nemo}
tmp=$(mktemp -d /tmp/kvs-chat-families.XXXXXX)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

if [ ! -x build/kvtok ]; then
	echo "not ok - build/kvtok missing (make)"
	exit 1
fi
check "generate $count seeded requests (seed $seed)" \
	node tests/js/ref_chat.mjs --gen "$tmp" --seed "$seed" --count "$count"
# compare FAMILY [TEMPLATE] [REQUESTS FLAG]: the requests (REQUESTS, else the generated ones)
# through the reference (jinja2 with the config's template, or TEMPLATE as vLLM's
# --chat-template, then HF tokenizers) and through kvtok, both given FLAG (a vLLM flag both take);
# the C side is checked against them (chat_family_check.py prints the TAP line).
compare() {
	local f=$1 tf=${2:-} reqs=${3:-$tmp/requests.jsonl} flag=${4:-} label=$1 tag=$1
	[ -n "$tf" ] && label="$f --chat-template $(basename "$tf")"
	[ -n "$flag" ] && label="$f $flag" && tag=$f${flag//[^a-z]/_}
	python3 tests/e2e/ref_chat.py $flag "models/$f/tokenizer_config.json" ${tf:+"$tf"} \
		--dump-vars "$tmp/v_$tag.jsonl" <"$reqs" >"$tmp/py_$tag.jsonl"
	# the reference itself, cross-checked: the same variables through @huggingface/jinja (the
	# config's templates; Llama 2's file compares "" != false as JavaScript does)
	if [ -z "$tf$flag" ]; then
		node tests/js/jinja_crosscheck.mjs "$f" "models/$f/tokenizer_config.json" \
			"$tmp/py_$f.jsonl" "$tmp/v_$f.jsonl"
		TAP_FAILED=$((TAP_FAILED + $?))
	fi
	python3 -c '
import json, sys
for l in open(sys.argv[1], encoding="utf-8"):
    p = json.loads(l)
    if p["status"] == "ok":
        print(json.dumps({"text": p["text"]}, ensure_ascii=False))' "$tmp/py_$tag.jsonl" >"$tmp/t_$tag.jsonl"
	node tests/js/ref_tokenize.mjs --tokenizer "models/$f/tokenizer.json" "$tmp/t_$tag.jsonl" \
		>"$tmp/r_$tag.jsonl"
	build/kvtok --tokenizer "models/$f" ${tf:+--chat-template "$tf"} $flag <"$reqs" \
		>"$tmp/c_$tag.jsonl" 2>/dev/null
	python3 tests/e2e/chat_family_check.py "$label" "$tmp/py_$tag.jsonl" "$tmp/r_$tag.jsonl" \
		"$tmp/c_$tag.jsonl"
	TAP_FAILED=$((TAP_FAILED + $?))
}
for f in $families; do
	if [ ! -f "models/$f/tokenizer_config.json" ]; then
		ok 1 "$f: models/$f is there (make deps)"
		continue
	fi
	compare "$f"
done

# vLLM's --chat-template FILE: the file replaces tokenizer_config.json's template. Llama 2's
# config has none (its users give one); Llama 3.2's is replaced; the CRLF copy is read as Python
# reads a text file (vLLM opens the file so), "\r\n" as "\n".
sed 's/$/\r/' tests/e2e/templates/llama2_chat.jinja >"$tmp/llama2_crlf.jinja"
for pair in llama2:tests/e2e/templates/llama2_chat.jinja llama3_2:tests/e2e/templates/llama2_chat.jinja \
	llama2:"$tmp/llama2_crlf.jinja"; do
	f=${pair%%:*} tf=${pair#*:}
	[ -f "models/$f/tokenizer_config.json" ] || continue
	compare "$f" "$tf"
	# the template's own output, not the config's: every rendered prompt has "[INST] "
	n_inst=$(grep -c '\[INST\] ' "$tmp/t_$f.jsonl")
	n_ok=$(wc -l <"$tmp/t_$f.jsonl")
	[ "$n_ok" -gt 0 ] && [ "$n_inst" = "$n_ok" ]
	ok $? "$f --chat-template: the file's template rendered ($n_inst of $n_ok prompts have [INST])"
done
# vLLM's --trust-request-chat-template: each request carries its own template (the families'
# templates in turn, Gemma 3's in the openai content format, and a few that do not compile),
# rendered in place of the model's, with the model's special tokens.
python3 - "$tmp/requests.jsonl" "$tmp/own.jsonl" models/*/tokenizer_config.json <<'PY'
import json, sys
src, dst, cfgs = sys.argv[1], sys.argv[2], sys.argv[3:]
tmpls = []
for c in cfgs:
    t = json.load(open(c, encoding="utf-8")).get("chat_template")
    if isinstance(t, str):
        tmpls.append(t)
tmpls += ["{% for m in messages %}{{ m.content }}", "{% filter upper %}x{% endfilter %}", 7]
with open(dst, "w", encoding="utf-8") as out:
    for i, line in enumerate(open(src, encoding="utf-8")):
        req = json.loads(line)
        if isinstance(req, dict):
            req["chat_template"] = tmpls[i % len(tmpls)]
        out.write(json.dumps(req, ensure_ascii=False) + "\n")
PY
for f in qwen3 llama3_2; do
	[ -f "models/$f/tokenizer_config.json" ] || continue
	compare "$f" "" "$tmp/own.jsonl" --trust-request-chat-template
	# equal ids are the requests' templates rendered (the model's would differ); most of what
	# the reference renders is rendered (not: the filter statement, refused at compile)
	n_c=$(grep -c '"ids"' "$tmp/c_${f}__trust_request_chat_template.jsonl")
	n_ref=$(wc -l <"$tmp/t_${f}__trust_request_chat_template.jsonl")
	n_filter=$(grep -c "the request's chat_template: unsupported" \
		"$tmp/c_${f}__trust_request_chat_template.jsonl")
	[ "$n_c" -gt $((n_ref * 2 / 3)) ] && [ "$n_filter" -gt 0 ]
	ok $? "$f --trust-request-chat-template: $n_c of the reference's $n_ref prompts rendered ($n_filter with a template the interpreter refuses)"
done
out=$(build/kvtok --tokenizer models/qwen3 <"$tmp/own.jsonl" 2>/dev/null | grep -c 'trust-request-chat-template is not set')
[ "$out" -gt $((count / 2)) ]
ok $? "without --trust-request-chat-template a request's template is vLLM's 400 ($out lines)"

out=$(printf '%s\n' '{"messages":[{"role":"user","content":"hi"}]}' |
	build/kvtok --tokenizer models/llama3_2 --chat-template /nonexistent/t.jinja 2>/dev/null)
[[ $out == '{"error":'*"cannot read the chat template"* ]]
ok $? "--chat-template that cannot be read: an error line ($out)"

# The models vLLM does not render through a template: an error line naming why, never ids.
for f in llama2 gptoss; do
	[ -f "models/$f/tokenizer.json" ] || continue
	out=$(printf '%s\n' '{"messages":[{"role":"user","content":"hi"}]}' | build/kvtok --tokenizer "models/$f" 2>/dev/null)
	[[ $out == '{"error":'*"no chat_template"* ]]
	ok $? "$f (no chat template in its tokenizer_config.json): an error line, not ids ($out)"
done
tap_done
