# SPDX-License-Identifier: Apache-2.0
# Names and helpers of the netns node testbed, sourced by up.sh, down.sh, client.sh and the
# tests. Every name carries the suffix "-$KVS_TESTBED_ID" when that variable is set, so that
# parallel testbeds (one per developer or CI job) never collide: namespaces, the client cgroup,
# the bpffs pin directory and the run directory.
#
#   kvs-node       the node: routes between pods, the Service's nftables DNAT (kube-proxy
#                  equivalent), the proxy address 169.254.20.11 on lo, kvsplice
#   kvs-client     a client pod 10.244.0.2, its processes in cgroup kvsplice-test/clients
#   kvs-w1..N      worker pods 10.244.1.1..N, each serving :8000 (kvsim, or tests/node/testworker.py)
#
# Pods are routed, not bridged: a veth per pod, the node side carrying 10.244.0.1 and a /32 route
# to the pod, so conntrack on the node sees both directions of every flow. No namespace has a
# route out of the testbed and nothing is added to the machine's own namespace.

KVS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KVS_SFX=${KVS_TESTBED_ID:+-$KVS_TESTBED_ID}

NS_NODE=kvs-node$KVS_SFX
NS_CLIENT=kvs-client$KVS_SFX
RUN_DIR=/run/kvsplice-test$KVS_SFX
PIN_DIR=/sys/fs/bpf/kvsplice-test$KVS_SFX

SVC_IP=10.96.0.50
SVC_PORT=8000
PROXY_IP=169.254.20.11
PROXY_PORT=15001
ADMIN_ADDR=127.0.0.1:15090 # inside the node namespace
NODE_POD_GW=10.244.0.1
CLIENT_IP=10.244.0.2
EVENTS_PORT=20080
REPLAY_PORT=20081

# The cgroup v2 mount: /sys/fs/cgroup on Kubernetes nodes, /sys/fs/cgroup/unified on hybrid hosts.
kvs_cgroup2_root() {
	awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts
}
CG2_ROOT=$(kvs_cgroup2_root)
CG_TOP=$CG2_ROOT/kvsplice-test$KVS_SFX
CG_CLIENTS=$CG_TOP/clients

ns_worker() { echo "kvs-w$1$KVS_SFX"; }
worker_ip() { echo "10.244.1.$1"; }

# kvs_in NS CMD...: runs CMD in namespace NS, keeping this process's cgroup and mounts (bpffs).
kvs_in() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" -- "$@"
}

# Number of workers of the running testbed.
kvs_workers() { cat "$RUN_DIR/workers" 2>/dev/null || echo 0; }

# Is a proxy listener registered in the pinned sockmap (i.e. is interception on)?
kvs_intercepting() {
	bpftool map lookup pinned "$PIN_DIR/proxy_listener" key 0 0 0 0 >/dev/null 2>&1
}

# One BPF counter (by name, summed over CPUs) from the pinned stats map; 0 when absent.
kvs_bpf_stat() {
	local v
	v=$("$KVS_ROOT/build/tests/node/kvstub" stats --pin-dir "$PIN_DIR" 2>/dev/null |
		awk -v n="$1" '$1 == n { print $2 }')
	echo "${v:-0}"
}

# Starts kvsplice (or $KVSPLICE, any program taking the same flags) in the node namespace and
# waits until its listener is registered. Extra flags: $KVSPLICE_ARGS; another services file:
# $KVSPLICE_SERVICES; $KVSPLICE_CGROUP: a cgroup to run it in (e.g. the client cgroup, to see
# that its own connects are never intercepted, as on a node where the programs sit at the root).
kvs_start_kvsplice() {
	local bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice} i
	(
		[ -z "${KVSPLICE_CGROUP:-}" ] || echo "$BASHPID" >"$KVSPLICE_CGROUP/cgroup.procs"
		# shellcheck disable=SC2086
		exec setsid nsenter --net="/run/netns/$NS_NODE" -- "$bin" \
			--services "${KVSPLICE_SERVICES:-$RUN_DIR/services.json}" \
			--listen "$PROXY_IP:$PROXY_PORT" --cgroup "$CG_CLIENTS" --pin-dir "$PIN_DIR" \
			--admin "$ADMIN_ADDR" ${KVSPLICE_ARGS:-}
	) >>"$RUN_DIR/kvsplice.log" 2>&1 </dev/null &
	echo $! >"$RUN_DIR/kvsplice.pid"
	for i in $(seq 100); do
		kvs_intercepting && return 0
		kvs_alive "$(cat "$RUN_DIR/kvsplice.pid")" || break
		sleep 0.1
	done
	echo "kvsplice did not register its listener; log:" >&2
	tail -n 20 "$RUN_DIR/kvsplice.log" >&2
	return 1
}

# Is process PID alive (and not a zombie)?
kvs_alive() {
	local st
	[ -n "$1" ] && read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	[[ $st != Z* && $st != X* ]]
}

# Stops kvsplice with SIGNAL (default TERM) and waits for it to be gone.
kvs_stop_kvsplice() {
	local sig=${1:-TERM} pid i
	pid=$(cat "$RUN_DIR/kvsplice.pid" 2>/dev/null) || return 0
	kill -"$sig" "$pid" 2>/dev/null
	for i in $(seq 100); do
		kvs_alive "$pid" || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -f "$RUN_DIR/kvsplice.pid"
}

# Id of the bpf_link pinned as NAME under the pin dir (empty when none).
kvs_link_id() {
	bpftool link show pinned "$PIN_DIR/$1" 2>/dev/null | awk -F: 'NR == 1 { print $1 }'
}

# json_load VAR < JSON: fills the associative array VAR (declare -A VAR first) with the JSON
# object's fields, nested ones as a.b, in one python run (starting python is slow on a busy box).
json_load() {
	local -n _into=$1
	local k v
	while IFS=$'\t' read -r k v; do
		_into[$k]=$v
	done < <(python3 -c '
import json, sys
def walk(p, v):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(p + [str(k)], x)
    else:
        s = v if isinstance(v, str) else json.dumps(v)
        print(".".join(p) + "\t" + s.replace("\t", " ").replace("\n", " "))
try:
    walk([], json.load(sys.stdin))
except ValueError:
    pass')
}

# Waits (up to 15 s) until BPF counter NAME reaches at least MIN. Returns 1 on timeout.
kvs_wait_stat() {
	local i
	for i in $(seq 150); do
		[ "$(kvs_bpf_stat "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
