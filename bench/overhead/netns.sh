#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proxy overhead in the netns node (tests/node): a client pod calls the Service 10.96.0.50:8000
# (1) intercepted by BPF and served through kvsplice, (2) through the kube-proxy-like nftables DNAT
# (kvsplice stopped: interception falls open), (3) straight to the worker pod's IP. The worker is
# build/bench/overhead --serve (a C upstream), so the paths, not the worker, are compared. The
# paths alternate A B C A B C so noise is shared. Prints one table; writes JSON.
# Usage: bash bench/overhead/netns.sh [N]     (requests per case and path per round, default 2000)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-2000}
out=${OUT:-build/bench/overhead-netns.json}
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-benchovh}
source tests/node/lib.sh
tmp=$(mktemp -d /tmp/kvs-ovh.XXXXXX)
trap 'tests/node/down.sh >/dev/null 2>&1; rm -rf "$tmp"' EXIT
bin=$KVS_ROOT/build/bench/overhead
[ -x "$bin" ] && [ -x "$KVS_ROOT/build/kvsplice" ] || { echo "netns.sh: run make first" >&2; exit 1; }

tests/node/up.sh --workers 1 --kvsplice --worker-cmd "$bin --serve {port}" >/dev/null
pod=$(worker_ip 1):8000
svc=$SVC_IP:$SVC_PORT
for round in 1 2; do
	kvs_intercepting || kvs_start_kvsplice
	tests/node/client.sh "$bin" --n "$n" --target "$svc" --label kvsplice \
		--json "$tmp/kvsplice.$round.json" >/dev/null
	kvs_stop_kvsplice TERM || true # not our child: its wait fails
	tests/node/client.sh "$bin" --n "$n" --target "$svc" --label dnat \
		--json "$tmp/dnat.$round.json" >/dev/null
	tests/node/client.sh "$bin" --n "$n" --target "$pod" --label pod \
		--json "$tmp/pod.$round.json" >/dev/null
done
kvs_start_kvsplice
python3 - "$tmp" "$out" "$n" <<'PY'
import json, statistics, sys
tmp, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
paths = ["pod", "dnat", "kvsplice"]
runs = {p: [json.load(open(f"{tmp}/{p}.{r}.json")) for r in (1, 2)] for p in paths}
cases = [c["case"] for c in runs["pod"][0]["cases"]]
res = []
print(f"overhead in the netns node: {n} requests per case, path and round; 2 rounds; median of the "
      "two rounds' p50 / p99 (µs)\n")
print("| request | pod direct p50 | p99 | DNAT p50 | p99 | kvsplice (BPF) p50 | p99 | "
      "added vs DNAT p50 | p99 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for i, c in enumerate(cases):
    q = {p: [statistics.median(r["cases"][i][p][k] for r in runs[p]) for k in ("p50_us", "p99_us")]
         for p in paths}
    res.append({"case": c, **{p: {"p50_us": q[p][0], "p99_us": q[p][1]} for p in paths}})
    print(f"| {c} | {q['pod'][0]:.1f} | {q['pod'][1]:.1f} | {q['dnat'][0]:.1f} | {q['dnat'][1]:.1f} "
          f"| {q['kvsplice'][0]:.1f} | {q['kvsplice'][1]:.1f} | {q['kvsplice'][0]-q['dnat'][0]:.1f} "
          f"| {q['kvsplice'][1]-q['dnat'][1]:.1f} |")
json.dump({"n": n, "rounds": 2, "cases": res}, open(out, "w"), indent=1)
PY
