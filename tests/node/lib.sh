# SPDX-License-Identifier: Apache-2.0
# Names and helpers of the netns node testbed, sourced by up.sh, down.sh, client.sh and the
# tests. Every name carries the suffix "-$KVS_TESTBED_ID" when that variable is set, so that
# parallel testbeds (one per developer or CI job) never collide: namespaces, the client cgroups,
# the bpffs pin directories and the run directory.
#
#   kvs-node       node 1: routes between pods, the Service's nftables DNAT (kube-proxy
#                  equivalent), the proxy address 169.254.20.11 on lo, kvsplice
#   kvs-client     node 1's client pod 10.244.0.2, its processes in cgroup kvsplice-test/clients
#   kvs-w1..N      worker pods 10.244.1.1..N, each serving :8000 (kvsim, or tests/node/testworker.py)
#
# Pods are routed, not bridged: a veth per pod, the node side carrying 10.244.0.1 and a /32 route
# to the pod, so conntrack on the node sees both directions of every flow. No namespace has a
# route out of the testbed and nothing is added to the machine's own namespace.
#
# With up.sh --nodes K, nodes 2..K are copies of node 1 on the same cluster network, each with
# the number before the suffix: kvs-node2, kvs-client2 (10.244.2.2, gateway 10.244.2.1), cgroup
# kvsplice-test/clients2, pins /sys/fs/bpf/kvsplice-test2, kvsplice2.pid/.log in the run dir.
# The proxy address 169.254.20.11 and the admin address 127.0.0.1:15090 are the same inside every
# node namespace (each has its own lo), as node-local-dns uses one address on every node. Every
# worker pod has one veth per node (eth0 to node 1, eth<I-1> to node I, the node side named vw<i>
# in every node) and routes node I's pod range 10.244.I.0/24 back over node I's veth: node I's
# traffic to a worker never crosses another node, and every node reaches every worker.
#
# The globals below (NS_NODE, NS_CLIENT, CG_CLIENTS, PIN_DIR, CLIENT_IP, NODE_POD_GW) are node 1's.
# The functions ns_node, ns_client, client_ip, pod_gw, cg_clients, pin_dir take a node number,
# default $KVS_NODE, else 1; so do the kvs_* helpers through $KVS_NODE (KVS_NODE=2 kvs_bpf_stat
# rewritten), and client.sh through --node I.

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

# Node I's names. kvs_node_tag I: what node I adds to node 1's names ("" for node 1, else I).
kvs_node_tag() {
	local n=${1:-${KVS_NODE:-1}}
	[ "$n" = 1 ] || echo "$n"
}
ns_node() { echo "kvs-node$(kvs_node_tag "$@")$KVS_SFX"; }
ns_client() { echo "kvs-client$(kvs_node_tag "$@")$KVS_SFX"; }
cg_clients() { echo "$CG_TOP/clients$(kvs_node_tag "$@")"; }
pin_dir() {
	local t
	t=$(kvs_node_tag "$@")
	if [ -z "$t" ]; then echo "$PIN_DIR"; else echo "/sys/fs/bpf/kvsplice-test$t$KVS_SFX"; fi
}
# Node I's pod range is 10.244.I.0/24 (node 1 keeps 10.244.0.0/24; 10.244.1.0/24 is the workers').
pod_gw() {
	local t
	t=$(kvs_node_tag "$@")
	if [ -z "$t" ]; then echo "$NODE_POD_GW"; else echo "10.244.$t.1"; fi
}
client_ip() {
	local t
	t=$(kvs_node_tag "$@")
	if [ -z "$t" ]; then echo "$CLIENT_IP"; else echo "10.244.$t.2"; fi
}
# Node I's kvsplice files in the run dir: kvsplice.pid / kvsplice.log, kvsplice2.pid ...
kvs_pid_file() { echo "$RUN_DIR/kvsplice$(kvs_node_tag "$@").pid"; }
kvs_log_file() { echo "$RUN_DIR/kvsplice$(kvs_node_tag "$@").log"; }

# kvs_in NS CMD...: runs CMD in namespace NS, keeping this process's cgroup and mounts (bpffs).
# kvs_in --node I CMD...: the same in node I's node namespace (where its kvsplice and admin are).
kvs_in() {
	local ns=$1
	if [ "$ns" = --node ]; then
		ns=$(ns_node "$2")
		shift
	fi
	shift
	nsenter --net="/run/netns/$ns" -- "$@"
}

# Number of workers / nodes of the running testbed.
kvs_workers() { cat "$RUN_DIR/workers" 2>/dev/null || echo 0; }
kvs_nodes() { cat "$RUN_DIR/nodes" 2>/dev/null || echo 1; }

# Is a proxy listener registered in node $KVS_NODE's pinned sockmap (is interception on there)?
kvs_intercepting() {
	bpftool map lookup pinned "$(pin_dir)/proxy_listener" key 0 0 0 0 >/dev/null 2>&1
}

# One BPF counter (by name, summed over CPUs) from node $KVS_NODE's pinned stats map; 0 when
# absent.
kvs_bpf_stat() {
	local v
	v=$("$KVS_ROOT/build/tests/node/kvstub" stats --pin-dir "$(pin_dir)" 2>/dev/null |
		awk -v n="$1" '$1 == n { print $2 }')
	echo "${v:-0}"
}

# Starts kvsplice (or $KVSPLICE, any program taking the same flags) in node $KVS_NODE's namespace,
# attached to that node's client cgroup with that node's pin dir, and waits until its listener is
# registered. Extra flags: $KVSPLICE_ARGS; another services file: $KVSPLICE_SERVICES;
# $KVSPLICE_CGROUP: a cgroup to run it in (e.g. the client cgroup, to see that its own connects
# are never intercepted, as on a node where the programs sit at the root); $KVSPLICE_AT: the cgroup
# its programs attach at instead of the client cgroup (e.g. $CG_TOP). KVSPLICE_WAIT=admin:
# wait for its admin server instead (a kvsplice staying out of the way registers no listener).
kvs_start_kvsplice() {
	local bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice} i ns=$NS_NODE cg=$CG_CLIENTS pins
	local pidf log
	pins=$(pin_dir) pidf=$(kvs_pid_file) log=$(kvs_log_file)
	if [ -n "$(kvs_node_tag)" ]; then
		ns=$(ns_node) cg=$(cg_clients)
	fi
	cg=${KVSPLICE_AT:-$cg}
	(
		[ -z "${KVSPLICE_CGROUP:-}" ] || echo "$BASHPID" >"$KVSPLICE_CGROUP/cgroup.procs"
		# shellcheck disable=SC2086
		exec setsid nsenter --net="/run/netns/$ns" -- "$bin" \
			--services "${KVSPLICE_SERVICES:-$RUN_DIR/services.json}" \
			--listen "$PROXY_IP:$PROXY_PORT" --cgroup "$cg" --pin-dir "$pins" \
			--admin "$ADMIN_ADDR" ${KVSPLICE_ARGS:-}
	) >>"$log" 2>&1 </dev/null &
	echo $! >"$pidf"
	for i in $(seq 100); do
		if [ "${KVSPLICE_WAIT:-}" = admin ]; then
			nsenter --net="/run/netns/$ns" -- curl -s -m 1 -o /dev/null \
				"http://$ADMIN_ADDR/healthz" && return 0
		else
			kvs_intercepting && return 0
		fi
		kvs_alive "$(cat "$pidf")" || break
		sleep 0.1
	done
	echo "kvsplice${KVS_NODE:+ of node $KVS_NODE} did not register its listener" \
		"${KVSPLICE_WAIT:+(or answer on its admin address)}; log:" >&2
	tail -n 20 "$log" >&2
	return 1
}

# Restarts node $KVS_NODE's kvsplice without loss, as a rolling update does: a new process (the
# same flags, $KVSPLICE may name another binary) takes the listening sockets over from the running
# one (handover: the proxy listener never leaves the BPF sockmap), and once it serves them the old
# one gets SIGTERM (Kubernetes deleting the old pod) and drains. Returns when the old process has
# exited, 1 if the new one did not get ready or the old one did not exit within 40 s.
kvs_restart_kvsplice() {
	local pidf old ready i
	pidf=$(kvs_pid_file)
	old=$(cat "$pidf" 2>/dev/null)
	ready=$RUN_DIR/kvsplice$(kvs_node_tag).ready
	rm -f "$ready"
	KVSPLICE_ARGS="${KVSPLICE_ARGS:-} --port-file $ready" kvs_start_kvsplice || return 1
	for i in $(seq 100); do
		[ -s "$ready" ] && break
		kvs_alive "$(cat "$pidf")" || break
		sleep 0.1
	done
	if [ ! -s "$ready" ]; then
		echo "the new kvsplice did not get ready; log:" >&2
		tail -n 20 "$(kvs_log_file)" >&2
		return 1
	fi
	[ -z "$old" ] || kill -TERM "$old" 2>/dev/null
	for i in $(seq 400); do
		kvs_alive "$old" || return 0
		sleep 0.1
	done
	echo "the old kvsplice (pid $old) did not exit" >&2
	return 1
}

# Starts worker I's process again (the command up.sh ran, in its namespace) and waits until it
# answers on its port (15 s at most). Returns 1 if it does not.
kvs_start_worker() {
	local i=$1 cmd n
	cmd=$(cat "$RUN_DIR/w$i.cmd") || return 1
	# shellcheck disable=SC2086
	setsid nsenter --net="/run/netns/$(ns_worker "$i")" -- $cmd >>"$RUN_DIR/w$i.log" 2>&1 </dev/null &
	echo $! >"$RUN_DIR/w$i.pid"
	for n in $(seq 150); do
		kvs_in "$NS_NODE" bash -c "exec 3<>/dev/tcp/$(worker_ip "$i")/$SVC_PORT" 2>/dev/null &&
			return 0
		kvs_alive "$(cat "$RUN_DIR/w$i.pid")" || break
		sleep 0.1
	done
	echo "worker w$i did not start again" >&2
	return 1
}

# Signals worker I's process (default KILL); for KILL and TERM also waits until it is gone.
kvs_signal_worker() {
	local i=$1 sig=${2:-KILL} pid n
	pid=$(cat "$RUN_DIR/w$i.pid" 2>/dev/null) || return 1
	kill -"$sig" "$pid" 2>/dev/null || return 1
	case $sig in KILL | TERM | 9 | 15) ;; *) return 0 ;; esac
	for n in $(seq 100); do
		kvs_alive "$pid" || return 0
		sleep 0.05
	done
	return 1
}

# Is process PID alive: is any of its threads neither a zombie nor dead? Not the leader's state
# alone: after SIGKILL the leader turns zombie while the other threads still hold the process's
# files (kvsplice's listener, so interception is still on); a caller that is not the parent cannot
# `wait` for the whole group.
kvs_alive() {
	local f st
	[ -n "$1" ] || return 1
	for f in "/proc/$1/task/"*/stat; do
		read -r st 2>/dev/null <"$f" || continue
		st=${st##*) }
		[[ $st != Z* && $st != X* ]] && return 0
	done
	return 1
}

# Stops node $KVS_NODE's kvsplice with SIGNAL (default TERM) and waits for it to be gone.
kvs_stop_kvsplice() {
	local sig=${1:-TERM} pid i pidf
	pidf=$(kvs_pid_file)
	pid=$(cat "$pidf" 2>/dev/null) || return 0
	kill -"$sig" "$pid" 2>/dev/null
	for i in $(seq 100); do
		kvs_alive "$pid" || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -f "$pidf"
}

# Id of the bpf_link pinned as NAME under node $KVS_NODE's pin dir (empty when none).
kvs_link_id() {
	bpftool link show pinned "$(pin_dir)/$1" 2>/dev/null | awk -F: 'NR == 1 { print $1 }'
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

# Waits (up to 15 s) until node $KVS_NODE's BPF counter NAME reaches at least MIN. Returns 1 on
# timeout.
kvs_wait_stat() {
	local i
	for i in $(seq 150); do
		[ "$(kvs_bpf_stat "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
