#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A short, time-scaled kvsim calibration check (the full one is bench/calibrate.sh): 6 kvsim
# workers on loopback, the seeds' workload through kvbench's per-connection random spread, C=8.
# Bounds are generous (one short run each) but would catch a broken cache model: P=2 can only miss
# once per (worker, prefix) pair (>= 95%), P=12 sits near 3.95/12 = 33%, cached-token and
# metrics-based ratios must agree, hits must be faster than misses, and Dynamo's cost (approximate
# mode) must beat random at P=12 as in the seeds (0.480 vs 0.247 cached-token ratio), and with
# the overlap taken from kvsim's KV events (through userspace/kv/events + index) reach the seeds'
# "KV routing" range.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
trap kvsim_stop EXIT
TS=${TS:-10}
KVSIM_WITH_EVENTS=1 kvsim_start 6 --time-scale "$TS" || exit 1

run() { # spread P [kvbench flags]
	local sp=$1 p=$2
	shift 2
	build/kvbench --url "$KVSIM_URLS" --spread "$sp" --prefix-types "$p" --concurrency 8 --seed 2 \
		--metrics-urls "$KVSIM_URLS" --reset --time-scale "$TS" --json --quiet "$@"
}
field() { $PY -c 'import json,sys; d=json.loads(sys.argv[1]); v=d[sys.argv[2]]; print(v if v is not None else "nan")' "$1" "$2"; }
within() { $PY -c 'import sys; v=float(sys.argv[1]); sys.exit(0 if float(sys.argv[2]) <= v <= float(sys.argv[3]) else 1)' "$@"; }

j2=$(run random 2)
j12=$(run random 12)
d12=$(run dynamo 12)
k12=$(run dynamo 12 --events "$KVSIM_EVENTS")
for j in "$j2" "$j12" "$d12" "$k12"; do
	expect_eq "no errors" 0 "$(field "$j" errors)"
	d=$($PY -c 'import json,sys; d=json.loads(sys.argv[1]); print(abs(d["cached_token_ratio"]-d["metrics_hit_ratio"]))' "$j")
	within "$d" 0 0.002
	ok $? "cached_tokens-based and metrics-based ratios agree (|diff| = $d)"
done
h=$(field "$j2" hit_rate)
within "$h" 0.95 1.0
ok $? "P=2: hit rate $h >= 0.95 (at most 10 first-encounter misses in 200)"
h=$(field "$j12" hit_rate)
within "$h" 0.22 0.45
ok $? "P=12: hit rate $h near 3.95/12 (seeds 0.321)"
c=$(field "$j2" cached_token_ratio)
within "$c" 0.80 0.86
ok $? "P=2: cached-token ratio $c (seeds 0.814; max 2032/2371 = 0.857)"
w=$(field "$j12" workers_per_prefix)
within "$w" 5.5 6.0
ok $? "P=12 random: each prefix spread over ~6 workers ($w)"
hp=$(field "$j12" ttft_hit_p50_ms)
mp=$(field "$j12" ttft_miss_p50_ms)
within "$hp" 0 "$mp"
ok $? "hits are faster than misses (TTFT p50 $hp < $mp ms, model time)"
dh=$(field "$d12" cached_token_ratio)
rh=$(field "$j12" cached_token_ratio)
$PY -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) + 0.1 else 1)' "$dh" "$rh"
ok $? "dynamo cost beats random at P=12 (cached ratio $dh vs $rh)"
kh=$(field "$k12" hit_rate)
within "$kh" 0.55 0.85
ok $? "dynamo cost with KV events at P=12: hit rate $kh (seeds: 0.679)"
tap_done
