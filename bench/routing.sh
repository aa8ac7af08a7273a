#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/routing.sh: the routing comparison behind docs/benchmarks.md, through the eBPF path of the
# node testbed (tests/node/demo.sh), each comparison in one run on the same seeded requests:
#   1. 6 workers, the seeds' points at C=8 and every P at C=16 (hit rate, cached-token ratio,
#      TTFT p50/p99, req/s, workers per prefix) for the plain Service, kvsplice round-robin,
#      dynamo and kv, and the client-side Dynamo anchor;
#   2. Zipf(1.1) popularity over 48 prefixes, C=8;
#   3. 3 workers, P=24, C=8 (the capacity-bound case);
#   c16 (not in the default parts): every P at C=16 again, medians of ROUTING_RUNS (here 5 unless
#      set) runs per cell, for the throughput comparison, where one run's scatter (~0.5%) is as
#      large as the differences between policies.
# Not part of `make test` (about 15 minutes at time scale 4). Results: bench/out/routing/<part>/
# (report.md and the raw JSON of each variant). Env: ROUTING_TIME_SCALE (4), ROUTING_RUNS (1),
# ROUTING_PARTS ("main zipf w3"), ROUTING_SEEDS ("1": kvbench's seed; with several, each part runs
# once per seed into bench/out/routing/<part>-s<seed>/, since which prefixes collide in a full
# cache depends on the request order far more than on timing).
set -euo pipefail
cd "$(dirname "$0")/.."
ts=${ROUTING_TIME_SCALE:-4}
runs=${ROUTING_RUNS:-1}
out=bench/out/routing
mkdir -p "$out"
for part in ${ROUTING_PARTS:-main zipf w3}; do
	case $part in
	main) env=(DEMO_POINTS="2:8 7:8 12:8 24:8 2:16 7:16 12:16 24:16") ;;
	zipf) env=(DEMO_POINTS="48:8" DEMO_KVBENCH_ARGS="--popularity zipf:1.1") ;;
	w3) env=(DEMO_POINTS="24:8" DEMO_WORKERS=3) ;;
	c16) env=(DEMO_POINTS="2:16 7:16 12:16 24:16" DEMO_RUNS="${ROUTING_RUNS:-5}") ;;
	*) echo "routing.sh: unknown part $part (main, zipf, w3, c16)" >&2; exit 2 ;;
	esac
	seeds=${ROUTING_SEEDS:-1}
	for seed in $seeds; do
		dir=$out/$part
		[ "$(wc -w <<<"$seeds")" -gt 1 ] && dir=$out/$part-s$seed
		echo "== routing: $part, seed $seed" >&2
		env DEMO_RUNS="$runs" "${env[@]}" DEMO_TIME_SCALE="$ts" DEMO_SEED="$seed" DEMO_OUT="$dir" \
			KVS_TESTBED_ID="routing-$part" bash tests/node/demo.sh >/dev/null
		echo "### $part, seed $seed"
		cat "$dir/report.md"
		echo
	done
done
