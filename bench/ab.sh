#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/ab.sh: kvsplice variants side by side through the eBPF path of the node testbed, rounds
# interleaved (variant 1, 2, ..., then again), so that the machine's drift falls on every variant
# alike. A variant is NAME=POLICY[,BINARY][ FLAG...]: kvsplice BINARY (build/kvsplice) with
# --router POLICY and the flags; the policy "service" is the plain Service (kvsplice absent).
# One testbed for the whole run; a fresh kvsplice per variant and round; every point (P:C) with
# the seeds' workload (kvbench --reset, the same seeded requests). Prints one line per run, then
# per variant and point the mean, standard deviation, min and max of req/s over the rounds, mean
# hits (with their spread) and the median TTFT p99; the runs go to $AB_OUT/runs.jsonl (one
# kvbench JSON per line, with "variant" and "round"). With several workload seeds (AB_SEEDS) each
# round runs every seed, and a cell pools its rounds and seeds: a capacity-bound point's hit rate
# depends on the request order more than on the machine (docs/benchmarks.md#routing, 3
# workers), and a second table gives each seed's hit rate.
#   bash bench/ab.sh "old=kv,/tmp/old/kvsplice" "new=kv" "rr=round-robin"
# Env: AB_POINTS ("2:16 7:16 12:16 24:16"), AB_ROUNDS (5), AB_TIME_SCALE (4), AB_WORKERS (6),
#      AB_SEEDS (AB_SEED, else 1: kvbench's workload seeds), AB_KVBENCH_ARGS (extra kvbench
#      flags), AB_OUT (bench/out/ab), KVS_TESTBED_ID (ab).
set -euo pipefail
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-ab}
source "$(dirname "$0")/../tests/node/lib.sh"
cd "$KVS_ROOT"
[ $# -ge 1 ] || { sed -n '3,18p' "$0" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "ab: needs root (network namespaces, BPF)" >&2; exit 1; }
POINTS=${AB_POINTS:-2:16 7:16 12:16 24:16}
ROUNDS=${AB_ROUNDS:-5}
TS=${AB_TIME_SCALE:-4}
WORKERS=${AB_WORKERS:-6}
SEEDS=${AB_SEEDS:-${AB_SEED:-1}}
OUT=${AB_OUT:-$KVS_ROOT/bench/out/ab}
for v in "$@"; do
	[[ $v =~ ^[A-Za-z0-9_.-]+=[a-z-]+ ]] || { echo "ab: bad variant '$v' (NAME=POLICY[,BINARY][ FLAG...])" >&2; exit 2; }
done
for b in build/kvsim build/kvbench build/kvsplice; do
	[ -x "$b" ] || { echo "ab: $b is missing (make)" >&2; exit 1; }
done
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
trap 'kvs_stop_kvsplice >/dev/null 2>&1 || true; tests/node/down.sh >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

KVS_WORKER=kvsim KVS_TIME_SCALE=$TS tests/node/up.sh --workers "$WORKERS" --no-kvsplice >&2
svc_url=http://$SVC_IP:$SVC_PORT
pods=""
for i in $(seq "$WORKERS"); do pods+="${pods:+,}http://$(worker_ip "$i"):$SVC_PORT"; done

for r in $(seq "$ROUNDS"); do
	for v in "$@"; do
		name=${v%%=*} spec=${v#*=}
		head=${spec%% *} flags=""
		[[ $spec == *" "* ]] && flags=${spec#* }
		pol=${head%%,*} bin=""
		[[ $head == *,* ]] && bin=${head#*,}
		if [ "$pol" != service ]; then
			# the testbed runs TS times faster than real time: so does the metrics cadence
			KVSPLICE=${bin:-$KVS_ROOT/build/kvsplice} \
				KVSPLICE_ARGS="--router $pol --scrape-interval $((250 / TS))ms $flags" \
				kvs_start_kvsplice >&2
		fi
		for seed in $SEEDS; do
		for pt in $POINTS; do
			p=${pt%%:*} c=${pt##*:}
			# shellcheck disable=SC2086
			tests/node/client.sh build/kvbench --url "$svc_url" --prefix-types "$p" \
				--concurrency "$c" --seed "$seed" \
				--tokenizer "$KVS_ROOT/models/qwen3/tokenizer.json" --metrics-urls "$pods" \
				--reset --time-scale "$TS" --quiet --json ${AB_KVBENCH_ARGS:-} |
				tail -n 1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
d.update(variant=sys.argv[1], round=int(sys.argv[2]))
print(json.dumps(d))
print("round %d seed %d P=%d C=%d %s: %.3f req/s, %.1f%% hits, TTFT p99 %.0f ms" % (
    d["round"], d["seed"], d["prefix_types"], d["concurrency"], d["variant"], d["req_per_s"],
    100 * d["hit_rate"], d["ttft_p99_ms"]), file=sys.stderr)' "$name" "$r" >>"$OUT/runs.jsonl"
		done
		done
		# (its last kill may find the process gone: not a failure)
		[ "$pol" = service ] || kvs_stop_kvsplice >&2 || true
	done
done

python3 - "$OUT/runs.jsonl" <<'EOF' | tee "$OUT/report.md"
import collections, json, statistics as st, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
cells = collections.defaultdict(list)
order = []
for d in runs:
    k = (d["prefix_types"], d["concurrency"])
    if k not in order:
        order.append(k)
    cells[k, d["variant"]].append(d)
names = list(dict.fromkeys(d["variant"] for d in runs))
print("| P, C | variant | req/s mean | sd | min | max | hits mean | sd | min | max | TTFT p99 (median) | runs |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for k in order:
    for n in names:
        v = cells.get((k, n))
        if not v:
            continue
        q = [d["req_per_s"] for d in v]
        h = [100 * d["hit_rate"] for d in v]
        print(f"| {k[0]}, {k[1]} | {n} | {st.mean(q):.3f} | {st.pstdev(q):.3f} | {min(q):.3f} | "
              f"{max(q):.3f} | {st.mean(h):.1f}% | {st.pstdev(h):.1f} | {min(h):.1f}% | "
              f"{max(h):.1f}% | {st.median(d['ttft_p99_ms'] for d in v):.0f} ms | {len(v)} |")
seeds = sorted({d["seed"] for d in runs})
if len(seeds) > 1:
    # a hit rate per seed (mean over its rounds): variants move together from seed to seed
    print()
    print("| P, C | variant | " + " | ".join(f"seed {s}" for s in seeds) + " |")
    print("|---|---|" + "---|" * len(seeds))
    for k in order:
        for n in names:
            v = cells.get((k, n))
            if not v:
                continue
            by = collections.defaultdict(list)
            for d in v:
                by[d["seed"]].append(100 * d["hit_rate"])
            print(f"| {k[0]}, {k[1]} | {n} | " +
                  " | ".join(f"{st.mean(by[s]):.1f}%" if by[s] else "-" for s in seeds) + " |")
EOF
