#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvbench --trace against kvsim workers on loopback, with tests/kvsim/traces/small.jsonl: 30 rows
# (and one blank line) 2 s apart in trace time, crafted by hand at 16 tokens per hash id (one id
# = one 16-token KV block when full):
#   rows 1-10 (lines 1-10): [1,2,3] 48 tokens, [100,101] 32, [1,2,3,4,5] 75 (48 cached),
#     [10,11] 22 (16 + 6), [10,11,12] 48 (16: id 11 was cut to 6 tokens), [20,21] 32,
#     [20,21] 32 (16: at most prompt - 1), [30,31] 17 (input 513: the last block rounds to 0
#     and keeps 1 token), [30,31,32] 33 (16), [40,41,42] input 100: 33 (clamped: more ids than
#     its length fills)
#   rows 11-20 (lines 11-15, 17-21): [1,2,50,51] 64 (32), [1..5] 80 (64), [1..5] 80 (64),
#     [1..6] 96 (80), [100,101] 32 (16), [100,101,102] 48 (32), [200..211] 192 (line 18),
#     [200..212] 193 (192), [300] 16, [300] 16 (0: 15 tokens at most, no whole block)
#   rows 21-30 (lines 22-31): [300,301,302] 48 (16), [1,60] 32 (16), [10,11,12] 48 (32),
#     [20,21] 25 (16), [400..403] 64, [400..403] 64 (48), [400,500] 32 (16), [1,2,3] 48 (32,
#     output 800 -> 25 tokens), [600] 8, [600] 16 (0: 8 shared tokens, no whole block)
# 1574 prompt tokens, 752 of them cached with an infinite cache, 18 rows hit; max_tokens sum to
# 81. Each row finishes before the next shares its blocks, so on one worker that never evicts
# the cached tokens are exactly the ideal ones.
# KVSIM_BIN and KVBENCH_BIN (build/kvsim, build/kvbench) may be set.
set -u
cd "$(dirname "$0")/../.." || exit 1
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
source tests/lib/jsonq.sh
PY=/usr/bin/python3
KVBENCH=${KVBENCH_BIN:-build/kvbench}
TRACE=tests/kvsim/traces/small.jsonl
trap kvsim_stop EXIT
kvsim_start 2 --time-scale 10 --num-blocks 20000 || exit 1
W0=${KVSIM_URLS%%,*}

metric() { # URL METRIC: its value (summed over label sets)
	curl -s "$1/metrics" | awk -v m="$2" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%d\n", s}'
}
total() { # METRIC: summed over both workers
	local u s=0
	for u in ${KVSIM_URLS//,/ }; do s=$((s + $(metric "$u" "$1"))); done
	echo "$s"
}

# --- refused before anything is sent -----------------------------------------------------------
r0=$(($(total vllm:request_success_total) + $(total kvsim_errors_total)))
c0=$(total kvsim_connections_total)
out=$("$KVBENCH" --url "$KVSIM_URLS" --trace "$TRACE" --trace-block-tokens 16 --reset \
	--max-prompt-tokens 150 --quiet 2>&1)
rc=$?
expect_eq "--max-prompt-tokens 150: exit status 2" 2 "$rc"
[[ "$out" == *"line 18: a prompt of 192 tokens"*"above --max-prompt-tokens 150"* ]]
ok $? "the message names the first prompt over the limit and its line ($out)"
bad=$(mktemp /tmp/test_trace.XXXXXX)
head -3 "$TRACE" >"$bad"
echo '{"timestamp": 1000, "input_length": 5, "output_length": 1, "hash_ids": [1], ' >>"$bad"
out=$("$KVBENCH" --url "$KVSIM_URLS" --trace "$bad" --reset --quiet 2>&1)
rc=$?
rm -f "$bad"
expect_eq "a bad line: exit status 2" 2 "$rc"
[[ "$out" == *": line 4: bad JSON"* ]]
ok $? "the message names the bad line ($out)"
c1=$(total kvsim_connections_total)
r1=$(($(total vllm:request_success_total) + $(total kvsim_errors_total)))
expect_eq "refused traces: no request reached a worker" 0 $((r1 - r0))
# (the two connections are this script's own scrape for c1, one per worker)
expect_eq "refused traces: no connection at all (no reset, no metrics)" 2 $((c1 - c0))

# --- one worker: exact tokens, the ideal ratio reached, open-loop timing ------------------------
q0=$(metric "$W0" vllm:prefix_cache_queries_total)
g0=$(metric "$W0" vllm:generation_tokens_total)
t0=$(date +%s.%N)
j=$("$KVBENCH" --url "$W0" --trace "$TRACE" --trace-block-tokens 16 --trace-speedup 4 \
	--time-scale 10 --reset --json --quiet)
ok $? "1 URL: kvbench --trace exits 0" || exit 1
t1=$(date +%s.%N)
q1=$(metric "$W0" vllm:prefix_cache_queries_total)
g1=$(metric "$W0" vllm:generation_tokens_total)
for f in requests errors hit_rate cached_token_ratio ideal_cached_ratio ttft_p50_ms ttft_p99_ms \
	e2e_p50_ms e2e_p99_ms send_lag_p50_ms send_lag_p99_ms send_lag_max_ms req_per_s \
	offered_req_per_s worker_max_mean usage_prompt_tokens usage_cached_tokens trace_prompt_tokens \
	ideal_cached_tokens metrics_hit_ratio trace_span_s wall_s; do
	$PY -c 'import json,sys; d=json.loads(sys.argv[1]); v=d[sys.argv[2]]
sys.exit(0 if isinstance(v, (int, float)) and not isinstance(v, bool) else 1)' "$j" "$f"
	ok $? "JSON has a number $f"
done
expect_eq "30 requests" 30 "$(field "$j" requests)"
expect_eq "no errors" 0 "$(field "$j" errors)"
expect_eq "the scaled prompts: 1574 tokens (hand-computed)" 1574 "$(field "$j" trace_prompt_tokens)"
expect_eq "the worker's own query counter saw exactly those tokens" 1574 $((q1 - q0))
expect_eq "every answer's usage.prompt_tokens is the length sent" 0 "$(field "$j" prompt_mismatches)"
expect_eq "usage.prompt_tokens summed" 1574 "$(field "$j" usage_prompt_tokens)"
expect_eq "max_tokens: 27 x 2 + 1 + 1 + 25 = 81 generated" 81 $((g1 - g0))
expect_eq "ideal: 752 cached tokens (hand-computed)" 752 "$(field "$j" ideal_cached_tokens)"
near "$(field "$j" ideal_cached_ratio)" "$($PY -c 'print(752/1574)')" 1e-12
ok $? "ideal ratio 752/1574"
expect_eq "ideal hit rate 18/30" 0.6 "$(field "$j" ideal_hit_rate)"
expect_eq "one worker that never evicts: cached tokens equal the ideal" 752 \
	"$(field "$j" usage_cached_tokens)"
expect_eq "cached ratio equals the ideal ratio exactly" "$(field "$j" ideal_cached_ratio)" \
	"$(field "$j" cached_token_ratio)"
expect_eq "the worker's prefix-cache metrics agree" "$(field "$j" ideal_cached_ratio)" \
	"$(field "$j" metrics_hit_ratio)"
expect_eq "18 of 30 requests hit" 0.6 "$(field "$j" hit_rate)"
expect_eq "one row clamped (input 100 over 3 ids)" 1 "$(field "$j" trace_clamped_rows)"
expect_eq "all 30 on w0" 30 "$(field "$j" requests_per_worker.w0)"
expect_eq "max/mean over one worker" 1 "$(field "$j" worker_max_mean)"
expect_eq "span: 56 s of trace / speedup 4 = 14 s model time" 14 "$(field "$j" trace_span_s)"
near "$(field "$j" offered_req_per_s)" "$($PY -c 'print(29/14)')" 1e-9
ok $? "offered rate 29 / 14 s"
# 56 s / time scale 10 / speedup 4 = 1.4 s of schedule, then the last answer (a few ms).
near "$(field "$j" wall_s)" 1.45 0.3
ok $? "open loop: the run takes the schedule's 1.4 s (got $(field "$j" wall_s) s)"
near "$t1" "$t0" 3
ok $? "the whole command (tokenizer load included) in under 3 s"
near "$(field "$j" send_lag_p50_ms)" 0 2
ok $? "send lag p50 under 2 ms (got $(field "$j" send_lag_p50_ms))"
near "$(field "$j" send_lag_max_ms)" 0 40
ok $? "send lag max under 40 ms (got $(field "$j" send_lag_max_ms))"

# --- two workers, rows overlapping: still on schedule; round-robin spreads evenly ---------------
# Speedup 40: a row every 5 ms of wall time, while the 25-token answer takes ~30 ms. A closed
# loop would fall behind; an open loop sends every row on time.
j=$("$KVBENCH" --url "$KVSIM_URLS" --spread round-robin --trace "$TRACE" --trace-block-tokens 16 \
	--trace-speedup 40 --time-scale 10 --reset --json --quiet)
ok $? "2 URLs round-robin, speedup 40: exits 0"
expect_eq "30 requests, no errors" "30 0" "$(field "$j" requests) $(field "$j" errors)"
expect_eq "15 requests on each worker" "15 15" \
	"$(field "$j" requests_per_worker.w0) $(field "$j" requests_per_worker.w1)"
expect_eq "max/mean 1" 1 "$(field "$j" worker_max_mean)"
near "$(field "$j" send_lag_max_ms)" 0 40
ok $? "overlapping rows: send lag max under 40 ms (got $(field "$j" send_lag_max_ms))"
near "$(field "$j" wall_s)" 0.2 0.25
ok $? "the run takes the 0.14 s schedule plus the last answers (got $(field "$j" wall_s) s)"
$PY -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["cached_token_ratio"] < d["ideal_cached_ratio"] else 1)' "$j"
ok $? "round-robin over 2 workers caches less than the ideal"

# --- a slice, a cap on max_tokens, a client-side policy -----------------------------------------
g0=$(total vllm:generation_tokens_total)
j=$("$KVBENCH" --url "$KVSIM_URLS" --spread kv --trace "$TRACE" --trace-block-tokens 16 \
	--trace-start 5 --trace-limit 10 --trace-max-output 1 --trace-speedup 8 --time-scale 10 \
	--json --quiet)
ok $? "--spread kv with --trace-start 5 --trace-limit 10: exits 0"
g1=$(total vllm:generation_tokens_total)
expect_eq "10 rows replayed" "10 10" "$(field "$j" trace_rows) $(field "$j" requests)"
expect_eq "rows 6-15: 32+32+17+33+33+64+80+80+96+32 tokens" "499 499" \
	"$(field "$j" trace_prompt_tokens) $(field "$j" usage_prompt_tokens)"
expect_eq "--trace-max-output 1: one token per request" 10 $((g1 - g0))

# --- three shards at once on one worker: together they are the whole trace ---------------------
# Shard K/3 keeps rows K, K+3, ... on the whole trace's clock, so the three clients together send
# every row at its own time: on one worker that never evicts they cache exactly the whole
# trace's ideal, and each reports that ideal beside its own. --trace-epoch puts the three on
# one clock (processes started apart, each loading its tokenizer, would each start their own).
curl -s -o /dev/null -X POST "$W0/reset_prefix_cache"
pids=""
epoch=$($PY -c 'import time; print("%.3f" % (time.time() + 3))')
for k in 1 2 3; do
	"$KVBENCH" --url "$W0" --trace "$TRACE" --trace-block-tokens 16 --trace-speedup 4 \
		--time-scale 10 --trace-epoch "$epoch" --trace-shard "$k/3" --json --quiet >"$bad.shard$k" &
	pids+=" $!"
done
wait $pids
sum() { local k s=0; for k in 1 2 3; do s=$((s + $(field "$(cat "$bad.shard$k")" "$1"))); done; echo "$s"; }
expect_eq "shards 1/3, 2/3, 3/3: 10 rows each, 0 errors" "10 10 10 0" \
	"$(for k in 1 2 3; do echo -n "$(field "$(cat "$bad.shard$k")" requests) "; done)$(sum errors)"
expect_eq "together: every prompt token of the trace (1574)" 1574 "$(sum trace_prompt_tokens)"
expect_eq "together on one worker: the whole trace's ideal, 752 cached tokens" 752 \
	"$(sum usage_cached_tokens)"
expect_eq "each names itself and the whole trace's ideal" "1/3 752 1574" \
	"$(field "$(cat "$bad.shard1")" trace_shard) $(field "$(cat "$bad.shard1")" trace_all_ideal_cached_tokens) $(field "$(cat "$bad.shard1")" trace_all_prompt_tokens)"
ok $(($(field "$(cat "$bad.shard2")" ideal_cached_tokens) < 752 ? 0 : 1)) \
	"a shard's own ideal is below the whole's ($(field "$(cat "$bad.shard2")" ideal_cached_tokens))"
# shard 2/3 starts at row 2: its first request goes 2 s of trace time after the trace's start
near "$(field "$(cat "$bad.shard3")" trace_span_s)" 14 0.01
ok $? "shard 3/3 runs on the whole trace's clock (span to its last row, row 30: 14 s)"
rm -f "$bad".shard*
for a in 0/3 4/3 3 1/0 1/2000 x/3; do
	"$KVBENCH" --url "$W0" --trace "$TRACE" --trace-shard "$a" --quiet >/dev/null 2>&1
	expect_eq "--trace-shard $a refused (exit 2)" 2 $?
done
"$KVBENCH" --url "$W0" --trace "$TRACE" --trace-epoch "$epoch" --runs 2 --quiet >/dev/null 2>&1
expect_eq "--trace-epoch with --runs 2 refused (exit 2)" 2 $?
out=$("$KVBENCH" --url "$W0" --workload sessions --trace-shard 1/3 --quiet 2>&1)
expect_eq "--trace-shard with --workload refused" "2" "$?"
[[ $out == *"--trace-shard are for --trace"* ]]
ok $? "... saying it is for --trace ($out)"
tap_done
