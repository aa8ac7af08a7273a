#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a simulated Kubernetes node in network namespaces (see lib.sh for the layout):
#   up.sh [--nodes K] [--workers N] [--kvsplice|--no-kvsplice] [--worker-cmd CMD]
#         [--proxy-mode nftables|iptables|ipvs]
# --nodes K        K nodes on one cluster network, each with its own client pod, client cgroup,
#                  Service DNAT and kvsplice, all in front of the same workers (default 1)
# --workers N      worker pods (default 2)
# --kvsplice       start build/kvsplice in every node namespace (default when it is built)
# --no-kvsplice    the Service is served by kube-proxy's rules only (plain kube-proxy behaviour)
# --proxy-mode M   how the Service is built, as kube-proxy's mode M does (proxymode.sh):
#                  nftables (default; numgen random DNAT), iptables (KUBE-SVC/KUBE-SEP chains,
#                  statistic random, DNAT; backend: the `iptables` alternative, iptables-nft
#                  on Debian, KVS_IPTABLES=iptables-legacy for the other), ipvs (ClusterIP on
#                  kube-ipvs0, ipvsadm rr, masquerading real servers; needs CONFIG_IP_VS).
#                  Env: KVS_PROXY_MODE
# --worker-cmd CMD what each worker pod runs; {id} {port} {events_port} {replay_port} are
#                  replaced. Default: build/kvsim when built (env KVS_WORKER=kvsim|testworker
#                  forces one), else tests/node/testworker.py. kvsim's --time-scale is
#                  $KVS_TIME_SCALE (default 1); $KVS_KVSIM_ARGS are more kvsim flags (e.g.
#                  "--num-blocks 9360 --max-model-len 16384" for a production-sized cache);
#                  $KVS_TOKENIZER its tokenizer (default models/qwen3/tokenizer.json) and
#                  $KVS_MODEL its served model name (default kvsim's). $KVS_GPUS puts the
#                  kvsim workers on GPUs as tools/kvsim/cluster.sh's KVSIM_GPUS does: one name
#                  per worker, the same name = one time-sliced GPU (kvsim --gpu-share), "-" or
#                  none = a GPU of its own; "a a a a b c" is the seeds' 6-worker deployment.
# Writes $RUN_DIR/services.json (what every kvsplice serves), $RUN_DIR/env (names for scripts),
# $RUN_DIR/kvsplice.pid (kvsplice2.pid ... on nodes 2..K). Set KVS_TESTBED_ID to run several
# testbeds side by side. On any failure everything, every node, is removed again (down.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

nodes=1
workers=2
with_kvsplice=auto
worker_cmd=${KVS_WORKER_CMD:-}
proxy_mode=${KVS_PROXY_MODE:-nftables}
while [ $# -gt 0 ]; do
	case $1 in
	--nodes) nodes=$2; shift ;;
	--workers) workers=$2; shift ;;
	--kvsplice) with_kvsplice=yes ;;
	--no-kvsplice) with_kvsplice=no ;;
	--worker-cmd) worker_cmd=$2; shift ;;
	--proxy-mode) proxy_mode=$2; shift ;;
	-h | --help) awk 'NR > 2 && /^# Writes /{ exit } NR > 2' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "up.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[[ $workers =~ ^[0-9]+$ ]] && [ "$workers" -ge 1 ] && [ "$workers" -le 200 ] ||
	{ echo "up.sh: --workers must be 1..200" >&2; exit 2; }
# Node I's pod range is 10.244.I.0/24; a worker has one veth per node.
[[ $nodes =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 32 ] ||
	{ echo "up.sh: --nodes must be 1..32" >&2; exit 2; }
[[ " nftables iptables ipvs " == *" $proxy_mode "* ]] ||
	{ echo "up.sh: --proxy-mode must be nftables, iptables or ipvs" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "up.sh: needs root" >&2; exit 1; }
[ -n "$CG2_ROOT" ] || { echo "up.sh: no cgroup2 mount" >&2; exit 1; }
source "$KVS_ROOT/tests/node/proxymode.sh"
why=$(kvs_proxy_check "$proxy_mode" 2>&1) ||
	{ echo "up.sh: --proxy-mode $proxy_mode: $why" >&2; exit 1; }
if [ "$with_kvsplice" = auto ]; then
	[ -x "${KVSPLICE:-$KVS_ROOT/build/kvsplice}" ] && with_kvsplice=yes || with_kvsplice=no
fi
if [ -z "$worker_cmd" ]; then
	case ${KVS_WORKER:-auto} in
	kvsim) use_kvsim=yes ;;
	testworker) use_kvsim=no ;;
	auto) [ -x "$KVS_ROOT/build/kvsim" ] && use_kvsim=yes || use_kvsim=no ;;
	*) echo "up.sh: KVS_WORKER must be kvsim or testworker" >&2; exit 2 ;;
	esac
	if [ "$use_kvsim" = yes ]; then
		worker_cmd="$KVS_ROOT/build/kvsim --port {port} --worker-id {id}"
		worker_cmd+=" --tokenizer ${KVS_TOKENIZER:-$KVS_ROOT/models/qwen3/tokenizer.json}"
		[ -z "${KVS_MODEL:-}" ] || worker_cmd+=" --model $KVS_MODEL"
		worker_cmd+=" --time-scale ${KVS_TIME_SCALE:-1}"
		worker_cmd+=" --events-endpoint tcp://*:{events_port} --replay-endpoint tcp://*:{replay_port}"
		worker_cmd+=" ${KVS_KVSIM_ARGS:-}" # e.g. "--num-blocks 9360 --max-model-len 16384"
	else
		worker_cmd="python3 $KVS_ROOT/tests/node/testworker.py --port {port} --worker-id {id}"
	fi
fi

# A testbed of the same id left over from an earlier run is removed first.
"$KVS_ROOT/tests/node/down.sh" >/dev/null 2>&1 || true
trap 'rc=$?; [ $rc -eq 0 ] || "$KVS_ROOT/tests/node/down.sh" >/dev/null 2>&1; exit $rc' EXIT
trap 'exit 130' INT TERM
mkdir -p "$RUN_DIR"
echo "$workers" >"$RUN_DIR/workers"
echo "$nodes" >"$RUN_DIR/nodes"

# --- the nodes ----------------------------------------------------------------------------------
for n in $(seq "$nodes"); do
	ns=$(ns_node "$n")
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	kvs_in "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.default.rp_filter=0
	# The node-local proxy address (as node-local-dns does with 169.254.20.10), the same on
	# every node.
	ip -n "$ns" addr add "$PROXY_IP/32" dev lo
	# A route for the Service range, so that the node's own processes (hostNetwork pods,
	# kvsplice and its keeper) reach ClusterIPs through the DNAT in the output hook, as a node's
	# default route allows. Their source is the node's own address (its pod gateway), as on a
	# real node, never the node-local proxy address, which every node has: a worker could not
	# tell which node to answer.
	ip -n "$ns" addr add "$(pod_gw "$n")/32" dev lo
	ip -n "$ns" route add 10.96.0.0/12 dev lo src "$(pod_gw "$n")"
done

# link_pod NS IP NODE NODE_DEV POD_DEV: a veth from node NODE (side NODE_DEV, carrying the node's
# pod gateway address) to pod namespace NS (side POD_DEV), and the node's /32 route to the pod.
link_pod() {
	local ns=$1 ip=$2 node=$3 dev=$4 pdev=$5
	ip -n "$(ns_node "$node")" -batch - <<-EOF
		link add $dev type veth peer name $pdev netns $ns
		addr add $(pod_gw "$node")/32 dev $dev
		link set $dev up
		route add $ip/32 dev $dev
	EOF
}
# add_pod NS IP NODE NODE_DEV: a pod namespace wired to its node by a veth (eth0), routed via the
# node's pod gateway (10.244.0.1 on node 1).
add_pod() {
	local ns=$1 ip=$2 node=$3 dev=$4 gw
	gw=$(pod_gw "$node")
	ip netns add "$ns"
	link_pod "$ns" "$ip" "$node" "$dev" eth0
	# Pods, Services and the node-local proxy address are reached through the node; nothing else.
	ip -n "$ns" -batch - <<-EOF
		link set lo up
		addr add $ip/32 dev eth0
		link set eth0 up
		route add $gw/32 dev eth0 scope link
		route add 10.0.0.0/8 via $gw dev eth0
		route add $PROXY_IP/32 via $gw dev eth0
	EOF
}
# add_worker I: worker pod I, homed on node 1 (eth0, as on a one-node testbed), with a veth
# eth<N-1> to every other node N over which node N's pod range goes back: node N reaches the
# worker directly, and the answers (to node N's pods and to node N itself: its kvsplice's upstream
# connections, event subscriptions and scrapes) leave the way they came, where node N's conntrack
# expects them.
add_worker() {
	local ns n gw
	ns=$(ns_worker "$1")
	add_pod "$ns" "$(worker_ip "$1")" 1 "vw$1"
	for n in $(seq 2 "$nodes"); do
		gw=$(pod_gw "$n")
		link_pod "$ns" "$(worker_ip "$1")" "$n" "vw$1" "eth$((n - 1))"
		ip -n "$ns" -batch - <<-EOF
			link set eth$((n - 1)) up
			route add $gw/32 dev eth$((n - 1)) scope link
			route add 10.244.$n.0/24 via $gw dev eth$((n - 1))
		EOF
	done
}
for n in $(seq "$nodes"); do
	add_pod "$(ns_client "$n")" "$(client_ip "$n")" "$n" vc
done
for i in $(seq "$workers"); do
	add_worker "$i"
done

# --- the Service: kube-proxy's nftables mode, a random endpoint per connection -------------------
# (--proxy-mode iptables / ipvs: proxymode.sh builds it instead, below)
[ "$proxy_mode" != nftables ] || {
	echo "table ip kvs_nat {"
	echo "  chain prerouting {"
	echo "    type nat hook prerouting priority dstnat; policy accept;"
	echo "    ip daddr $SVC_IP tcp dport $SVC_PORT jump svc_qwen"
	echo "  }"
	echo "  chain output {"
	echo "    type nat hook output priority -100; policy accept;"
	echo "    ip daddr $SVC_IP tcp dport $SVC_PORT jump svc_qwen"
	echo "  }"
	vmap=""
	for i in $(seq "$workers"); do
		vmap+="${vmap:+, }$((i - 1)) : jump ep_w$i"
	done
	echo "  chain svc_qwen {"
	echo "    numgen random mod $workers vmap { $vmap }"
	echo "  }"
	for i in $(seq "$workers"); do
		echo "  chain ep_w$i {"
		echo "    meta l4proto tcp dnat to $(worker_ip "$i"):$SVC_PORT"
		echo "  }"
	done
	echo "}"
} >"$RUN_DIR/nat.nft"
# kube-proxy programs the same rules on every node.
for n in $(seq "$nodes"); do
	kvs_proxy_apply "$proxy_mode" "$(ns_node "$n")" "$workers"
done

# --- workers ------------------------------------------------------------------------------------
eps=""
read -r -a gpus <<<"${KVS_GPUS:-}"
for i in $(seq "$workers"); do
	cmd=${worker_cmd//\{id\}/w$i}
	gpu=${gpus[$((i - 1))]:--}
	if [ "${use_kvsim:-no}" = yes ] && [ "$gpu" != - ]; then
		cmd+=" --gpu-share $RUN_DIR/gpu-$gpu" # $RUN_DIR is new: so is the clock
	fi
	cmd=${cmd//\{port\}/$SVC_PORT}
	cmd=${cmd//\{events_port\}/$EVENTS_PORT}
	cmd=${cmd//\{replay_port\}/$REPLAY_PORT}
	echo "$cmd" >"$RUN_DIR/w$i.cmd" # kvs_start_worker runs it again
	# shellcheck disable=SC2086
	setsid nsenter --net="/run/netns/$(ns_worker "$i")" -- $cmd >"$RUN_DIR/w$i.log" 2>&1 </dev/null &
	echo $! >"$RUN_DIR/w$i.pid"
	eps+="${eps:+,}{\"name\":\"w$i\",\"ip\":\"$(worker_ip "$i")\",\"port\":$SVC_PORT,"
	eps+="\"events_port\":$EVENTS_PORT,\"replay_port\":$REPLAY_PORT}"
done
echo "{\"services\":[{\"name\":\"qwen\",\"cluster_ip\":\"$SVC_IP\",\"port\":$SVC_PORT,\"endpoints\":[$eps]}]}" \
	>"$RUN_DIR/services.json"
for i in $(seq "$workers"); do
	ok=0
	for _ in $(seq 150); do
		if kvs_in "$NS_NODE" bash -c "exec 3<>/dev/tcp/$(worker_ip "$i")/$SVC_PORT" 2>/dev/null; then
			ok=1
			break
		fi
		kvs_alive "$(cat "$RUN_DIR/w$i.pid")" || break
		sleep 0.1
	done
	if [ "$ok" != 1 ]; then
		echo "up.sh: worker w$i did not start; log:" >&2
		tail -n 20 "$RUN_DIR/w$i.log" >&2
		false
	fi
	# ... and every other node reaches it over its own veth.
	for n in $(seq 2 "$nodes"); do
		kvs_in "$(ns_node "$n")" bash -c "exec 3<>/dev/tcp/$(worker_ip "$i")/$SVC_PORT" 2>/dev/null ||
			{ echo "up.sh: node $n does not reach worker w$i" >&2; false; }
	done
done

# --- the client pods' cgroups -------------------------------------------------------------------
for n in $(seq "$nodes"); do
	mkdir -p "$(cg_clients "$n")"
done

cat >"$RUN_DIR/env" <<EOF
NS_NODE=$NS_NODE
NS_CLIENT=$NS_CLIENT
CG_CLIENTS=$CG_CLIENTS
PIN_DIR=$PIN_DIR
SVC=$SVC_IP:$SVC_PORT
PROXY=$PROXY_IP:$PROXY_PORT
ADMIN=$ADMIN_ADDR
WORKERS=$workers
WORKER_CMD="$worker_cmd"
NODES=$nodes
PROXY_MODE=$proxy_mode
PROXY_BACKEND="$(kvs_proxy_backend "$proxy_mode")"
EOF
for n in $(seq 2 "$nodes"); do
	cat >>"$RUN_DIR/env" <<-EOF
		NS_NODE$n=$(ns_node "$n")
		NS_CLIENT$n=$(ns_client "$n")
		CG_CLIENTS$n=$(cg_clients "$n")
		PIN_DIR$n=$(pin_dir "$n")
	EOF
done

if [ "$with_kvsplice" = yes ]; then
	for n in $(seq "$nodes"); do
		KVS_NODE=$n kvs_start_kvsplice
	done
fi
if [ "$nodes" = 1 ]; then
	echo "testbed${KVS_SFX:+ $KVS_SFX} up: $workers workers, Service $SVC_IP:$SVC_PORT ($proxy_mode)," \
		"kvsplice $([ "$with_kvsplice" = yes ] && echo "pid $(cat "$RUN_DIR/kvsplice.pid")" || echo off)"
else
	pids=""
	if [ "$with_kvsplice" = yes ]; then
		for n in $(seq "$nodes"); do pids+=" $(cat "$(kvs_pid_file "$n")")"; done
	fi
	echo "testbed${KVS_SFX:+ $KVS_SFX} up: $nodes nodes, $workers workers, Service $SVC_IP:$SVC_PORT ($proxy_mode)," \
		"kvsplice $([ -n "$pids" ] && echo "pids$pids" || echo off)"
fi
