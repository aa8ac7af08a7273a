#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --chat-template FILE through the real daemon (no BPF, loopback), as vLLM's flag: Llama 2's
# tokenizer_config.json has no chat template, so its workers run with one (kvsim here, given the
# same file). With the file, kvsplice renders and tokenizes the chat exactly (its prompt length is
# the worker's, and the second request's predicted cache is what the worker reports); without it,
# the chat is a counted fallback; a file that cannot be read, or a NAME no --model-tokenizer names,
# stops the daemon at start with a message. --trust-request-chat-template the same way, with the
# template sent in the request.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
dir=$(mktemp -d /tmp/kvs-chattmpl.XXXXXX)
kvs_pid=""
stop_kvs() {
	[ -n "$kvs_pid" ] && kill "$kvs_pid" 2>/dev/null && wait "$kvs_pid" 2>/dev/null
	kvs_pid=""
}
cleanup() {
	stop_kvs
	kvsim_stop
	rm -rf "$dir"
}
trap cleanup EXIT

if [ ! -f models/llama2/tokenizer.json ]; then
	ok 1 "models/llama2 is there (make deps)"
	tap_done
fi
tmpl=tests/e2e/templates/llama2_chat.jinja
model=meta-llama/Llama-2-7b-chat-hf
KVSIM_LOGDIR=$dir KVSIM_WITH_EVENTS=1 KVSIM_TOKENIZER=models/llama2 kvsim_start 1 \
	--num-blocks 256 --max-model-len 2048 --time-scale 50 --model "$model" \
	--chat-template "$tmpl" || { echo "not ok - kvsim"; exit 1; }
ep="{\"name\":\"w0\",\"ip\":\"127.0.0.1\",\"port\":${KVSIM_URLS##*:},\"events_port\":${KVSIM_EVENTS##*:},\"replay_port\":${KVSIM_REPLAYS##*:}}"
echo "{\"services\":[{\"name\":\"l2\",\"cluster_ip\":\"10.96.0.61\",\"port\":8000,\"endpoints\":[$ep]}]}" \
	>"$dir/services.json"

start_kvs() { # extra flags...
	rm -f "$dir/ports"
	"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 \
		--admin 127.0.0.1:0 --port-file "$dir/ports" --events --tokenizer models/llama2 \
		"$@" 2>"$dir/kvsplice.log" &
	kvs_pid=$!
	for _ in $(seq 200); do [ -s "$dir/ports" ] && break; sleep 0.05; done
	read -r lport aport <"$dir/ports" 2>/dev/null
	[ -n "${aport:-}" ]
}

check() { # expect: exact | fallback [TEMPLATE: sent as the request's own chat_template]
	timeout 60 $PY - "$lport" "$aport" "$model" "$@" <<'PYEOF'
import json, sys, time, urllib.error, urllib.request

lport, aport, model, expect = sys.argv[1:5]
failed = 0


def ok(cond, what):
    global failed
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    failed += not cond


def get(path):
    return urllib.request.urlopen("http://127.0.0.1:%s%s" % (aport, path), timeout=10).read()


own = open(sys.argv[5]).read() if len(sys.argv) > 5 else None


def chat(msgs):
    body = {"model": model, "messages": msgs, "max_tokens": 2}
    if own is not None:
        body["chat_template"] = own  # the request's own (--trust-request-chat-template)
    req = urllib.request.Request("http://127.0.0.1:%s/v1/chat/completions" % lport,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, json.loads(r.read())["usage"]


system = "You are a careful assistant. " * 40
msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Name a prime."}]
st, u = chat(msgs)
r = json.loads(get("/debug/route"))["routes"][0]
if expect == "exact":
    ok(st == 200 and r["fallback"] is None and r["prompt_tokens"] == u["prompt_tokens"],
       "rendered with %s: %s prompt tokens, as the worker (%s), no fallback (%s)"
       % ("the request's own template" if own else "the file's template", r["prompt_tokens"],
          u["prompt_tokens"], r["fallback"]))
    time.sleep(0.4)  # the worker's KV events reach the index
    msgs2 = msgs[:1] + [{"role": "user", "content": "Name another prime."}]
    st, u = chat(msgs2)
    r = json.loads(get("/debug/route"))["routes"][0]
    cached = u.get("prompt_tokens_details", {}).get("cached_tokens")
    ok(st == 200 and r["fallback"] is None and cached and
       r["predicted_cached_tokens"] == cached,
       "the shared system prompt: %s cached tokens predicted, the worker reports %s"
       % (r["predicted_cached_tokens"], cached))
else:
    m = get("/metrics").decode()
    n = [l for l in m.splitlines()
         if l.startswith("kvsplice_route_fallbacks_total{") and not l.endswith(" 0")]
    ok(st == 200 and r["fallback"] is not None and n,
       "without %s: the worker answers, kvsplice routes it as a counted fallback (%s; %s)"
       % ("--trust-request-chat-template" if own else "--chat-template", r["fallback"], n))
sys.exit(1 if failed else 0)
PYEOF
	TAP_FAILED=$((TAP_FAILED + $?))
}

start_kvs --chat-template "$tmpl"
ok $? "kvsplice --chat-template $tmpl started" && check exact
stop_kvs
start_kvs
ok $? "kvsplice without --chat-template started" && check fallback
stop_kvs

# --trust-request-chat-template: workers (kvsim here) that render a request's own template, and
# kvsplice given the same flag renders it too (Qwen3's tokenizer, a template of the test's own sent
# in the request); without the flag kvsplice counts the request as vLLM's 400 would be (`invalid`).
kvsim_stop
KVSIM_LOGDIR=$dir KVSIM_WITH_EVENTS=1 kvsim_start 1 --num-blocks 256 --max-model-len 2048 \
	--time-scale 50 --model "$model" --trust-request-chat-template ||
	{ echo "not ok - kvsim --trust-request-chat-template"; exit 1; }
ep="{\"name\":\"w0\",\"ip\":\"127.0.0.1\",\"port\":${KVSIM_URLS##*:},\"events_port\":${KVSIM_EVENTS##*:},\"replay_port\":${KVSIM_REPLAYS##*:}}"
echo "{\"services\":[{\"name\":\"l2\",\"cluster_ip\":\"10.96.0.61\",\"port\":8000,\"endpoints\":[$ep]}]}" \
	>"$dir/services.json"
own=$dir/own.jinja
printf '%s' '{% for m in messages %}<|im_start|>{{ m.role }} says:{{ "\n" }}{{ m.content }}<|im_end|>{{ "\n" }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant{{ "\n" }}{% endif %}' >"$own"
start_kvs --tokenizer models/qwen3 --trust-request-chat-template
ok $? "kvsplice --trust-request-chat-template started" && check exact "$own"
stop_kvs
start_kvs --tokenizer models/qwen3
ok $? "kvsplice without --trust-request-chat-template started" && check fallback "$own"
stop_kvs

"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 \
	--admin 127.0.0.1:0 --tokenizer models/llama2 --chat-template /nonexistent/t.jinja \
	>/dev/null 2>"$dir/err1"
rc=$?
[ $rc = 2 ] && grep -q "chat template /nonexistent/t.jinja" "$dir/err1"
ok $? "an unreadable --chat-template stops the start: exit $rc, $(head -c 200 "$dir/err1")"
"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 \
	--admin 127.0.0.1:0 --tokenizer models/llama2 --chat-template "other/model=$tmpl" \
	>/dev/null 2>"$dir/err2"
rc=$?
[ $rc = 2 ] && grep -q "no --model-tokenizer names this model" "$dir/err2"
ok $? "--chat-template NAME=FILE for an unknown NAME stops the start: exit $rc, $(head -c 200 "$dir/err2")"
tap_done
