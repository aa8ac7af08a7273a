#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/trace.sh: a production-style trace (Mooncake format) replayed through the eBPF path of
# the node testbed (docs/benchmarks.md#trace): 6 kvsim workers behind the Service, one node, the
# trace open-loop from the client pod (kvbench --trace), for the plain Service and kvsplice's
# round-robin, dynamo and kv, each beside the trace's own ideal reuse (an infinite cache on one
# worker). Per variant: cached-token ratio, request hits, TTFT p50/p99, end-to-end p99, requests
# per worker (max/mean), send lag, and the workers' utilisation (kvsim_busy_seconds_total: the
# share of model time they spent running steps). Not part of `make test`.
# Env: TRACE (bench/traces/mooncake_synthetic_trace.jsonl), TRACE_B (32: tokens per hash id),
#      TRACE_BLOCKS (9360: KV blocks per worker; the seeds had 585: then TRACE_B=16, so that
#      the longest prompt fits the max_model_len such a cache allows), TRACE_LIMITS ("1200 0":
#      rows replayed, 0 = all), TRACE_SPEEDUP (the schedule runs this much faster), TRACE_TS (4:
#      the workers' time scale), TRACE_VARIANTS ("service round-robin dynamo kv"),
#      TRACE_OUT (bench/out/trace).
#      TRACE_WORKLOAD (sessions | agent): kvbench's generated conversations instead of the
#      trace file (TRACE_LIMITS then only names the run), with TRACE_WORKLOAD_ARGS (extra
#      kvbench flags: --conversations, --convo-rate, --turns, ...).
#      TRACE_KVSIM_ARGS: more kvsim flags, e.g. "--profile h200-qwen3-8b" (the workers as H200s);
#      TRACE_KVSPLICE_ARGS: more kvsplice flags (every kvsplice variant), e.g. "--kv-balance-slack 0".
set -euo pipefail
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-benchtrace}
source "$(dirname "$0")/../tests/node/lib.sh"
cd "$KVS_ROOT"
trace=${TRACE:-bench/traces/mooncake_synthetic_trace.jsonl}
B=${TRACE_B:-32}
blocks=${TRACE_BLOCKS:-9360}
ts=${TRACE_TS:-4}
speedup=${TRACE_SPEEDUP:-8}
out=${TRACE_OUT:-bench/out/trace}
[ "$(id -u)" -eq 0 ] || { echo "trace.sh: needs root" >&2; exit 1; }
mkdir -p "$out"
trap 'tests/node/down.sh >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

# vLLM refuses a max_model_len its cache cannot hold: at the seeds' 585 blocks, use TRACE_B=16
mml=$(((blocks - 1) * 16 < 32768 ? (blocks - 1) * 16 : 32768))
KVS_WORKER=kvsim KVS_TIME_SCALE=$ts KVS_KVSIM_ARGS="--num-blocks $blocks --max-model-len $mml ${TRACE_KVSIM_ARGS:-}" \
	tests/node/up.sh --workers 6 --no-kvsplice >&2
pods=""
for i in $(seq 6); do pods+="${pods:+,}http://$(worker_ip "$i"):$SVC_PORT"; done

# busy: the workers' kvsim_busy_seconds_total, summed
busy() {
	local i s=0 v
	for i in $(seq 6); do
		v=$(kvs_in "$NS_NODE" curl -s "http://$(worker_ip "$i"):$SVC_PORT/metrics" |
			awk '$1 == "kvsim_busy_seconds_total" { print $2 }')
		s=$(python3 -c "print($s + ${v:-0})")
	done
	echo "$s"
}

for limit in ${TRACE_LIMITS:-1200 0}; do
	for v in ${TRACE_VARIANTS:-service round-robin dynamo kv}; do
		tag=$v-$limit
		echo "== trace, ${limit/#0/all} rows: $v" >&2
		[ "$v" = service ] || KVSPLICE_ARGS="--router $v --scrape-interval $((250 / ts))ms ${TRACE_KVSPLICE_ARGS:-}" \
			kvs_start_kvsplice
		b0=$(busy)
		t0=$(date +%s.%N)
		if [ -n "${TRACE_WORKLOAD:-}" ]; then
			# shellcheck disable=SC2086
			src=(--workload "$TRACE_WORKLOAD" --convo-max-tokens $((mml - 2048))
				${TRACE_WORKLOAD_ARGS:-})
		else
			src=(--trace "$trace" --trace-limit "$limit")
		fi
		tests/node/client.sh build/kvbench --url "http://$SVC_IP:$SVC_PORT" "${src[@]}" \
			--trace-block-tokens "$B" --trace-speedup "$speedup" \
			--time-scale "$ts" --metrics-urls "$pods" --reset --max-prompt-tokens $((mml - 512)) \
			--label "$tag" --json --quiet >"$out/$tag.json" || true
		t1=$(date +%s.%N)
		b1=$(busy)
		python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
d['utilisation'] = ($b1 - $b0) / (6 * ($t1 - $t0) * $ts); json.dump(d, open(sys.argv[1], 'w'))" \
			"$out/$tag.json"
		[ "$v" = service ] || kvs_stop_kvsplice || true
	done
done

python3 - "$out" "$blocks" "$B" "$speedup" ${TRACE_LIMITS:-1200 0} <<'EOF' | tee "$out/trace.md"
import json, os, sys
out, blocks, B, speedup, limits = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
variants = ["service", "round-robin", "dynamo", "kv"]
print("%s KV blocks per worker, %s tokens per hash id, schedule x%s" % (blocks, B, speedup))
for limit in limits:
    rows = [(v, json.load(open(os.path.join(out, "%s-%s.json" % (v, limit)))))
            for v in variants if os.path.exists(os.path.join(out, "%s-%s.json" % (v, limit)))]
    if not rows:
        continue
    ideal = rows[0][1].get("ideal_cached_ratio", rows[0][1].get("trace_ideal_ratio"))
    print("\n%s rows; the trace's ideal cached-token ratio %.3f\n" % (
        "all" if limit == "0" else limit, ideal or 0))
    print("| variant | cached-token ratio | of the ideal | request hits | TTFT p50/p99 ms | "
          "e2e p99 ms | requests per worker max/mean | send lag p99 ms | utilisation | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for v, d in rows:
        print("| %s | %.3f | %.0f%% | %.1f%% | %.0f/%.0f | %.0f | %.2f | %.1f | %.0f%% | %d |" % (
            v, d["cached_token_ratio"], 100 * d["cached_token_ratio"] / ideal if ideal else 0,
            100 * d["hit_rate"], d["ttft_p50_ms"], d["ttft_p99_ms"], d.get("e2e_p99_ms", 0),
            d.get("worker_max_mean", 0), d.get("lag_p99_ms", d.get("send_lag_p99_ms", 0)),
            100 * d["utilisation"], d["errors"]))
EOF
