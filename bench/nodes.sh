#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/nodes.sh: one kvsplice per node, several nodes, the same workers (docs/benchmarks.md#nodes).
# A testbed of 3 nodes (tests/node/up.sh --nodes 3) with 6 kvsim workers; the seeds' workload, P=24,
# the same prefix set from every client pod (kvbench --prefix-seed):
#   one node   node 1's client alone at C=9 (480 requests)
#   3 nodes    the three client pods at once, C=3 each (160 requests each, their own --seed),
#              after the same warm-up as the one-node run (one request per prefix, in turn)
#   3 + kill   the same, node 2's kvsplice killed (SIGKILL) a few seconds in and restarted
#              a few seconds later: node 2 falls back to the Service's DNAT meanwhile
#   3 + crash  the same, node 2's kvsplice run as the DaemonSet runs it (PID 1 of a PID namespace
#              of its own: supervisor.h) and its daemon SIGKILLed a few seconds in: PID 1 starts
#              it again at once and it takes the listener back from its keeper (keeper.h)
# for each policy (kv, dynamo), each instance only seeing its own node's load and every
# worker's events and metrics; no instance talks to another. Prints a table (combined hit rate,
# cached-token ratio, per-node hit rates, TTFT p99, workers per prefix, errors, the killed node's
# fallbacks) and writes bench/out/nodes/nodes.json. Not part of `make test` (about 8 minutes).
# Env: NODES_TIME_SCALE (4), NODES_POLICIES ("kv dynamo"), NODES_P (24), NODES_MODES
# ("three kill crash"), NODES_KVSPLICE_ARGS (more kvsplice flags for every instance).
# NODES_WORKLOAD=sessions|agent: kvbench's generated conversations instead (a production-sized
# cache, 9,360 blocks a worker, 32 tokens per hash id): one node's client with NODES_CONVOS (300)
# conversations at NODES_RATE (3) a second, then each of the three clients with a third of them
# at a third of the rate (their own seeds), "three" mode only; reported against each run's ideal.
# NODES_WORKLOAD=trace: the Mooncake trace (NODES_TRACE, bench/traces/mooncake_synthetic_trace.jsonl;
# NODES_TRACE_LIMIT rows, 1200; schedule x NODES_SPEEDUP, 8; the same cache) from node 1's
# client alone, then a third of its rows from each client (kvbench --trace-shard n/3, one clock
# with --trace-epoch): together the same requests at the same times; reported against the whole
# trace's ideal.
set -euo pipefail
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-benchnodes}
source "$(dirname "$0")/../tests/node/lib.sh"
cd "$KVS_ROOT"
ts=${NODES_TIME_SCALE:-4}
P=${NODES_P:-24}
out=bench/out/nodes
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.metrics
[ "$(id -u)" -eq 0 ] || { echo "nodes.sh: needs root" >&2; exit 1; }
trap 'tests/node/down.sh >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
trap 'echo "nodes.sh: line $LINENO failed (exit $?): $BASH_COMMAND" >&2' ERR

wl=${NODES_WORKLOAD:-}
trace=${NODES_TRACE:-$KVS_ROOT/bench/traces/mooncake_synthetic_trace.jsonl}
[ -n "$wl" ] && export KVS_KVSIM_ARGS="--num-blocks 9360 --max-model-len 32768"
KVS_WORKER=kvsim KVS_TIME_SCALE=$ts tests/node/up.sh --nodes 3 --workers 6 --no-kvsplice >&2
pods=""
for i in $(seq 6); do pods+="${pods:+,}http://$(worker_ip "$i"):$SVC_PORT"; done
svc=http://$SVC_IP:$SVC_PORT

# bench NODE SEED C N LABEL [kvbench flags...]: kvbench in node NODE's client pod, JSON on stdout
# (with NODES_WORKLOAD: N conversations at C/100 a second, seed SEED)
bench() {
	local node=$1 seed=$2 c=$3 n=$4 label=$5
	shift 5
	if [ "$wl" = trace ]; then
		tests/node/client.sh --node "$node" build/kvbench --url "$svc" --trace "$trace" \
			--trace-limit "${NODES_TRACE_LIMIT:-1200}" --trace-block-tokens 32 \
			--trace-speedup "${NODES_SPEEDUP:-8}" --max-prompt-tokens 32256 \
			--tokenizer "$KVS_ROOT/models/qwen3/tokenizer.json" --time-scale "$ts" \
			--label "$label" --json --quiet "$@"
		return
	fi
	if [ -n "$wl" ]; then
		tests/node/client.sh --node "$node" build/kvbench --url "$svc" --workload "$wl" \
			--seed "$seed" --conversations "$n" --convo-rate "$(python3 -c "print($c / 100)")" \
			--trace-block-tokens 32 --convo-max-tokens 30000 \
			--tokenizer "$KVS_ROOT/models/qwen3/tokenizer.json" --time-scale "$ts" \
			--label "$label" --json --quiet "$@"
		return
	fi
	tests/node/client.sh --node "$node" build/kvbench --url "$svc" --prefix-types "$P" \
		--prefix-seed 100 --seed "$seed" --concurrency "$c" --requests "$n" \
		--tokenizer "$KVS_ROOT/models/qwen3/tokenizer.json" --time-scale "$ts" \
		--label "$label" --json --quiet "$@"
}
reset_caches() {
	local i
	for i in $(seq 6); do
		# a worker busy with the previous run's tail may take a moment to answer
		kvs_in "$NS_NODE" curl -s -o /dev/null --retry 5 --retry-connrefused --retry-delay 1 \
			-X POST "http://$(worker_ip "$i"):$SVC_PORT/reset_prefix_cache"
	done
	sleep 0.5 # the AllBlocksCleared events reach every instance
}
kargs() { echo "--router $1 --scrape-interval $((250 / ts))ms ${NODES_KVSPLICE_ARGS:-}"; }
start_all() {
	local n
	for n in 1 2 3; do
		KVS_NODE=$n KVSPLICE_ARGS="$(kargs "$1")" kvs_start_kvsplice
	done
}
# kvsplice as a container's PID 1 (a PID namespace of its own), for the crash mode
cat >"$out/pid1" <<EOF
#!/bin/sh
exec unshare --pid --fork --kill-child "$KVS_ROOT/build/kvsplice" "\$@"
EOF
chmod +x "$out/pid1"
children() { cat "/proc/$1/task/"*/children 2>/dev/null | tr ' ' '\n' | grep .; }
stop_all() {
	local n p
	for n in 1 2 3; do
		# as PID 1 (crash mode) the stop goes to the init, which stops its daemon in order
		p=$(cat "$(kvs_pid_file "$n")" 2>/dev/null) || true
		if [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = unshare ]; then
			kill -TERM "$(children "$p" | head -n 1)" 2>/dev/null || true
		fi
		KVS_NODE=$n kvs_stop_kvsplice || true
	done
}

convos=${NODES_CONVOS:-300}
rate100=$(python3 -c "print(int(${NODES_RATE:-3} * 100))")
for pol in ${NODES_POLICIES:-kv dynamo}; do
	echo "== $pol: one node" >&2
	start_all "$pol"
	reset_caches
	if [ -n "$wl" ]; then
		bench 1 1 "$rate100" "$convos" "$pol one node" >"$out/$pol-one.json"
		reset_caches
		echo "== $pol: 3 nodes, a third each" >&2
		pids=()
		epoch=$(python3 -c 'import time; print("%.3f" % (time.time() + 5))')
		for n in 1 2 3; do
			if [ "$wl" = trace ]; then
				bench "$n" 0 0 0 "$pol node $n" --trace-shard "$n/3" --trace-epoch "$epoch" \
					>"$out/$pol-three-$n.json" &
			else
				bench "$n" "$((n + 1))" "$((rate100 / 3))" "$((convos / 3))" "$pol node $n" \
					--trace-epoch "$epoch" >"$out/$pol-three-$n.json" &
			fi
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p" || true; done
		stop_all
		continue
	fi
	bench 1 1 9 480 "$pol one node" >"$out/$pol-one.json"
	for mode in ${NODES_MODES:-three kill crash}; do
		echo "== $pol: 3 nodes, C=3 each ($mode)" >&2
		if [ "$mode" = crash ]; then
			KVS_NODE=2 kvs_stop_kvsplice || true
			KVSPLICE=$out/pid1 KVS_NODE=2 KVSPLICE_ARGS="$(kargs "$pol")" kvs_start_kvsplice
		fi
		reset_caches
		# one warm-up request per prefix, as the one-node run has: from node 1, one at a time
		bench 1 9 1 1 "$pol warm-up" >/dev/null
		pids=()
		for n in 1 2 3; do
			bench "$n" "$n" 3 160 "$pol node $n" --no-warmup >"$out/$pol-$mode-$n.json" &
			pids+=($!)
		done
		if [ "$mode" = kill ]; then
			a0=$(KVS_NODE=2 kvs_bpf_stat proxy_absent)
			sleep 4
			KVS_NODE=2 kvs_stop_kvsplice KILL || true
			sleep 4
			a1=$(KVS_NODE=2 kvs_bpf_stat proxy_absent)
			KVS_NODE=2 KVSPLICE_ARGS="$(kargs "$pol")" kvs_start_kvsplice
			echo "{\"fallback_connects\":$((a1 - a0))}" >"$out/$pol-kill-fallback.json"
		elif [ "$mode" = crash ]; then
			a0=$(KVS_NODE=2 kvs_bpf_stat proxy_absent)
			sleep 4
			init=$(children "$(cat "$(kvs_pid_file 2)")" | head -n 1)
			kill -KILL "$(children "$init" | head -n 1)" || true
			sleep 4
			a1=$(KVS_NODE=2 kvs_bpf_stat proxy_absent)
			echo "{\"fallback_connects\":$((a1 - a0))}" >"$out/$pol-crash-fallback.json"
		fi
		for p in "${pids[@]}"; do wait "$p" || true; done
		for n in 1 2 3; do
			kvs_in --node "$n" curl -s "http://$ADMIN_ADDR/metrics" \
				>"$out/$pol-$mode-$n.metrics" || true
		done
	done
	stop_all
done

if [ -n "$wl" ]; then
	python3 - "$out" ${NODES_POLICIES:-kv dynamo} <<'EOF' | tee "$out/nodes.md"
import json, os, sys
out, pols = sys.argv[1], sys.argv[2:]
load = lambda f: json.load(open(os.path.join(out, f)))
print("| policy | run | of the ideal (cached / ideal tokens) | per node | TTFT p99 ms (worst) "
      "| requests per worker max/mean | errors |")
print("|---|---|---|---|---|---|---|")
for pol in pols:
    one = load("%s-one.json" % pol)
    print("| %s | one node | %.1f%% | - | %.0f | %.2f | %d |" % (
        pol, 100 * one["usage_cached_tokens"] / one["ideal_cached_tokens"], one["ttft_p99_ms"],
        one["worker_max_mean"], one["errors"]))
    ns = [load("%s-three-%d.json" % (pol, n)) for n in (1, 2, 3)]
    per = {}  # the three clients' requests on each worker, together
    for d in ns:
        for w, k in d.get("requests_per_worker", {}).items():
            per[w] = per.get(w, 0) + k
    spread = max(per.values()) / (sum(per.values()) / 6) if per else 0
    c = sum(d["usage_cached_tokens"] for d in ns)
    if "trace_all_ideal_cached_tokens" in ns[0]:
        # trace shards: the whole trace's ideal; per node its own cached-token ratio over it
        i = ns[0]["trace_all_ideal_cached_tokens"]
        per_node = [d["usage_cached_tokens"] / d["usage_prompt_tokens"] /
                    d["trace_all_ideal_cached_ratio"] for d in ns]
    else:
        i = sum(d["ideal_cached_tokens"] for d in ns)
        per_node = [d["usage_cached_tokens"] / d["ideal_cached_tokens"] for d in ns]
    print("| %s | 3 nodes | %.1f%% | %s | %.0f | %.2f | %d |" % (
        pol, 100 * c / i, " / ".join("%.1f" % (100 * x) for x in per_node),
        max(d["ttft_p99_ms"] for d in ns), spread, sum(d["errors"] for d in ns)))
EOF
	exit 0
fi
python3 - "$out" ${NODES_POLICIES:-kv dynamo} <<'EOF' | tee "$out/nodes.md"
import json, os, sys
out, pols = sys.argv[1], sys.argv[2:]
load = lambda f: json.load(open(os.path.join(out, f)))
rows, summary = [], {}
print("| policy | run | combined hit rate | cached-token ratio | per node (hit %) | TTFT p99 ms "
      "(worst node) | workers per prefix (mean) | errors | node 2 fell back |")
print("|---|---|---|---|---|---|---|---|---|")
for pol in pols:
    one = load("%s-one.json" % pol)
    summary[pol] = {"one": one["hit_rate"]}
    print("| %s | one node, C=9 | %.1f%% | %.3f | - | %.0f | %.2f | %d | - |" % (
        pol, 100 * one["hit_rate"], one["cached_token_ratio"], one["ttft_p99_ms"],
        one["workers_per_prefix"], one["errors"]))
    for mode in [m for m in ("three", "kill", "crash") if os.path.exists(
            os.path.join(out, "%s-%s-1.json" % (pol, m)))]:
        ns = [load("%s-%s-%d.json" % (pol, mode, n)) for n in (1, 2, 3)]
        req = sum(d["requests"] - d["errors"] for d in ns)
        hits = sum(d["hit_rate"] * (d["requests"] - d["errors"]) for d in ns)
        ratio = sum(d["cached_token_ratio"] * (d["requests"] - d["errors"]) for d in ns) / req
        fb = load("%s-%s-fallback.json" % (pol, mode))["fallback_connects"] \
            if mode != "three" else None
        summary[pol][mode] = hits / req
        print("| %s | 3 nodes, C=3 each%s | %.1f%% | %.3f | %s | %.0f | %.2f | %d | %s |" % (
            pol, {"three": "", "kill": ", node 2's kvsplice killed, restarted 4 s later",
                  "crash": ", node 2's daemon killed, PID 1 restarts it"}[mode],
            100 * hits / req, ratio, " / ".join("%.1f" % (100 * d["hit_rate"]) for d in ns),
            max(d["ttft_p99_ms"] for d in ns), sum(d["workers_per_prefix"] for d in ns) / 3,
            sum(d["errors"] for d in ns), "%d connects" % fb if fb is not None else "-"))
print()
for pol in pols:
    s = summary[pol]
    for mode, what in (("three", "3 nodes"), ("kill", "3 nodes, one killed 4 s"),
                       ("crash", "3 nodes, one's daemon crashed")):
        if mode in s:
            print("%s: %s %.1f%% vs one node %.1f%% (%+.1f points)" % (
                pol, what, 100 * s[mode], 100 * s["one"], 100 * (s[mode] - s["one"])))
json.dump(summary, open(os.path.join(out, "nodes.json"), "w"))
EOF
