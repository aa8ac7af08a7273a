#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsplice in front of each way kube-proxy builds a Service (tests/node/proxymode.sh): nftables
# mode, iptables mode on the nf_tables backend (Debian's default `iptables`) and on the legacy
# backend, IPVS mode where the kernel has IPVS. For each:
#  - without kvsplice the Service path alone serves the ClusterIP and spreads connections over
#    both endpoints (its own per-endpoint counters: the DNAT rules' packets, IPVS's connections);
#  - with kvsplice every request is routed by it and none reaches the Service path (connect4
#    rewrites the destination before the nat table or IPVS ever see the packet), getpeername()
#    in the client shows the ClusterIP;
#  - kvsplice SIGKILLed while a client connects in a loop: no connect refused or timed out, and
#    the Service path takes every new connection (fail-open);
#  - kvsplice started again: routed again, the Service path idle again.
# IPVS needs CONFIG_IP_VS: where the kernel lacks it the mode is skipped, saying so.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}pm$$
source tests/node/lib.sh
source tests/node/proxymode.sh
tmp=$(mktemp -d /tmp/kvs-proxymodes.XXXXXX)
cleanup() {
	kvs_stop_kvsplice KILL
	tests/node/down.sh >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

bin=$KVS_ROOT/build/kvsplice
[ -x "$bin" ] || { skip "kvsplice in front of kube-proxy's modes" "$bin is not built"; exit 0; }
export KVS_WORKER=testworker
export KVSPLICE_ARGS="--router round-robin"

metric() {
	kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
# requests N: N requests from the client pod to the ClusterIP; prints how many got a 200.
requests() {
	tests/node/client.sh bash -c 'n=0; for i in $(seq '"$1"'); do
		c=$(curl -s -o /dev/null -m 5 -w "%{http_code}" http://'"$SVC_IP:$SVC_PORT"'/v1/models)
		[ "$c" = 200 ] && n=$((n + 1)); done; echo $n'
}
peer() {
	tests/node/client.sh python3 -c "
import socket
s = socket.create_connection(('$SVC_IP', $SVC_PORT), timeout=5)
print('%s:%d' % s.getpeername())"
}
# svc_total MODE: connections the Service path has sent to all endpoints; svc_each: "a b".
svc_total() { kvs_proxy_conns "$1" | awk '{ s += $2 } END { print s + 0 }'; }
svc_each() { kvs_proxy_conns "$1" | awk '{ printf "%s%d", (NR > 1 ? " " : ""), $2 }'; }

# one_mode NAME MODE [KVS_IPTABLES]
one_mode() {
	local name=$1 mode=$2 s0 q0 r0 n each loop res why
	export KVS_IPTABLES=${3:-iptables}
	if ! why=$(kvs_proxy_check "$mode" 2>&1); then
		skip "$name" "$why"
		return
	fi
	if ! KVS_PROXY_MODE=$mode tests/node/up.sh --workers 2 --no-kvsplice >"$tmp/up.log" 2>&1; then
		ok 1 "$name: testbed up"
		sed 's/^/# /' "$tmp/up.log"
		tests/node/down.sh >/dev/null 2>&1
		return
	fi
	source "$RUN_DIR/env"
	echo "# $name: $PROXY_BACKEND"
	kvs_proxy_counters_on "$mode" || ok 1 "$name: Service path counters on"

	# the Service path alone
	n=$(requests 20)
	each=$(svc_each "$mode")
	expect_eq "$name, no kvsplice: 20 of 20 answered, 20 connections through the Service path" \
		"20 20" "$n $(svc_total "$mode")"
	ok $(awk '{ exit !($1 > 0 && $2 > 0) }' <<<"$each"; echo $?) \
		"$name, no kvsplice: both endpoints served (per endpoint: $each)"

	# routed by kvsplice
	if ! kvs_start_kvsplice; then
		ok 1 "$name: kvsplice started"
		tests/node/down.sh >/dev/null 2>&1
		return
	fi
	s0=$(svc_total "$mode") q0=$(metric kvsplice_requests_total) r0=$(kvs_bpf_stat rewritten)
	n=$(requests 10)
	expect_eq "$name, kvsplice: 10 of 10 answered, 10 routed, 10 rewritten, 0 through the Service path" \
		"10 10 10 0" \
		"$n $(($(metric kvsplice_requests_total) - q0)) $(($(kvs_bpf_stat rewritten) - r0)) $(($(svc_total "$mode") - s0))"
	expect_eq "$name, kvsplice: getpeername() shows the ClusterIP" "$SVC_IP:$SVC_PORT" "$(peer)"

	# SIGKILL under a connect loop: fail-open to the Service path
	rm -f "$tmp/stop"
	tests/node/client.sh python3 tests/node/connloop.py --seconds 20 --stop-file "$tmp/stop" \
		>"$tmp/loop" &
	loop=$!
	kvs_wait_stat rewritten $(($(kvs_bpf_stat rewritten) + 30))
	ok $? "$name: a client connecting in a loop is served through kvsplice"
	kvs_stop_kvsplice KILL
	s0=$(svc_total "$mode")
	sleep 1
	touch "$tmp/stop"
	wait "$loop"
	res=$(cat "$tmp/loop")
	echo "# $name: loop across the SIGKILL: $res"
	declare -A L=()
	json_load L <<<"$res"
	expect_eq "$name, SIGKILL: 0 connects refused or timed out" 0 "${L[connect_failed]:-0}"
	ok $((${L[lost]:-0} <= 2 ? 0 : 1)) \
		"$name, SIGKILL: at most the served connection and one opened during the teardown reset (${L[lost]:-0})"
	ok $(($(svc_total "$mode") - s0 > 0 ? 0 : 1)) \
		"$name, SIGKILL: the loop's connects after the kill went through the Service path ($(($(svc_total "$mode") - s0)))"
	s0=$(svc_total "$mode")
	n=$(requests 10)
	expect_eq "$name, kvsplice dead: 10 of 10 answered by the Service path" "10 10" \
		"$n $(($(svc_total "$mode") - s0))"
	expect_eq "$name, kvsplice dead: getpeername() shows the ClusterIP (the DNAT's)" \
		"$SVC_IP:$SVC_PORT" "$(peer)"

	# restarted: routed again
	if kvs_start_kvsplice; then
		s0=$(svc_total "$mode") q0=$(metric kvsplice_requests_total)
		n=$(requests 10)
		expect_eq "$name, kvsplice back: 10 of 10 routed, 0 through the Service path" "10 10 0" \
			"$n $(($(metric kvsplice_requests_total) - q0)) $(($(svc_total "$mode") - s0))"
	else
		ok 1 "$name: kvsplice started again"
	fi
	kvs_stop_kvsplice TERM
	tests/node/down.sh >/dev/null 2>&1
	ok $(ip netns list | grep -q "^kvs-node$KVS_SFX\b" && echo 1 || echo 0) "$name: testbed removed"
}

one_mode "nftables mode" nftables
one_mode "iptables mode (nf_tables backend)" iptables iptables-nft
one_mode "iptables mode (legacy backend)" iptables iptables-legacy
one_mode "IPVS mode" ipvs
tap_done
