#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The BPF interception on its own, in the netns node: build/tests/node/kvstub stands in for the
# daemon (it loads and attaches through bpfctl and answers intercepted connections itself with
# what BPF told it), so a failure here is a BPF or bpfctl failure, never a proxy one.
# Shows: cross-namespace rewrite of the Service to the proxy address, the original destination
# found for the accepted peer, getpeername() showing the ClusterIP, only the client cgroup and
# only the selected Service intercepted, fail-open with no refused connection across a SIGKILL,
# a restarted process taking over the pinned links and maps, SIGTERM and detach falling open,
# and down.sh leaving nothing behind.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}ti$$
source tests/node/lib.sh
trap 'tests/node/down.sh >/dev/null 2>&1; rm -f "$tmp"*' EXIT
tmp=$(mktemp /tmp/kvs-intercept.XXXXXX)

export KVSPLICE=$KVS_ROOT/build/tests/node/kvstub KVS_WORKER=testworker
[ -x "$KVSPLICE" ] || { echo "not ok - $KVSPLICE is not built (make tests)"; exit 1; }
check "testbed up with 2 workers and kvstub" tests/node/up.sh --workers 2 --kvsplice || exit 1
stat() { kvs_bpf_stat "$1"; }
hdr() { tr -d '\r' | awk -v h="$1:" 'tolower($1) == h { print $2 }'; }

# 1. rewrite + original destination + getpeername
out=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/v1/models")
expect_eq "curl to the ClusterIP answered by the proxy, original destination found" \
	"$SVC_IP:$SVC_PORT" "$(hdr x-kvs-stub-origdst <<<"$out")"
expect_eq "the proxy sees the client pod's own address as peer" \
	"$CLIENT_IP" "$(hdr x-kvs-stub-peer <<<"$out" | cut -d: -f1)"
peer=$(tests/node/client.sh python3 -c "
import socket
s = socket.create_connection(('$SVC_IP', $SVC_PORT), timeout=5)
print('%s:%d' % s.getpeername())")
expect_eq "getpeername() in the client shows the ClusterIP:port" "$SVC_IP:$SVC_PORT" "$peer"
ok $(([ "$(stat rewritten)" -ge 2 ] && [ "$(stat origdst_stored)" -ge 2 ] &&
	[ "$(stat peer_restored)" -ge 1 ]) && echo 0 || echo 1) \
	"counters: rewritten $(stat rewritten), origdst_stored $(stat origdst_stored), peer_restored $(stat peer_restored)"

# 2. what must not be intercepted
n0=$(stat not_service)
out=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$(worker_ip 1):$SVC_PORT/health")
expect_eq "a pod IP (not a selected Service) is reached directly" "w1" "$(hdr x-kvsim-worker <<<"$out")"
ok $(($(stat not_service) > n0 ? 0 : 1)) "counted not_service"
r0=$(stat rewritten)
out=$(kvs_in "$NS_CLIENT" curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health")
ok $([[ $(hdr x-kvsim-worker <<<"$out") == w[12] ]] && [ "$(stat rewritten)" = "$r0" ] && echo 0 || echo 1) \
	"a process outside the client cgroup goes the DNAT way, untouched"

# 3. SIGKILL while a client connects in a loop: no failed connection, then taken back
link0=$(kvs_link_id link_connect4)
rm -f "$tmp.stop"
tests/node/client.sh python3 tests/node/connloop.py --seconds 20 --stop-file "$tmp.stop" >"$tmp.loop" &
loop=$!
kvs_wait_stat rewritten $(($(kvs_bpf_stat rewritten) + 50))
ok $? "the loop client is being served through the proxy"
r_before=$(stat rewritten)
a_before=$(stat proxy_absent)
kvs_stop_kvsplice KILL
kvs_intercepting
ok $((! $?)) "the kernel dropped the dead proxy's listener: interception is off"
sleep 0.8
r_dead=$(stat rewritten)
sleep 0.3
ok $(([ "$(stat rewritten)" = "$r_dead" ] && [ "$(stat proxy_absent)" -gt "$a_before" ]) && echo 0 || echo 1) \
	"while the proxy is dead connects go the DNAT way (proxy_absent $a_before -> $(stat proxy_absent))"
check "kvstub restarted" kvs_start_kvsplice
sleep 0.8
touch "$tmp.stop"
wait "$loop"
res=$(cat "$tmp.loop")
echo "# loop: $res"
declare -A L=()
json_load L <<<"$res"
expect_eq "0 connects refused or timed out across the SIGKILL and the restart" 0 "${L[connect_failed]:-0}"
# Reset with the dying process: the connection it was serving, and at most one more that the
# client opened while the process's files were being closed (the listener leaves the sockmap only
# when its own file is released, so a connect in that instant is still handed to it).
ok $((${L[lost]:-0} <= 2 ? 0 : 1)) \
	"at most the served connection and one opened during the teardown are reset (${L[lost]:-0})"
ok $((${L[by.kvstub]:-0} > 0 && ${L[by.w1]:-0} + ${L[by.w2]:-0} > 0 ? 0 : 1)) \
	"served by the proxy, then by the workers (DNAT), during the loop"
expect_eq "getpeername() showed the ClusterIP on every connection" 0 "${L[peer_mismatch]:-0}"
ok $(($(stat rewritten) > r_before ? 0 : 1)) "the restarted process intercepts again; counters kept ($r_before -> $(stat rewritten))"
expect_eq "the pinned connect4 link was taken over in place (same link id)" "$link0" "$(kvs_link_id link_connect4)"
grep -q "took over" "$RUN_DIR/kvsplice.log"
ok $? "the restart logged the takeover of the pinned links"

# 4. SIGTERM: listener closed, interception off
kvs_stop_kvsplice TERM
out=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health")
ok $([[ $(hdr x-kvsim-worker <<<"$out") == w[12] ]] && ! kvs_intercepting && echo 0 || echo 1) \
	"after SIGTERM the Service is served by DNAT"

# 5. detach removes the programs even while a proxy is listening
kvs_start_kvsplice >/dev/null
"$KVSPLICE" detach --pin-dir "$PIN_DIR"
ok $? "detach"
out=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health")
ok $([[ $(hdr x-kvsim-worker <<<"$out") == w[12] ]] && [ ! -e "$PIN_DIR" ] && echo 0 || echo 1) \
	"after detach nothing is pinned and the Service is served by DNAT"

# 6. down.sh leaves nothing
tests/node/down.sh
ok $? "down.sh"
left=$(ip netns list | grep -c -- "$KVS_SFX\b")
ok $(([ "$left" = 0 ] && [ ! -e "$CG_TOP" ] && [ ! -e "$RUN_DIR" ] && [ ! -e "$PIN_DIR" ]) && echo 0 || echo 1) \
	"no namespace, cgroup, pin or run dir left"
tap_done
