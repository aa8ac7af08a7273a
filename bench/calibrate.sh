#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsim calibration against the seeds (docs/benchmarks.md#calibration): kvsim workers on 127.0.0.1
# (ephemeral ports), kvbench's per-connection spreads, no proxy. Prints the tables next to the
# seeds' numbers and writes every kvbench result as JSON lines to $OUT (bench/out/calibrate.jsonl).
#   1. hit rates, C=8, P in {2,7,12,24}, 6 and 3 workers, spread random (the seeds' Service),
#      round-robin, dynamo (Dynamo's cost, approximate mode) and dynamo-kv (Dynamo's cost with
#      the overlap from kvsim's KV events, the seeds' "KV routing"), time-scaled (hit rates do not
#      depend on the time scale). Each cell: the mean over SEEDS workload seeds (RUNS runs each,
#      median per seed): one 200-request run has a standard deviation of ~3.7 points at P=7, as
#      large as the tolerance (the seeds' own C=4/8/16 values at P=7 span 52.0-55.5%). A second
#      table gives the spread of one run (and of a median of RUNS runs of one workload seed).
#   2. timing at time scale TIMING_TS (1): TTFT of hits and misses at C=4 (random), and at C=16
#      throughput and TTFT of random, round-robin and Dynamo's cost on KV events at every P, with
#      the ratio of Dynamo's req/s to round-robin's beside the seeds' (each cell the median of
#      TIMING_RUNS runs, 3).
# 6 workers run as the seeds' did: four time-sliced on one GPU, one on each of two more
# (KVSIM_GPUS=$KVSIM_SEEDS_GPUS, tools/kvsim/cluster.sh); 3 workers have a GPU each.
# Env: TS (time scale for part 1, default 10), SEEDS ("1 2 3 4 5"), RUNS (1), PS ("2 7 12 24"),
#      WORKERS ("6 3"), SPREADS ("random round-robin dynamo dynamo-kv"), TIMING (1: run part 2),
#      HITS (0: skip part 1), SUMMARY_ONLY (1: only print the tables from an existing $OUT,
#      e.g. several files joined).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/kvsim/cluster.sh
TS=${TS:-10}
SEEDS=${SEEDS:-1 2 3 4 5}
RUNS=${RUNS:-1}
PS=${PS:-2 7 12 24}
WORKERS=${WORKERS:-6 3}
SPREADS=${SPREADS:-random round-robin dynamo dynamo-kv}
SPREADS3=${SPREADS3:-random} # with 3 workers the seeds published the random column only
TIMING=${TIMING:-1}
TIMING_TS=${TIMING_TS:-1}
TIMING_RUNS=${TIMING_RUNS:-3}
gpus() { [ "$1" = 6 ] && echo "$KVSIM_SEEDS_GPUS" || echo ""; }
OUT=${OUT:-bench/out/calibrate.jsonl}
mkdir -p "$(dirname "$OUT")"
if [ "${SUMMARY_ONLY:-0}" != 1 ]; then
: >"$OUT"
[ -x build/kvsim ] && [ -x build/kvbench ] || make -s
# Private copies: a rebuild during the (long) run must not change or break it.
BIN=$(mktemp -d /tmp/calibrate-bin.XXXXXX)
cp build/kvsim build/kvbench "$BIN/"
export KVSIM_BIN=$BIN/kvsim
trap 'kvsim_stop; rm -rf "$BIN"' EXIT

bench() { # workers spread P C seed runs ts [extra]
	local w=$1 sp=$2 p=$3 c=$4 seed=$5 runs=$6 ts=$7 ev=()
	shift 7
	if [ "$sp" = dynamo-kv ]; then
		sp=dynamo
		ev=(--events "$KVSIM_EVENTS")
	fi
	"$BIN/kvbench" --url "$KVSIM_URLS" "${ev[@]}" --spread "$sp" --prefix-types "$p" --concurrency "$c" \
		--seed "$seed" --runs "$runs" --metrics-urls "$KVSIM_URLS" --reset --time-scale "$ts" \
		--label "w=$w spread=$sp P=$p C=$c seed=$seed" --json --quiet "$@" |
		/usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d["workers"]=int(sys.argv[1]); d["part"]=sys.argv[2]; print(json.dumps(d))' "$w" "$PART" >>"$OUT"
}

PART=hit
[ "${HITS:-1}" = 1 ] || WORKERS=""
for w in $WORKERS; do
	KVSIM_GPUS=$(gpus "$w") KVSIM_WITH_EVENTS=1 kvsim_start "$w" --time-scale "$TS"
	sps=$SPREADS
	[ "$w" = 3 ] && sps=$SPREADS3
	for sp in $sps; do
		for p in $PS; do
			for seed in $SEEDS; do
				echo "calibrate: $w workers, $sp, P=$p, seed $seed" >&2
				bench "$w" "$sp" "$p" 8 "$seed" "$RUNS" "$TS"
			done
		done
	done
	kvsim_stop
done

if [ "$TIMING" = 1 ]; then
	PART=timing
	KVSIM_GPUS=$(gpus 6) KVSIM_WITH_EVENTS=1 kvsim_start 6 --time-scale "$TIMING_TS"
	for p in 7 24; do
		echo "calibrate: timing, 6 workers, random, P=$p, C=4, time scale $TIMING_TS" >&2
		bench 6 random "$p" 4 1 "$TIMING_RUNS" "$TIMING_TS"
	done
	for p in $PS; do
		for sp in random round-robin dynamo-kv; do
			echo "calibrate: timing, 6 workers, $sp, P=$p, C=16, time scale $TIMING_TS" >&2
			bench 6 "$sp" "$p" 16 1 "$TIMING_RUNS" "$TIMING_TS"
		done
	done
	kvsim_stop
fi
fi # SUMMARY_ONLY

/usr/bin/python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
seed_hit = {6: {"random": [95.0, 55.5, 32.1, 17.5], "round-robin": [95.0, 53.5, 29.2, 17.5],
                "dynamo-kv": [97.5, 83.0, 67.9, 43.3]},
            3: {"random": [98.0, 59.5, 33.8, 16.9]}}
# Seeds' cached-token ratios at C=8, 6 workers: round-robin and Dynamo's approximate mode.
seed_ratio = {"round-robin": [0.814, 0.439, 0.247, 0.149], "dynamo": [0.848, 0.638, 0.480, 0.245],
              "dynamo-kv": [0.835, 0.702, 0.573, 0.361]}
P = [2, 7, 12, 24]
hit = [r for r in rows if r["part"] == "hit"]
print("## hit rate, C=8: ours (mean over workload seeds [min..max]) vs the seeds")
print("| workers | spread | P | ours hit % | seeds hit % | diff | ours cached ratio | metrics ratio | seeds ratio | workers/prefix |")
print("|---|---|---|---|---|---|---|---|---|---|")
for w in sorted({r["workers"] for r in hit}, reverse=True):
    for sp in ["random", "round-robin", "dynamo", "dynamo-kv"]:
        for i, p in enumerate(P):
            cell = [r for r in hit if r["workers"] == w and r["prefix_types"] == p and
                    (r["spread"] if not r.get("kv_events") else "dynamo-kv") == sp]
            if not cell:
                continue
            h = [100 * r["hit_rate"] for r in cell]
            ratio = statistics.mean(r["cached_token_ratio"] for r in cell)
            mr = [r["metrics_hit_ratio"] for r in cell if r["metrics_hit_ratio"] is not None]
            wpp = statistics.mean(r["workers_per_prefix"] for r in cell)
            sh = seed_hit.get(w, {}).get(sp)
            sr = seed_ratio.get(sp) if w == 6 else None
            m = statistics.mean(h)
            print("| %d | %s | %d | %.1f [%.1f..%.1f] | %s | %s | %.3f | %s | %s | %.2f |" % (
                w, sp, p, m, min(h), max(h), "%.1f" % sh[i] if sh else "-",
                "%+.1f" % (m - sh[i]) if sh else "-", ratio,
                "%.3f" % statistics.mean(mr) if mr else "-", "%.3f" % sr[i] if sr else "-", wpp))
print()
print("## spread of one run, hit %: every run of every workload seed (n = seeds x runs)")
print("| workers | spread | P | n | mean of one run | sd of one run | medians of RUNS: mean, sd |")
print("|---|---|---|---|---|---|---|")
for w in sorted({r["workers"] for r in hit}, reverse=True):
    for sp in ["random", "round-robin", "dynamo", "dynamo-kv"]:
        for p in P:
            cell = [r for r in hit if r["workers"] == w and r["prefix_types"] == p and
                    (r["spread"] if not r.get("kv_events") else "dynamo-kv") == sp]
            one = [100 * x["hit_rate"] for r in cell for x in r.get("runs", [r])]
            if len(one) < 2:
                continue
            med = [100 * r["hit_rate"] for r in cell if r.get("runs_count", 1) > 1]
            print("| %d | %s | %d | %d | %.2f | %.2f | %s |" % (
                w, sp, p, len(one), statistics.mean(one), statistics.stdev(one),
                "%.2f, %.2f (%d)" % (statistics.mean(med), statistics.stdev(med), len(med))
                if len(med) > 1 else "-"))
tim = [r for r in rows if r["part"] == "timing"]
if tim:
    print()
    print("## timing, 6 workers, spread random, time scale 1 (ms, req/s)")
    print("| P | C | hit % | TTFT p50 / p99 | hit TTFT p50 | miss TTFT p50 | req/s | seeds |")
    print("|---|---|---|---|---|---|---|---|")
    seeds = {(7, 4): "hit 41 / miss 107 (p50); all 63 / 184", (24, 4): "hit 36 / miss 104; all 101 / 254",
             (2, 16): "64 / 325, 18.9 req/s", (24, 16): "205 / 1,508, 13.3 req/s"}
    for r in tim:
        if r["concurrency"] != 4:
            continue
        k = (r["prefix_types"], r["concurrency"])
        print("| %d | %d | %.1f | %.0f / %.0f | %.0f | %.0f | %.1f | %s |" % (
            k[0], k[1], 100 * r["hit_rate"], r["ttft_p50_ms"], r["ttft_p99_ms"],
            r["ttft_hit_p50_ms"], r["ttft_miss_p50_ms"], r["req_per_s"], seeds.get(k, "-")))
    # The seeds' C=16 tables (6 workers): req/s and TTFT p50 / p99 per spread and P.
    s_rps = {"random": [18.9, 14.1, 13.9, 13.3], "round-robin": [19.1, 16.0, 14.7, 14.3],
             "dynamo-kv": [21.1, 20.1, 19.2, 17.6]}
    s_ttft = {"random": [(64, 325), (142, 1353), (193, 1441), (205, 1508)],
              "round-robin": [(74, 332), (111, 576), (190, 646), (199, 774)],
              "dynamo-kv": [(67, 206), (72, 240), (77, 193), (109, 242)]}
    c16 = {}
    for r in tim:
        if r["concurrency"] == 16:
            sp = r["spread"] if not r.get("kv_events") else "dynamo-kv"
            c16[(sp, r["prefix_types"])] = r
    if c16:
        print()
        print("## C=16, 6 workers: req/s and TTFT p50 / p99 (ms) against the seeds")
        print("| P | spread | req/s | seeds | diff | TTFT p50 / p99 | seeds | p50 diff |")
        print("|---|---|---|---|---|---|---|---|")
        for i, p in enumerate(P):
            for sp in ["random", "round-robin", "dynamo-kv"]:
                r = c16.get((sp, p))
                if not r:
                    continue
                sr, (s50, s99) = s_rps[sp][i], s_ttft[sp][i]
                print("| %d | %s | %.1f | %.1f | %+.0f%% | %.0f / %.0f | %d / %d | %+.0f%% |" % (
                    p, sp, r["req_per_s"], sr, 100 * (r["req_per_s"] / sr - 1),
                    r["ttft_p50_ms"], r["ttft_p99_ms"], s50, s99,
                    100 * (r["ttft_p50_ms"] / s50 - 1)))
        print()
        print("## what routing does to throughput: Dynamo's cost / round-robin, req/s at C=16")
        print("| P | ours | seeds | diff |")
        print("|---|---|---|---|")
        for i, p in enumerate(P):
            d, rr = c16.get(("dynamo-kv", p)), c16.get(("round-robin", p))
            if not d or not rr:
                continue
            ours, seeds_r = d["req_per_s"] / rr["req_per_s"], s_rps["dynamo-kv"][i] / s_rps["round-robin"][i]
            print("| %d | %.3f | %.3f | %+.1f%% |" % (p, ours, seeds_r, 100 * (ours / seeds_r - 1)))
EOF
