#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: the seeds' experiment on one machine. A simulated node (network namespaces) with 6
# kvsim workers behind the Service 10.96.0.50:8000 (nftables DNAT, a random endpoint per
# connection, as kube-proxy does), the seeds' workload (kvbench) from a client pod against that
# unchanged ClusterIP: first the plain Service, then the same requests with kvsplice intercepting
# (one pass per router policy), then Dynamo's cost as a client-side baseline (kvbench --spread
# dynamo to the pod IPs, the overlap from the workers' KV events as in Dynamo's KV routing).
# Ends with the seed-style table, the seeds' published numbers beside ours. Time-scaled so that it takes a few minutes.
# Env: DEMO_TIME_SCALE (4), DEMO_POINTS (P:C pairs, "2:8 7:8 12:8 24:8 24:16"), DEMO_RUNS (1),
#      DEMO_SEED (1),
#      DEMO_POLICIES (the kvsplice --router policies to run; default: round-robin),
#      DEMO_DYNAMO (1: include the client-side dynamo baseline), KVS_TESTBED_ID (demo).
set -euo pipefail
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-demo}
source "$(dirname "$0")/lib.sh"
cd "$KVS_ROOT"
TS=${DEMO_TIME_SCALE:-4}
POINTS=${DEMO_POINTS:-2:8 7:8 12:8 24:8 24:16}
RUNS=${DEMO_RUNS:-1}
SEED=${DEMO_SEED:-1}
POLICIES=${DEMO_POLICIES:-round-robin}
WORKERS=6
OUT=$(mktemp -d /tmp/kvsplice-demo.XXXXXX)
say() { printf '\n== %s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces, BPF)" >&2; exit 1; }
for b in build/kvsim build/kvbench build/kvsplice; do
	[ -x "$b" ] || { echo "demo: $b is missing (make)" >&2; exit 1; }
done

cleanup() {
	tests/node/down.sh >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "node testbed: $WORKERS kvsim workers (time scale $TS), Service $SVC_IP:$SVC_PORT (DNAT, random)"
KVS_WORKER=kvsim KVS_TIME_SCALE=$TS tests/node/up.sh --workers "$WORKERS" --no-kvsplice >&2

svc_url=http://$SVC_IP:$SVC_PORT
pods="" evs=""
for i in $(seq "$WORKERS"); do
	pods+="${pods:+,}http://$(worker_ip "$i"):$SVC_PORT"
	evs+="${evs:+,}tcp://$(worker_ip "$i"):$EVENTS_PORT"
done
tests/node/client.sh curl -sf --max-time 10 "$svc_url/v1/models" >/dev/null ||
	{ echo "demo: the Service does not answer" >&2; exit 1; }

# variant NAME kvbench-args...: every P for one variant, results as JSON lines in $OUT/NAME.
variant() {
	local name=$1 pt p c
	shift
	: >"$OUT/$name"
	for pt in $POINTS; do
		p=${pt%%:*} c=${pt##*:}
		say "$name: P=$p, C=$c (${RUNS} run(s), seed $SEED)"
		tests/node/client.sh build/kvbench "$@" --prefix-types "$p" --concurrency "$c" \
			--seed "$SEED" --runs "$RUNS" --tokenizer "$KVS_ROOT/models/qwen3/tokenizer.json" \
			--metrics-urls "$pods" --reset --time-scale "$TS" --label "$name P=$p" --json \
			>>"$OUT/$name"
	done
}

variant service --url "$svc_url"
cols=(service)
for pol in $POLICIES; do
	say "kvsplice (--router $pol) intercepting the same ClusterIP"
	KVSPLICE_ARGS="--router $pol" kvs_start_kvsplice
	variant "kvsplice-$pol" --url "$svc_url"
	kvs_stop_kvsplice || true
	cols+=("kvsplice-$pol")
done
if [ "${DEMO_DYNAMO:-1}" = 1 ]; then
	variant dynamo-kv --url "$pods" --spread dynamo --events "$evs"
	cols+=(dynamo-kv)
fi

say "results"
/usr/bin/python3 - "$OUT" "$WORKERS" "$TS" "${cols[@]}" <<'EOF'
import json, os, sys
out, workers, ts, cols = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
# The seeds' published numbers (6 workers): hit rate and cached-token ratio at C=8 (ratios of the
# Service column at C=8 are not published: C=4 shown), TTFT p50/p99 at C=8 for the Service.
seeds = {
    "hit": {"service": {(2, 8): 95.0, (7, 8): 55.5, (12, 8): 32.1, (24, 8): 17.5, (24, 16): 16.7},
            "rr": {(2, 8): 95.0, (7, 8): 53.5, (12, 8): 29.2, (24, 8): 17.5},
            "dynamo-kv": {(2, 8): 97.5, (7, 8): 83.0, (12, 8): 67.9, (24, 8): 43.3, (24, 16): 52.0}},
    "ratio": {"rr": {(2, 8): 0.814, (7, 8): 0.439, (12, 8): 0.247, (24, 8): 0.149, (24, 16): 0.148},
              "dynamo-kv": {(2, 8): 0.835, (7, 8): 0.702, (12, 8): 0.573, (24, 8): 0.361, (24, 16): 0.431},
              "dynamo-approx": {(2, 8): 0.848, (7, 8): 0.638, (12, 8): 0.480, (24, 8): 0.245}},
    "ttft": {(2, 8): "Service 47/190", (7, 8): "Service 93/526", (12, 8): "Service 126/493",
             (24, 8): "Service 136/635",
             (24, 16): "Service 205/1508, 13.3 req/s; RR 199/774, 14.3; Dynamo KV 109/242, 17.6"},
}
res = {c: {} for c in cols}
for c in cols:
    for line in open(os.path.join(out, c)):
        d = json.loads(line)
        res[c][(d["prefix_types"], d["concurrency"])] = d
P = sorted({p for c in cols for p in res[c]}, key=lambda k: (k[1], k[0]))
fmt = lambda v, f: f % v if v is not None else "-"
print("\nkvsplice demo: %d kvsim workers, time scale %s (TTFT and req/s in model time)" % (workers, ts))
print("\nRequest-level hit rate (cached_tokens > 0)")
hdr = "| P, C | seeds: Service | seeds: round-robin | seeds: Dynamo KV | " + " | ".join("ours: " + c for c in cols) + " |"
print(hdr)
print("|" + "---|" * (4 + len(cols)))
for p in P:
    row = ["%d, %d" % p] + [fmt(seeds["hit"][k].get(p), "%.1f%%") for k in ("service", "rr", "dynamo-kv")]
    row += ["%.1f%%" % (100 * res[c][p]["hit_rate"]) if p in res[c] else "-" for c in cols]
    print("| " + " | ".join(row) + " |")
print("\nCached-token ratio (max 0.857) and the workers' own metrics (hits/queries deltas)")
print("| P, C | seeds: round-robin | seeds: Dynamo KV | seeds: Dynamo approx | " + " | ".join("ours: " + c for c in cols) + " |")
print("|" + "---|" * (4 + len(cols)))
for p in P:
    row = ["%d, %d" % p] + [fmt(seeds["ratio"][k].get(p), "%.3f") for k in ("rr", "dynamo-kv", "dynamo-approx")]
    for c in cols:
        d = res[c].get(p)
        row.append("%.3f (metrics %s)" % (d["cached_token_ratio"], "%.3f" % d["metrics_hit_ratio"] if d["metrics_hit_ratio"] is not None else "-") if d else "-")
    print("| " + " | ".join(row) + " |")
print("\nTTFT p50/p99 ms, req/s, distinct workers per prefix, errors")
print("| P, C | seeds | " + " | ".join("ours: " + c for c in cols) + " |")
print("|" + "---|" * (2 + len(cols)))
for p in P:
    row = ["%d, %d" % p, seeds["ttft"].get(p, "-")]
    for c in cols:
        d = res[c].get(p)
        row.append("%.0f/%.0f, %.1f req/s, %.2f w/pfx, %d err" % (d["ttft_p50_ms"], d["ttft_p99_ms"], d["req_per_s"], d["workers_per_prefix"], d["errors"]) if d else "-")
    print("| " + " | ".join(row) + " |")
print("\nseeds: 002_a7ece122ee7be345.txt (Service), 000_e1d619d3006ec42e.txt (round-robin, Dynamo); raw JSON: %s" % out)
EOF
