#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proxy overhead in the netns node (tests/node), request by request side by side: a client pod calls
#   (1) 10.96.0.51:8000, a second ClusterIP with the same kube-proxy-like nftables DNAT to the same
#       worker but not selected for interception: the plain Kubernetes path (the reference);
#   (2) the Service 10.96.0.50:8000: intercepted by BPF and served through kvsplice;
#   (3) the worker pod's IP directly.
# The worker is build/bench/overhead --serve (a C upstream), so the paths, not the worker, are
# compared. The cases are overhead.c's, the chat 10 KB ones included (through kvsplice they take
# the full routing decision); afterwards `overhead --route-check` reads kvsplice's /debug/route and
# /metrics in the node and fails unless the chat requests were decided on tokens.
# Prints one table; writes JSON.
# Usage: bash bench/overhead/netns.sh [N]     (requests per case and path, default 3000)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-3000}
out=${OUT:-build/bench/overhead-netns.json}
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-benchovh}
source tests/node/lib.sh
trap 'tests/node/down.sh >/dev/null 2>&1' EXIT
bin=$KVS_ROOT/build/bench/overhead
[ -x "$bin" ] && [ -x "$KVS_ROOT/build/kvsplice" ] || { echo "netns.sh: run make first" >&2; exit 1; }

tests/node/up.sh --workers 1 --kvsplice --worker-cmd "$bin --serve {port}" >/dev/null
# the reference Service: same DNAT chain, another ClusterIP that kvsplice does not select
kvs_in "$NS_NODE" nft add rule ip kvs_nat prerouting ip daddr 10.96.0.51 tcp dport "$SVC_PORT" jump svc_qwen
tests/node/client.sh "$bin" --n "$n" --json "$out" \
	--target "10.96.0.51:$SVC_PORT" --label "DNAT" \
	--target "$SVC_IP:$SVC_PORT" --label "kvsplice (BPF)" \
	--target "$(worker_ip 1):$SVC_PORT" --label "pod direct"
# kvsplice's admin server listens inside the node namespace only
kvs_in "$NS_NODE" "$bin" --route-check "$ADMIN_ADDR"
