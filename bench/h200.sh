#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/h200.sh: what kvsplice buys on production hardware (docs/benchmarks.md#h200). The node
# testbed's 6 kvsim workers as H200s serving Qwen3-8B (kvsim --profile h200-qwen3-8b, a GPU
# each), time scale 1, everything through the eBPF path, for the plain Service, kvsplice's
# dynamo (Dynamo's cost) and kv, in one run:
#   1. the seeds' workload at P=24, C=16 (H200_RUNS runs, median), with the seeds' cache (585
#      blocks of 16 per worker, as their 1 GiB cap gave) and with an H200's whole cache
#      (~42,000 blocks: every prefix fits on every worker);
#   2. the sessions workload (kvbench --workload sessions, 300 sessions at 3/s) with the H200's
#      whole cache.
# Prints one table (TTFT p50/p99, req/s, hits, cached-token ratio) and writes it with the raw JSON
# to $H200_OUT (bench/out/h200). About 15 minutes. Not part of `make test`.
# Env: H200_RUNS (3), H200_OUT (bench/out/h200), H200_PROFILE (h200-qwen3-8b),
#      H200_PARTS ("seeds full sessions").
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "h200.sh: needs root" >&2; exit 1; }
OUT=${H200_OUT:-bench/out/h200}
PROFILE=${H200_PROFILE:-h200-qwen3-8b}
RUNS=${H200_RUNS:-3}
mkdir -p "$OUT"
for part in ${H200_PARTS:-seeds full sessions}; do
	case $part in
	seeds | full)
		args="--profile $PROFILE"
		# The seeds' cap: 585 blocks, and the seeds' --max-model-len 4096 that such a cache allows.
		[ "$part" = seeds ] && args+=" --num-blocks 585 --max-model-len 4096"
		KVS_KVSIM_ARGS=$args DEMO_GPUS=- DEMO_TIME_SCALE=1 DEMO_POINTS=24:16 DEMO_RUNS=$RUNS \
			DEMO_POLICIES="dynamo kv" DEMO_DYNAMO=0 DEMO_OUT=$OUT/$part KVS_TESTBED_ID=benchh200 \
			bash tests/node/demo.sh >/dev/null
		;;
	sessions)
		TRACE_WORKLOAD=sessions TRACE_SPEEDUP=1 TRACE_LIMITS=sessions TRACE_TS=1 \
			TRACE_BLOCKS=42000 TRACE_KVSIM_ARGS="--profile $PROFILE" \
			TRACE_WORKLOAD_ARGS="--conversations 300 --convo-rate 3 --model Qwen/Qwen3-8B" \
			TRACE_VARIANTS="service dynamo kv" TRACE_OUT=$OUT/sessions KVS_TESTBED_ID=benchh200 \
			bash bench/trace.sh >/dev/null
		;;
	*) echo "h200.sh: unknown part $part" >&2; exit 2 ;;
	esac
done

python3 - "$OUT" "$PROFILE" <<'PY' | tee "$OUT/h200.md"
import json, os, sys
out, profile = sys.argv[1], sys.argv[2]
rows = []
for part, what in (("seeds", "seeds' workload P=24 C=16, the seeds' cache (585 blocks)"),
                   ("full", "seeds' workload P=24 C=16, the whole H200 cache")):
    for v in ("service", "kvsplice-dynamo", "kvsplice-kv"):
        f = os.path.join(out, part, v + ".jsonl")
        if os.path.exists(f):
            for line in open(f):
                rows.append((what, v, json.loads(line)))
for v in ("service", "dynamo", "kv"):
    f = os.path.join(out, "sessions", v + "-sessions.json")
    if os.path.exists(f):
        rows.append(("sessions, 300 at 3/s, the whole H200 cache", v, json.load(open(f))))
print("kvsim --profile %s, 6 workers (a GPU each), through the eBPF path" % profile)
print()
print("| workload | variant | TTFT p50 / p99 ms | req/s | request hits | cached-token ratio |")
print("|---|---|---|---|---|---|")
for what, v, d in rows:
    v = v.replace("kvsplice-", "")
    print("| %s | %s | %.0f / %.0f | %.1f | %.1f%% | %.3f |" % (
        what, v, d["ttft_p50_ms"], d["ttft_p99_ms"], d["req_per_s"], 100 * d["hit_rate"],
        d["cached_token_ratio"]))
PY
