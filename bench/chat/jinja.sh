#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Jinja interpreter (userspace/prompt/jinja) on each family's chat template, then against
# chat.c's hand-written Qwen3 renderer on the same requests.
# 1. Per family (models/*/tokenizer_config.json with a chat_template): four shapes (short,
#    10 KB of 8 turns, the same with a tool, one 100 KB message; bench/chat/jinja_vars.py),
#    rendered by build/bench/chat --jinja (the variables' JSON parse included) and tokenized by
#    userspace/prompt/tokenizer: median render µs, p90, median render+tokenize µs; each
#    rendering checked equal to Python's jinja2 (tests/e2e/ref_jinja.py).
# 2. Qwen3: the seeded corpus of tests/js/ref_chat.mjs --gen, rendered by chat.c from the
#    request (chat_render_json) and by the interpreter from the variables vLLM would hand the
#    template (jinja_vars.py vllm, i.e. tests/e2e/ref_chat.py's mapping): byte-equal count, and
#    the median over requests of each one's median µs.
# Prints the tables and writes JSON to build/bench/jinja.json (or $OUT).
# Usage: bash bench/chat/jinja.sh [RUNS] [QWEN3_COUNT]     (defaults 2000 and 300)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/bench/jinja.json}
runs=${1:-2000}
count=${2:-300}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
tmp=$(mktemp -d /tmp/kvs-jinjabench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"

for cfg in models/*/tokenizer_config.json; do
	fam=$(basename "$(dirname "$cfg")")
	"$py" -c 'import json,sys; sys.exit(0 if isinstance(json.load(open(sys.argv[1])).get("chat_template"), str) else 1)' "$cfg" || continue
	"$py" bench/chat/jinja_vars.py shapes "$cfg" >"$tmp/$fam.shapes.jsonl"
	"$py" -c 'import json,sys
for l in open(sys.argv[1]): print(json.dumps(json.loads(l)["vars"], ensure_ascii=False))' "$tmp/$fam.shapes.jsonl" >"$tmp/$fam.vars.jsonl"
	tokarg=()
	[ -f "models/$fam/tokenizer.json" ] && tokarg=(--tokenizer "models/$fam/tokenizer.json")
	build/bench/chat --jinja "$cfg" "$tmp/$fam.vars.jsonl" "$runs" "${tokarg[@]}" \
		--texts "$tmp/$fam.c_texts.jsonl" >"$tmp/$fam.times.jsonl"
	"$py" tests/e2e/ref_jinja.py --config "$cfg" <"$tmp/$fam.vars.jsonl" >"$tmp/$fam.py.jsonl"
done

mkdir -p "$tmp/q"
node tests/js/ref_chat.mjs --gen "$tmp/q" --seed 20260701 --count "$count" >/dev/null
build/tests/test_chat --render <"$tmp/q/requests.jsonl" >"$tmp/q/chat_c.jsonl"
"$py" bench/chat/jinja_vars.py vllm <"$tmp/q/requests.jsonl" >"$tmp/q/vars_all.jsonl"
build/tests/test_jinja --render --config models/qwen3/tokenizer_config.json \
	<"$tmp/q/vars_all.jsonl" >"$tmp/q/jinja_all.jsonl"
"$py" - "$tmp/q" <<'PYEOF'
import json, sys
d = sys.argv[1]
reqs = open(f"{d}/requests.jsonl", encoding="utf-8").read().split("\n")[:-1]
chat = [json.loads(l) for l in open(f"{d}/chat_c.jsonl", encoding="utf-8").read().split("\n")[:-1]]
vs = open(f"{d}/vars_all.jsonl", encoding="utf-8").read().split("\n")[:-1]
js = [json.loads(l) for l in open(f"{d}/jinja_all.jsonl", encoding="utf-8").read().split("\n")[:-1]]
refused = [j["why"] for ch, va, j in zip(chat, vs, js) if ch["status"] == "ok" and va != "null" and j["status"] != "ok"]
open(f"{d}/jinja_refused.txt", "w").write("\n".join(refused) + "\n")
with open(f"{d}/req_ok.jsonl", "w", encoding="utf-8") as r, open(f"{d}/vars_ok.jsonl", "w", encoding="utf-8") as v, \
        open(f"{d}/chat_ok.jsonl", "w", encoding="utf-8") as c:
    for q, ch, va, j in zip(reqs, chat, vs, js):
        if ch["status"] == "ok" and va != "null" and j["status"] == "ok":
            r.write(q + "\n"); v.write(va + "\n"); c.write(json.dumps(ch["text"], ensure_ascii=False) + "\n")
PYEOF
build/bench/chat "$tmp/q/req_ok.jsonl" "$((runs / 4))" >"$tmp/q/chat_times.jsonl"
build/bench/chat --jinja models/qwen3/tokenizer_config.json "$tmp/q/vars_ok.jsonl" "$((runs / 4))" \
	--texts "$tmp/q/jinja_texts.jsonl" >"$tmp/q/jinja_times.jsonl"

"$py" - "$tmp" "$out" "$count" <<'PYEOF'
import glob, json, os, statistics, sys
tmp, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
rd = lambda p: [json.loads(l) for l in open(p, encoding="utf-8").read().split("\n")[:-1]]
rows = []
print("Interpreter per family (median µs; render includes the variables' JSON parse)")
print(f"{'family':13} {'shape':26} {'vars B':>8} {'prompt B':>9} {'tokens':>7} {'render':>8} {'p90':>8} {'+tokenize':>10}  same as jinja2")
for f in sorted(glob.glob(f"{tmp}/*.times.jsonl")):
    fam = os.path.basename(f).split(".")[0]
    names = [json.loads(l)["name"] for l in open(f"{tmp}/{fam}.shapes.jsonl", encoding="utf-8")]
    c_texts = [json.loads(l) for l in open(f"{tmp}/{fam}.c_texts.jsonl", encoding="utf-8")]
    py = rd(f"{tmp}/{fam}.py.jsonl")
    for name, t, ct, p in zip(names, rd(f), c_texts, py):
        same = p["status"] == "ok" and p["text"] == ct
        rows.append(dict(family=fam, shape=name, same_as_jinja2=same, **t))
        print(f"{fam:13} {name:26} {t['vars_bytes']:8} {t['prompt_bytes']:9} {t['tokens']:7} {t['render_us']:8.1f} {t['p90_us']:8.1f} {t['render_tokenize_us']:10.1f}  {same}")
q = f"{tmp}/q"
chat_texts = [json.loads(l) for l in open(f"{q}/chat_ok.jsonl", encoding="utf-8")]
jinja_texts = [json.loads(l) for l in open(f"{q}/jinja_texts.jsonl", encoding="utf-8")]
equal = sum(a == b for a, b in zip(chat_texts, jinja_texts))
ct = rd(f"{q}/chat_times.jsonl"); jt = rd(f"{q}/jinja_times.jsonl")
c_med = statistics.median(t["parse_render_us"] for t in ct)
j_med = statistics.median(t["render_us"] for t in jt)
c_sum = sum(t["parse_render_us"] for t in ct); j_sum = sum(t["render_us"] for t in jt)
print()
refused = [l for l in open(f"{q}/jinja_refused.txt").read().split("\n") if l]
print(f"Qwen3: {len(chat_texts)} of {count} seeded requests rendered by both (chat.c refuses some; the interpreter "
      f"refuses {len(refused)} chat.c renders: {sorted(set(refused))[:3]})")
print(f"  byte-equal renderings, chat.c vs the interpreter: {equal} of {len(chat_texts)}")
print(f"  median over requests of the median µs: chat.c (request JSON -> text) {c_med:.2f}, interpreter (variables JSON -> text) {j_med:.2f}")
print(f"  sum over requests: chat.c {c_sum:.0f} µs, interpreter {j_sum:.0f} µs; {'chat.c' if c_sum < j_sum else 'the interpreter'} is faster by {max(c_sum, j_sum) / min(c_sum, j_sum):.2f}x")
json.dump({"families": rows, "qwen3": {"requests": len(chat_texts), "byte_equal": equal,
           "chat_c_median_us": c_med, "jinja_median_us": j_med, "chat_c_sum_us": c_sum,
           "jinja_sum_us": j_sum}}, open(out, "w"), indent=1)
print(f"wrote {out}")
PYEOF
