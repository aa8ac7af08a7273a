#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsplice beside a socket load balancer on connect4 (Cilium's kube-proxy replacement, GKE
# Dataplane V2), played by the testbed's stand-in (bpf/socklb_standin.bpf.c, loaded by
# build/tests/node/socklb): a connect4 program that translates the ClusterIP to a random endpoint.
# The testbed's cgroup $CG_TOP plays the node's cgroup2 root (where Cilium attaches) and its child
# $CG_CLIENTS the pods' cgroup. In every place and attach order:
#  - requests to the ClusterIP are routed by kvsplice (its request counter and BPF "rewritten"
#    grow), and getpeername() in the client shows the ClusterIP;
#  - kvsplice SIGKILLed: every request is served by the stand-in (its "translated" counter grows);
#  - kvsplice started again: routed again.
# Where the stand-in runs first (BPF_F_PREORDER at the root, BPF_F_BEFORE at kvsplice's own cgroup
# attached after it, or at a descendant of kvsplice's cgroup), connects reach kvsplice already
# translated: kvsplice says so (kvsplice_bpf_connect4_position 2, a warning) and routes them only
# with --intercept-endpoints. A stand-in attached exclusively (PROG_ATTACH without flags, as Cilium
# before 1.14) leaves kvsplice no place: it exits saying why and the stand-in serves everything.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}sl$$
source tests/node/lib.sh
tmp=$(mktemp -d /tmp/kvs-socklb.XXXXXX)
slb=$KVS_ROOT/build/tests/node/socklb
slb_pins=$PIN_DIR-socklb
cleanup() {
	kvs_stop_kvsplice KILL
	"$slb" detach --pin-dir "$slb_pins" --cgroup "$CG_TOP" >/dev/null 2>&1
	"$slb" detach --pin-dir "$slb_pins" --cgroup "$CG_CLIENTS" >/dev/null 2>&1
	tests/node/down.sh >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

bin=$KVS_ROOT/build/kvsplice
for b in "$bin" "$slb"; do
	[ -x "$b" ] || { skip "kvsplice beside a socket load balancer" "$b is not built"; exit 0; }
done
export KVS_WORKER=testworker
export KVSPLICE_ARGS="--router round-robin"
check "testbed up with 2 workers, no kvsplice yet" tests/node/up.sh --workers 2 --no-kvsplice ||
	exit 1
metric() {
	kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
slb_stat() { "$slb" stats --pin-dir "$slb_pins" 2>/dev/null | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
service="$SVC_IP:$SVC_PORT=$(worker_ip 1):$SVC_PORT,$(worker_ip 2):$SVC_PORT"
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

# one_case NAME KVS_AT SLB_AT SLB_MODE WHEN EXPECT POS: the stand-in attached at SLB_AT with
# SLB_MODE before or after (WHEN) kvsplice attaches at KVS_AT. EXPECT: first (kvsplice's program
# runs first: routed as it is), endpoints (the stand-in runs first: routed with
# --intercept-endpoints, and checked without it too). POS: the kvsplice_bpf_connect4_position
# kvsplice reports (the kernel's list at its own cgroup: a program at a descendant cgroup, which
# runs before it, is not in that list).
one_case() {
	local name=$1 kvs_at=$2 slb_at=$3 mode=$4 when=$5 expect=$6 want_pos=$7 args=$KVSPLICE_ARGS
	local q0 r0 t0 n pos
	[ "$expect" = endpoints ] && args+=" --intercept-endpoints"
	if [ "$when" = before ]; then
		"$slb" attach --cgroup "$slb_at" --pin-dir "$slb_pins" --mode "$mode" --service "$service" ||
			{ ok 1 "$name: stand-in attached"; return; }
	fi
	if ! KVSPLICE_AT=$kvs_at KVSPLICE_ARGS=$args kvs_start_kvsplice; then
		ok 1 "$name: kvsplice started"
		return
	fi
	if [ "$when" = after ]; then
		"$slb" attach --cgroup "$slb_at" --pin-dir "$slb_pins" --mode "$mode" --service "$service" ||
			{ ok 1 "$name: stand-in attached"; return; }
	fi
	pos=$(metric kvsplice_bpf_connect4_position)
	expect_eq "$name: kvsplice_bpf_connect4_position" "$want_pos" "$pos"
	q0=$(metric kvsplice_requests_total) r0=$(kvs_bpf_stat rewritten) t0=$(slb_stat translated)
	n=$(requests 6)
	expect_eq "$name: routed by kvsplice (6 of 6 answered, 6 requests counted, 6 rewritten)" \
		"6 6 6" "$n $(($(metric kvsplice_requests_total) - q0)) $(($(kvs_bpf_stat rewritten) - r0))"
	if [ "$expect" = endpoints ]; then
		ok $(($(kvs_bpf_stat endpoint) >= 6 && $(slb_stat translated) - t0 >= 6 ? 0 : 1)) \
			"$name: each connect arrived translated to a pod, matched as the Service's endpoint"
	else
		expect_eq "$name: the stand-in never saw the ClusterIP" 0 $(($(slb_stat translated) - t0))
	fi
	expect_eq "$name: getpeername() shows the ClusterIP" "$SVC_IP:$SVC_PORT" "$(peer)"
	kvs_stop_kvsplice KILL
	t0=$(slb_stat translated)
	n=$(requests 6)
	expect_eq "$name: kvsplice killed: 6 of 6 served by the stand-in (fail-open)" "6 6" \
		"$n $(($(slb_stat translated) - t0))"
	expect_eq "$name: ... getpeername() shows the ClusterIP (the stand-in's)" \
		"$SVC_IP:$SVC_PORT" "$(peer)"
	if KVSPLICE_AT=$kvs_at KVSPLICE_ARGS=$args kvs_start_kvsplice; then
		q0=$(metric kvsplice_requests_total)
		n=$(requests 6)
		expect_eq "$name: kvsplice back: routed again" "6 6" \
			"$n $(($(metric kvsplice_requests_total) - q0))"
	else
		ok 1 "$name: kvsplice started again"
	fi
	if [ "$expect" = endpoints ]; then
		# the same order without the opt-in: kvsplice sees pods, says so, routes nothing (a
		# SIGKILL keeps the pinned links, and the restart updates them in place: same order)
		kvs_stop_kvsplice KILL
		: >"$(kvs_log_file)"
		KVSPLICE_AT=$kvs_at kvs_start_kvsplice
		q0=$(metric kvsplice_requests_total)
		n=$(requests 4)
		expect_eq "$name: without --intercept-endpoints: 4 of 4 served, none by kvsplice" "4 0" \
			"$n $(($(metric kvsplice_requests_total) - q0))"
		if [ "$want_pos" = 2 ]; then
			ok "$(grep -q 'runs before kvsplice.s program' "$(kvs_log_file)"; echo $?)" \
				"$name: ... and kvsplice's log says another program runs first"
		fi
	fi
	kvs_stop_kvsplice TERM
	"$bin" detach --pin-dir "$PIN_DIR" >/dev/null 2>&1
	"$slb" detach --pin-dir "$slb_pins" --cgroup "$slb_at" >/dev/null 2>&1
	expect_eq "$name: nothing left attached at either cgroup" 0 \
		"$( (bpftool cgroup show "$CG_TOP"; bpftool cgroup show "$CG_CLIENTS") 2>/dev/null | grep -c connect4)"
}

# The kernel's ordering of cgroup programs (BPF_F_BEFORE) is needed where both attach at one
# cgroup; the stand-in asks for it in mode "first": probe it once.
probe=$PIN_DIR-probe
if "$slb" attach --cgroup "$CG_CLIENTS" --pin-dir "$probe" --mode first --service "$service" 2>/dev/null; then
	ordering=1
else
	ordering=0
fi
"$slb" detach --pin-dir "$probe" >/dev/null 2>&1

one_case "stand-in at the root, attached first" "$CG_CLIENTS" "$CG_TOP" link before first 1
one_case "stand-in at the root, attached after kvsplice" "$CG_CLIENTS" "$CG_TOP" link after first 1
if [ "$ordering" = 1 ]; then
	one_case "both at the pods' cgroup, stand-in first" "$CG_CLIENTS" "$CG_CLIENTS" link before first 1
	one_case "both at the root, stand-in first" "$CG_TOP" "$CG_TOP" link before first 1
else
	skip "both at one cgroup, stand-in first" "this kernel cannot order cgroup programs (BPF_F_BEFORE)"
fi
one_case "both at the pods' cgroup, stand-in after" "$CG_CLIENTS" "$CG_CLIENTS" link after first 1
one_case "both at the root, stand-in after" "$CG_TOP" "$CG_TOP" link after first 1
one_case "stand-in at the root with BPF_F_PREORDER" "$CG_CLIENTS" "$CG_TOP" preorder before endpoints 2
one_case "stand-in at the pods' cgroup, kvsplice at the root" "$CG_TOP" "$CG_CLIENTS" link before endpoints 1
if [ "$ordering" = 1 ]; then
	one_case "stand-in put itself first (BPF_F_BEFORE) after kvsplice" "$CG_TOP" "$CG_TOP" first after endpoints 2
else
	skip "stand-in put itself first after kvsplice" "this kernel cannot order cgroup programs"
fi

# Exclusive (PROG_ATTACH without flags, Cilium before 1.14): no other program may attach there or
# below. kvsplice exits saying why; the stand-in serves the Service.
"$slb" attach --cgroup "$CG_TOP" --pin-dir "$slb_pins" --mode exclusive --service "$service"
ok $? "exclusive stand-in attached at the root"
: >"$(kvs_log_file)"
KVSPLICE_AT=$CG_CLIENTS kvs_start_kvsplice 2>/dev/null
ok $((! $?)) "exclusive: kvsplice cannot attach below it and does not intercept"
ok "$(grep -q 'without BPF_F_ALLOW_MULTI forbids any other' "$(kvs_log_file)"; echo $?)" \
	"exclusive: its log says why"
kvs_stop_kvsplice KILL
t0=$(slb_stat translated)
expect_eq "exclusive: 4 of 4 requests served by the stand-in" "4 4" \
	"$(requests 4) $(($(slb_stat translated) - t0))"
"$slb" detach --pin-dir "$slb_pins" --cgroup "$CG_TOP"
ok $? "exclusive stand-in detached"
"$bin" detach --pin-dir "$PIN_DIR" >/dev/null 2>&1
tap_done
