#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvbench against two kvsim workers on loopback: the workload's exact token counts and the
# warm-up left out of the counts (the workers' own token counters), a new connection per request
# unless --keep-alive, the JSON fields other scripts read, --runs medians, and both APIs.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
trap kvsim_stop EXIT
kvsim_start 2 --time-scale 20 || exit 1

total() { # metric: summed over both workers
	local u s=0 v
	for u in ${KVSIM_URLS//,/ }; do
		v=$(curl -s "$u/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {print $2}')
		s=$($PY -c "print(int($s + float('${v:-0}')))")
	done
	echo "$s"
}

q0=$(total vllm:prefix_cache_queries_total)
w0=$(total vllm:request_success_total)
c0=$(total kvsim_connections_total)
j=$(build/kvbench --url "$KVSIM_URLS" --spread round-robin --prefix-types 3 --concurrency 4 \
	--requests 20 --seed 5 --time-scale 20 --json --quiet)
ok $? "kvbench exits 0"
c1=$(total kvsim_connections_total) # its own scrape is one connection per worker
q1=$(total vllm:prefix_cache_queries_total)
w1=$(total vllm:request_success_total)
expect_eq "workers saw 20 measured + 3 warm-up requests" 23 $((w1 - w0))
expect_eq "every prompt is exactly 2032 + 339 tokens (workers' query counter)" $((23 * 2371)) $((q1 - q0))
expect_eq "a new connection per request (+1 scrape per worker)" 25 $((c1 - c0))
for f in hit_rate cached_token_ratio ttft_p50_ms ttft_p99_ms req_per_s workers_per_prefix errors requests; do
	$PY -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if isinstance(d[sys.argv[2]], (int, float)) else 1)' "$j" "$f"
	ok $? "JSON has a number $f"
done
expect_eq "20 requests counted" 20 "$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["requests"])' "$j")"
expect_eq "round-robin over 2 workers: each prefix on both" 2 \
	"$($PY -c 'import json,sys; print(round(json.loads(sys.argv[1])["workers_per_prefix"]))' "$j")"

c0=$(total kvsim_connections_total)
j=$(build/kvbench --url "${KVSIM_URLS%%,*}" --prefix-types 2 --concurrency 2 --requests 10 \
	--seed 5 --keep-alive --no-warmup --time-scale 20 --json --quiet --runs 3)
c1=$(total kvsim_connections_total)
[ $((c1 - c0)) -le 8 ]
ok $? "--keep-alive: 3 runs x 10 requests over at most 3 x 2 connections (+2 scrapes; got $((c1 - c0)))"
expect_eq "--runs 3: three runs reported" 3 "$($PY -c 'import json,sys; print(len(json.loads(sys.argv[1])["runs"]))' "$j")"

j=$(build/kvbench --url "$KVSIM_URLS" --api chat --prefix-types 2 --concurrency 2 --requests 8 \
	--seed 5 --time-scale 20 --json --quiet)
ok $? "--api chat runs"
expect_eq "chat: no errors" 0 "$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["errors"])' "$j")"
$PY -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["hit_rate"] > 0.5 else 1)' "$j"
ok $? "chat: the rendered template keeps the shared prefix cacheable"

# --prefix-seed: clients with other --seed share one prefix set (one worker, nothing evicted)
u0=${KVSIM_URLS%%,*}
build/kvbench --url "$u0" --prefix-types 2 --requests 6 --seed 11 --prefix-seed 42 --reset \
	--time-scale 20 --quiet >/dev/null
hr() { $PY -c 'import json,sys; print(json.loads(sys.argv[1])["hit_rate"])' "$1"; }
j=$(build/kvbench --url "$u0" --prefix-types 2 --requests 6 --seed 12 --prefix-seed 42 \
	--no-warmup --time-scale 20 --json --quiet)
expect_eq "another --seed, the same --prefix-seed: every request hits the prefixes already cached" \
	1 "$(hr "$j")"
j=$(build/kvbench --url "$u0" --prefix-types 2 --requests 6 --seed 13 --no-warmup \
	--time-scale 20 --json --quiet)
$PY -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["hit_rate"] < 1 and d["prefix_seed"] == 13 else 1)' "$j"
ok $? "without --prefix-seed the prefixes come from --seed (new ones: the first of each misses)"

expect_eq "completions: no shared opening (a hit is any cached token)" 0 \
	"$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["opening_tokens"])' "$j")"

# A chat template that opens every conversation alike (Llama 3.2's dated system header): the
# opening's blocks are cached for everyone, so a hit needs more than them. Fresh cache, no
# warm-up, one client: the first request of each prefix type finds only the opening.
kvsim_stop
KVSIM_TOKENIZER=models/llama3_2 kvsim_start 1 --time-scale 20 \
	--model meta-llama/Llama-3.2-1B-Instruct || exit 1
j=$(build/kvbench --url "$KVSIM_URLS" --api chat --tokenizer models/llama3_2 \
	--model meta-llama/Llama-3.2-1B-Instruct --prefix-types 3 --concurrency 1 --requests 12 \
	--seed 3 --no-warmup --reset --time-scale 20 --json --quiet)
ok $? "chat with Llama 3.2's template runs"
$PY - "$j" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
o = d["opening_tokens"]
print("# opening", o, "hit_rate", d["hit_rate"], "any_cached_rate", d["any_cached_rate"])
# the header is ~30 tokens: at least one full block, counted in whole blocks
assert o >= 16 and o % 16 == 0, o
# every request after the first finds the opening; the first of each type (<= 3) is not a hit
assert d["any_cached_rate"] > d["hit_rate"] >= 0.5, d
assert d["errors"] == 0
PYEOF
ok $? "Llama 3.2 chat: the shared opening is whole blocks and alone is not a hit"

build/kvbench --url http://127.0.0.1:1 --prefix-types 2 --requests 3 --no-warmup --quiet >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "connection refused: counted as errors, exit status 1"
build/kvbench --url ftp://x --prefix-types 2 >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "a bad URL is a usage error"
tap_done
