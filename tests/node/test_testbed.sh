#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The netns node testbed itself, without kvsplice: the Service behaves as under kube-proxy (a
# random worker per connection), pods are isolated (no route out), the machine's own namespace is
# untouched, client.sh runs in the client cgroup with bpffs and cgroup2 visible, two testbeds with
# different KVS_TESTBED_ID coexist, and a failed up.sh leaves nothing behind.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
base=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}tt$$
export KVS_TESTBED_ID=$base
source tests/node/lib.sh
trap 'tests/node/down.sh >/dev/null 2>&1; KVS_TESTBED_ID=$base-b tests/node/down.sh >/dev/null 2>&1; KVS_TESTBED_ID=$base-c tests/node/down.sh >/dev/null 2>&1' EXIT
export KVS_WORKER=testworker

host_before=$(ip -o addr; ip route; ip rule)
check "up.sh --workers 3 --no-kvsplice" tests/node/up.sh --workers 3 --no-kvsplice || exit 1
expect_eq "the machine's own addresses, routes and rules are unchanged" "$host_before" "$(ip -o addr; ip route; ip rule)"
for ns in "$NS_NODE" "$NS_CLIENT" "$(ns_worker 1)" "$(ns_worker 3)"; do
	[ -e "/run/netns/$ns" ] || echo "missing $ns"
done >"/tmp/kvs-tt$$" 2>&1
expect_eq "namespaces $NS_NODE, $NS_CLIENT, $(ns_worker 1)..$(ns_worker 3) exist" "" "$(cat "/tmp/kvs-tt$$")"
rm -f "/tmp/kvs-tt$$"

seen=$(tests/node/client.sh python3 - "$SVC_IP" "$SVC_PORT" <<'EOF' | sort | uniq -c
import http.client, sys
for i in range(30):  # a new connection each time: DNAT picks per connection
    c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)
    c.request("GET", "/health")
    r = c.getresponse()
    r.read()
    print(r.getheader("x-kvsim-worker"))
    c.close()
EOF
)
echo "# DNAT spread over 30 connections: $(echo $seen)"
ok $(($(wc -l <<<"$seen") >= 2 && $(awk '{ s += $1 } END { print s }' <<<"$seen") == 30 ? 0 : 1)) \
	"30 connects to the Service all answered, spread over several workers (random DNAT)"
tests/node/client.sh python3 -c "
import socket
s = socket.create_connection(('$SVC_IP', $SVC_PORT), timeout=5)
assert s.getpeername() == ('$SVC_IP', $SVC_PORT), s.getpeername()"
ok $? "without kvsplice getpeername() shows the ClusterIP (DNAT is reversed on the way back)"

code=$(kvs_in "$NS_NODE" curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$SVC_IP:$SVC_PORT/health")
expect_eq "a process of the node itself (hostNetwork) reaches the Service through DNAT" 200 "$code"

tests/node/client.sh ip route get 192.0.2.1 >/dev/null 2>&1
ok $((! $?)) "the client pod has no route out"
kvs_in "$NS_NODE" ip route get 192.0.2.1 >/dev/null 2>&1
ok $((! $?)) "the node namespace has no route out"
expect_eq "client.sh runs in the client cgroup" "0::${CG_CLIENTS#"$CG2_ROOT"}" \
	"$(tests/node/client.sh cat /proc/self/cgroup | grep '^0::')"
tests/node/client.sh sh -c "mount | grep -q ' type bpf ' && test -d '$CG_CLIENTS'"
ok $? "client.sh keeps bpffs and cgroup2 visible"

# a second testbed with another id, side by side
KVS_TESTBED_ID=$base-b tests/node/up.sh --workers 1 --no-kvsplice >/dev/null 2>&1
ok $? "a second testbed with another KVS_TESTBED_ID comes up"
w=$(KVS_TESTBED_ID=$base-b tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health" |
	tr -d '\r' | awk 'tolower($1) == "x-kvsim-worker:" { print $2 }')
expect_eq "its client reaches its own single worker" "w1" "$w"
KVS_TESTBED_ID=$base-b tests/node/down.sh
ok $? "and goes down again"
curl_ok=$(tests/node/client.sh curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$SVC_IP:$SVC_PORT/health")
expect_eq "the first testbed is unaffected" 200 "$curl_ok"

# a failed up.sh cleans up after itself
KVS_TESTBED_ID=$base-c tests/node/up.sh --workers 1 --no-kvsplice --worker-cmd "false" >/dev/null 2>&1
ok $((! $? == 0 ? 0 : 1)) "up.sh fails when a worker does not start"
left=$(ip netns list | grep -c -- "$base-c" ; ls -d "$CG2_ROOT/kvsplice-test-$base-c" /run/kvsplice-test-$base-c 2>/dev/null | wc -l)
expect_eq "and leaves no namespace, cgroup or run dir" "0 0" "$(echo $left)"

tests/node/down.sh
ok $? "down.sh"
expect_eq "nothing left" "0" "$(ip netns list | grep -c -- "$base\b"; ls -d "$CG_TOP" "$RUN_DIR" 2>/dev/null)"
tap_done
