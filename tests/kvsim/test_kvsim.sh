#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsim end to end on loopback: its KV events decoded by an independent decoder (python3-zmq,
# python3-msgpack) in both encodings, replay, reset, the debug endpoint, the OpenAI API through the
# official `openai` npm client, vLLM-like errors, and metrics consistent with cached_tokens.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
trap kvsim_stop EXIT

[ -x build/kvsim ] || { echo "not ok - build/kvsim missing"; exit 1; }

ids=$(seq 1000 1100 | paste -sd, | sed 's/^/[/; s/$/]/') # 101 tokens: 6 full blocks

# 1. array form, int hashes, fixed hash seed, replay socket.
kvsim_start 1 --events-endpoint "tcp://127.0.0.1:*" --replay-endpoint "tcp://127.0.0.1:*" \
	--topic kv-events --events-format array --int-block-hashes 1 --hash-seed 7 --time-scale 20 ||
	exit 1
url=$KVSIM_URLS
$PY tests/kvsim/kvevents_check.py sub "$KVSIM_EVENTS" kv-events array 1 "$url" "$ids"
$PY tests/kvsim/kvevents_check.py replay "$KVSIM_REPLAYS" 1

# Same hash seed, same prompt: same engine hashes; another seed: different ones.
h1=$(curl -s "$url/debug/cache" | $PY -c 'import json,sys; print(json.load(sys.stdin)["root_hash_hex"])')
kvsim_stop

# 2. map form, raw 32-byte hashes, random per-process seed, empty topic.
kvsim_start 2 --events-endpoint "tcp://127.0.0.1:*" --events-format map --int-block-hashes 0 \
	--time-scale 20 || exit 1
url=${KVSIM_URLS%%,*}
url2=${KVSIM_URLS##*,}
$PY tests/kvsim/kvevents_check.py sub "${KVSIM_EVENTS%%,*}" "" map 0 "$url" "$ids"
r1=$(curl -s "$url/debug/cache" | $PY -c 'import json,sys; print(json.load(sys.stdin)["root_hash_hex"])')
r2=$(curl -s "$url2/debug/cache" | $PY -c 'import json,sys; print(json.load(sys.stdin)["root_hash_hex"])')
[ -n "$r1" ] && [ "$r1" != "$r2" ] && [ "$r1" != "$h1" ]
ok $? "without --hash-seed every process gets its own hash seed"

# 3. the openai npm client (SSE parsing, usage, errors).
(cd tests/js && node kvsim_openai.mjs "$url")

# 4. HTTP-level behaviour.
hdr=$(curl -s -D - -o /dev/null "$url/health")
[[ "$hdr" == *"x-kvsim-worker: w0"* ]]
ok $? "x-kvsim-worker header on every response"
code=$(curl -s -o /tmp/kvsim-t.$$ -w '%{http_code}' "$url/v1/completions" -d '{"prompt": 5}')
[ "$code" = 400 ] && grep -q '"type":"BadRequestError"' /tmp/kvsim-t.$$
ok $? "a non-string, non-array prompt is a vLLM-like 400"
code=$(curl -s -o /tmp/kvsim-t.$$ -w '%{http_code}' "$url/v1/completions" -d '{"prompt": "x"')
[ "$code" = 400 ]
ok $? "a truncated JSON body is a 400"
code=$(curl -s -o /tmp/kvsim-t.$$ -w '%{http_code}' "$url/v1/completions" -d '{"prompt": [999999999]}')
[ "$code" = 400 ]
ok $? "a token id outside the vocabulary is a 400"
code=$(curl -s -o /tmp/kvsim-t.$$ -w '%{http_code}' "$url/v1/completions" -d '{"prompt": [1,2,3], "max_tokens": 4094}')
[ "$code" = 400 ] && grep -q "maximum context length is 4096 tokens" /tmp/kvsim-t.$$
ok $? "prompt + max_tokens over --max-model-len is refused like vLLM"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/nope")
[ "$code" = 404 ]
ok $? "unknown path: 404"
printf 'GARBAGE\r\n\r\n' | timeout 5 $PY -c '
import socket,sys
u=sys.argv[1].split(":"); s=socket.create_connection((u[1][2:],int(u[2])))
s.sendall(sys.stdin.buffer.read()); d=s.recv(4096); print(d.split(b"\r\n")[0].decode())' "$url" |
	grep -q "HTTP/1.1 400"
ok $? "bytes that are not HTTP get a 400, and the worker lives on"
curl -sf "$url/health" >/dev/null
ok $? "still healthy after bad input"

# 5. keep-alive: two requests on one connection, the second hits.
out=$(curl -s "$url/v1/completions" -d "{\"prompt\": $ids, \"max_tokens\": 2}" \
	--next "$url/v1/completions" -d "{\"prompt\": $ids, \"max_tokens\": 2}")
n=$(grep -o '"cached_tokens":[0-9]*' <<<"$out" | tail -1 | cut -d: -f2)
[ "$n" = 96 ]
ok $? "keep-alive: second request on the same connection hits 96 tokens (got $n)"

# 6. metrics agree with the responses' cached_tokens.
m=$(curl -s "$url2/metrics")
q0=$(awk '/^vllm:prefix_cache_queries_total/ {print $2}' <<<"$m")
h0=$(awk '/^vllm:prefix_cache_hits_total/ {print $2}' <<<"$m")
r=$(curl -s "$url2/v1/completions" -d "{\"prompt\": $ids, \"max_tokens\": 2}")
r=$(curl -s "$url2/v1/completions" -d "{\"prompt\": $ids, \"max_tokens\": 2}")
m=$(curl -s "$url2/metrics")
q1=$(awk '/^vllm:prefix_cache_queries_total/ {print $2}' <<<"$m")
h1=$(awk '/^vllm:prefix_cache_hits_total/ {print $2}' <<<"$m")
expect_eq "metrics: queries grow by 2 x 101 prompt tokens" 202 "$(awk "BEGIN{print $q1-$q0}")"
expect_eq "metrics: hits grow by the second request's 96 cached tokens" 96 "$(awk "BEGIN{print $h1-$h0}")"
for g in vllm:num_requests_running vllm:num_requests_waiting vllm:kv_cache_usage_perc; do
	grep -q "^$g{" <<<"$m"
	ok $? "metrics expose $g"
done

kvsim_stop

# 7. streams reset all at once (a crashed proxy in front): each closed cleanly, kvsim lives on. The
# storm orders one wake-up as the engine's timer first and the resets after it, where a token
# written to a reset connection closes it while its own event is still to be handled.
kvsim_start 1 --time-scale 1 || exit 1
out=$($PY tests/kvsim/reset_storm.py "$KVSIM_URLS" "${KVSIM_PIDS[0]}" 32 4)
expect_eq "128 streams reset in 4 storms: kvsim still answers" "ok 128" "$out"
kvs_pid=${KVSIM_PIDS[0]}
kill -0 "$kvs_pid" 2>/dev/null
ok $? "and its process runs (pid $kvs_pid)"

# 8. LoRA adapters (--lora-modules) and cache_salt: the keys vLLM hashes, in its events (map form:
# extra_keys; array form: lora_name only) and in the hits they give.
for fmt in map array; do
	kvsim_start 1 --events-endpoint "tcp://127.0.0.1:*" --events-format $fmt --time-scale 50 \
		--enable-lora --lora-modules "sql-lora=/adapters/sql other" || exit 1
	$PY tests/kvsim/kvevents_check.py keys "$KVSIM_EVENTS" $fmt "$KVSIM_URLS" sql-lora
	kvsim_stop
done
build/kvsim --lora-modules a --lora-modules a --tokenizer models/qwen3/tokenizer.json \
	>/dev/null 2>&1
[ $? -eq 2 ]
ok $? "an adapter named twice is refused, as vLLM refuses one already loaded"

# 9. refusal at start-up like vLLM: max_model_len larger than the KV cache.
build/kvsim --port 0 --num-blocks 10 --max-model-len 4096 --tokenizer models/qwen3/tokenizer.json \
	>/dev/null 2>&1
[ $? -eq 2 ]
ok $? "max-model-len over the KV capacity refuses to start"
rm -f /tmp/kvsim-t.$$
tap_done
