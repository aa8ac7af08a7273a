#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Node setup done by the daemon and undone on exit (nothing left behind),
# with the real daemon in the netns node testbed, whose node namespace has no proxy address of its
# own here: kvsplice --node-address puts it there.
#  - started: the address is on the node (on kvsplice0, or lo on a kernel without dummy devices)
#    and a client pod's request to the ClusterIP goes through it;
#  - SIGTERM: the address, the device and the pinned BPF state are gone; the Service is served
#    the kube-proxy way;
#  - SIGKILL: they stay; the next start adopts them (no error) and its SIGTERM removes them;
#  - --keep-on-exit keeps them; an address that was there before (not kvsplice's) is kept; a
#    device a killed kvsplice created (its alias) is adopted and removed;
#  - fail-open: a --pin-dir not on bpffs, a --cgroup not cgroup v2: one clear log line each, the
#    process stays up, /readyz 503 says why, kvsplice_node_ready 0, nothing set up, the Service
#    served the kube-proxy way.
# Everything happens inside the testbed's namespaces (removed on exit, also on failure).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}ns$$
source tests/node/lib.sh
tmp=$(mktemp -d /tmp/kvs-nodesetup.XXXXXX)
trap 'tests/node/down.sh >/dev/null 2>&1; rm -rf "$tmp"' EXIT

bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice}
if [ "$(id -u)" -ne 0 ] || [ ! -x "$bin" ]; then
	skip "node setup by the daemon" "needs root and $bin"
	exit 0
fi
export KVS_WORKER=testworker
base_args="--router round-robin --no-events --no-tokenizer"
export KVSPLICE_ARGS="$base_args --node-address $PROXY_IP/32"
check "testbed up with 1 worker, no kvsplice yet" tests/node/up.sh --workers 1 --no-kvsplice || exit 1
# The testbed puts the proxy address on the node's lo; here kvsplice must do it.
ip -n "$NS_NODE" addr del "$PROXY_IP/32" dev lo
log=$(kvs_log_file)

metric() {
	kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
# "DEV LABEL" of each place the proxy address is on in the node namespace ("" when none)
node_addr() {
	ip -n "$NS_NODE" -j addr show | python3 -c '
import json, sys
print(" ".join("%s:%s" % (l["ifname"], a.get("label", "")) for l in json.load(sys.stdin)
               for a in l.get("addr_info", []) if a.get("local") == sys.argv[1]))' "$PROXY_IP"
}
has_dev() { ip -n "$NS_NODE" link show "$1" >/dev/null 2>&1; }
pins() { ls "$PIN_DIR" 2>/dev/null | tr '\n' ' '; }
served() { # who answered a client pod's request to the ClusterIP
	tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health" |
		tr -d '\r' | awk 'tolower($1) == "x-kvsim-worker:" { print $2 }'
}
pid_now() { cat "$(kvs_pid_file)" 2>/dev/null; }

# --- started: the address is there, and interception goes through it ---------------------------
: >"$log"
check "kvsplice --node-address $PROXY_IP/32 started (listener registered)" kvs_start_kvsplice || exit 1
where=$(node_addr)
echo "# proxy address on: $where"
ok $([[ $where == kvsplice0:* || $where == lo:lo:kvs ]] && echo 0 || echo 1) \
	"the address is on the node: on kvsplice0, or on lo labelled lo:kvs (kernel without dummy devices)"
dev=${where%%:*}
r0=$(kvs_bpf_stat rewritten)
expect_eq "a client pod's request to the ClusterIP is answered" w1 "$(served)"
expect_eq "... through kvsplice on that address (BPF rewrote the connect)" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
expect_eq "kvsplice_node_ready 1" 1 "$(metric kvsplice_node_ready)"
expect_eq "/readyz 200" 200 "$(kvs_in "$NS_NODE" curl -s -o /dev/null -w '%{http_code}' "http://$ADMIN_ADDR/readyz")"

# --- SIGTERM: nothing left ----------------------------------------------------------------------
kvs_stop_kvsplice TERM
expect_eq "after SIGTERM the address is gone" "" "$(node_addr)"
ok $([ "$dev" = lo ] || ! has_dev kvsplice0 && echo 0 || echo 1) "and kvsplice0, if it made one"
ok $([ ! -e "$PIN_DIR" ] && echo 0 || echo 1) "and the pinned BPF state ($PIN_DIR: $(pins))"
expect_eq "the Service is served the kube-proxy way" w1 "$(served)"
grep -q "removed" "$log"
ok $? "the log says what was removed: $(grep -o 'nodesetup: removed.*' "$log" | head -n 1)"

# --- SIGKILL leaves it; the next start adopts it and its exit removes it -------------------------
check "started again" kvs_start_kvsplice
link=$(kvs_link_id link_connect4)
kvs_stop_kvsplice KILL
expect_eq "after SIGKILL the address stays" "$where" "$(node_addr)"
ok $([ -e "$PIN_DIR/link_connect4" ] && echo 0 || echo 1) "and the pins stay ($(pins))"
: >"$log"
check "the next start succeeds on the address and pins left behind" kvs_start_kvsplice
grep -q "address kvsplice's (adopted)" "$log"
ok $? "it adopted the address: $(grep -o "nodesetup: .*adopted.*" "$log" | head -n 1)"
expect_eq "the address is there once" "$where" "$(node_addr)"
expect_eq "the pinned connect4 link was taken over in place" "$link" "$(kvs_link_id link_connect4)"
r0=$(kvs_bpf_stat rewritten)
expect_eq "served through kvsplice" "w1 $((r0 + 1))" "$(served) $(kvs_bpf_stat rewritten)"
kvs_stop_kvsplice TERM
expect_eq "its SIGTERM removed the address" "" "$(node_addr)"
ok $([ ! -e "$PIN_DIR" ] && echo 0 || echo 1) "and the pins ($(pins))"

# --- --keep-on-exit -----------------------------------------------------------------------------
KVSPLICE_ARGS="$KVSPLICE_ARGS --keep-on-exit" kvs_start_kvsplice
kvs_stop_kvsplice TERM
ok $([ "$(node_addr)" = "$where" ] && [ -e "$PIN_DIR/link_connect4" ] && echo 0 || echo 1) \
	"--keep-on-exit: after SIGTERM the address and the pins stay"
kvs_start_kvsplice
kvs_stop_kvsplice TERM
ok $([ -z "$(node_addr)" ] && [ ! -e "$PIN_DIR" ] && echo 0 || echo 1) \
	"the next kvsplice adopts them and removes them at its exit"

# --- an address that was there before is used and kept -------------------------------------------
ip -n "$NS_NODE" addr add "$PROXY_IP/32" dev lo
: >"$log"
kvs_start_kvsplice
expect_eq "an address on lo that was there before (no kvsplice label) is used" w1 "$(served)"
kvs_stop_kvsplice TERM
expect_eq "and kept at exit" "lo:lo" "$(node_addr)"
grep -q "was there before: left" "$log"
ok $? "the log says so"
ip -n "$NS_NODE" addr del "$PROXY_IP/32" dev lo

# --- a device a killed kvsplice created is adopted and removed -----------------------------------
# (made here as a veth pair carrying kvsplice's alias: the one device kind the testbed's kernel
# surely has; kvsplice itself creates a dummy device)
ip -n "$NS_NODE" link add kvsplice0 type veth peer name kvsp-peer
ip -n "$NS_NODE" link set kvsplice0 alias "kvsplice node-local proxy address"
: >"$log"
KVSPLICE_ARGS="$KVSPLICE_ARGS --node-device kvsplice0" kvs_start_kvsplice
grep -q "on kvsplice0: device kvsplice's (adopted)" "$log"
ok $? "a device with kvsplice's alias is adopted: $(grep -o 'nodesetup: .*on kvsplice0.*' "$log")"
expect_eq "the address is on it" "kvsplice0:kvsplice0" "$(node_addr)"
expect_eq "served through it" w1 "$(served)"
kvs_stop_kvsplice TERM
ok $(! has_dev kvsplice0 && ! has_dev kvsp-peer && echo 0 || echo 1) "its exit removed the device"
expect_eq "and so the address" "" "$(node_addr)"
ip -n "$NS_NODE" link add kvsplice0 type veth peer name kvsp-peer
KVSPLICE_ARGS="$KVSPLICE_ARGS --node-device kvsplice0" kvs_start_kvsplice
kvs_stop_kvsplice TERM
ok $(has_dev kvsplice0 && [ -z "$(node_addr)" ] && echo 0 || echo 1) \
	"a device without the alias is someone else's: kept, only the address kvsplice added removed"
ip -n "$NS_NODE" link del kvsplice0

# --- fail-open: the node lacks something --------------------------------------------------------
mkdir -p "$tmp/notbpf" "$tmp/notcg"
for case in "pin-dir:--pin-dir $tmp/notbpf/pins --cgroup $CG_CLIENTS:is not on a bpf filesystem" \
	"cgroup:--pin-dir $PIN_DIR --cgroup $tmp/notcg:is not a cgroup v2 directory"; do
	name=${case%%:*} rest=${case#*:}
	flags=${rest%%:*} msg=${rest#*:}
	: >"$log"
	KVSPLICE_WAIT=admin KVSPLICE_ARGS="$KVSPLICE_ARGS $flags" kvs_start_kvsplice
	ok $? "--$name on the wrong filesystem: kvsplice keeps running, the admin server answers"
	sleep 0.5
	ok $(kvs_alive "$(pid_now)" && echo 0 || echo 1) "still running 0.5 s later (no crash loop)"
	line=$(grep -m1 "$msg" "$log")
	ok $([ -n "$line" ] && echo 0 || echo 1) "one clear log line: ${line#* * }"
	ready=$(kvs_in "$NS_NODE" curl -s -w '%{http_code}' "http://$ADMIN_ADDR/readyz")
	ok $([[ $ready == "not ready: "*"$msg"*$'\n503' ]] && echo 0 || echo 1) \
		"/readyz 503: ${ready%%$'\n'*}"
	expect_eq "kvsplice_node_ready 0" 0 "$(metric kvsplice_node_ready)"
	ok $([ -z "$(node_addr)" ] && ! kvs_intercepting && echo 0 || echo 1) \
		"nothing set up: no node address, no listener registered"
	expect_eq "the Service is served the kube-proxy way" w1 "$(served)"
	pid=$(pid_now)
	kill -TERM "$pid"
	for _ in $(seq 50); do kvs_alive "$pid" || break; sleep 0.1; done
	wait "$pid" 2>/dev/null
	rc=$?
	ok $(! kvs_alive "$pid" && [ "$rc" = 0 ] && echo 0 || echo 1) "SIGTERM stops it (exit $rc)"
	rm -f "$(kvs_pid_file)"
done
tap_done
