#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Least privilege, shown rather than assumed: the real daemon runs in the netns node
# testbed with exactly the capabilities deploy/daemonset.yaml adds to the kvsplice container (read
# from the manifest), every other one out of its bounding set, as uid 0 with no_new_privs (the
# container's allowPrivilegeEscalation: false), the cgroup2 directory it attaches to mounted
# read-only (a mount namespace of its own), with the manifest's --node-address (the testbed's
# node namespace has no proxy address of its own here). With them it puts the address on the
# node, loads and attaches the BPF programs, pins, registers its listener, serves a client
# through the ClusterIP; a restart after a crash takes the pinned links over in place; SIGTERM
# leaves nothing behind. Without any one of them it does not intercept (it says which capability
# is missing and stays out of the way, not ready): each is needed.
# Needs root, bpffs and cgroup v2 (the testbed's requirements); skipped otherwise.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}dc$$
source tests/node/lib.sh
build=${KVS_BUILD:-build}
bin=$KVS_ROOT/$build/kvsplice
if [ "$(id -u)" -ne 0 ] || [ ! -x "$bin" ] || ! command -v setpriv >/dev/null; then
	skip "the DaemonSet's capabilities against the real daemon" "needs root, setpriv and $bin"
	exit 0
fi
tmp=$(mktemp -d /tmp/kvs-caps.XXXXXX)
trap 'tests/node/down.sh >/dev/null 2>&1; rm -rf "$tmp"' EXIT

caps=$(python3 - <<'PY'
import yaml
for d in yaml.safe_load_all(open("deploy/daemonset.yaml")):
    if d and d["kind"] == "DaemonSet":
        c = [x for x in d["spec"]["template"]["spec"]["containers"] if x["name"] == "kvsplice"][0]
        print(" ".join(x.lower() for x in c["securityContext"]["capabilities"]["add"]))
PY
)
[ -n "$caps" ]
ok $? "the DaemonSet adds capabilities: $caps" || exit 1
node_address=$(python3 - <<'PY'
import yaml
for d in yaml.safe_load_all(open("deploy/daemonset.yaml")):
    if d and d["kind"] == "DaemonSet":
        c = [x for x in d["spec"]["template"]["spec"]["containers"] if x["name"] == "kvsplice"][0]
        print([a for a in c["args"] if a.startswith("--node-address=")][0])
PY
)
ok $? "the DaemonSet's kvsplice sets the node address up: $node_address" || exit 1

mkdir "$tmp/cgroup2"
# wrapper NAME CAP...: a program taking kvsplice's flags that runs it as the DaemonSet does: in a
# mount namespace of its own where the --cgroup directory is a read-only bind mount (the
# DaemonSet's readOnly cgroup2 hostPath), with only CAP... and no_new_privs.
wrapper() {
	local name=$1 set="-all"
	shift
	for c in "$@"; do set+=",+$c"; done
	cat >"$tmp/$name" <<EOF
#!/bin/sh
prev=""
for a; do
	shift
	if [ "\$prev" = --cgroup ]; then cg=\$a; a=$tmp/cgroup2; fi
	set -- "\$@" "\$a"
	prev=\$a
done
exec unshare -m --propagation private sh -c 'mount --bind "\$0" $tmp/cgroup2 &&
	mount -o remount,bind,ro $tmp/cgroup2 &&
	exec setpriv --bounding-set=$set --inh-caps=-all --no-new-privs -- $bin "\$@"' "\$cg" "\$@"
EOF
	chmod +x "$tmp/$name"
	echo "$tmp/$name"
}
# shellcheck disable=SC2086
export KVSPLICE=$(wrapper manifest $caps)
export KVS_WORKER=testworker KVSPLICE_ARGS="--router round-robin --no-events $node_address"
check "testbed up" tests/node/up.sh --workers 1 --no-kvsplice || exit 1
ip -n "$NS_NODE" addr del "$PROXY_IP/32" dev lo # kvsplice puts it there
proxy_addr() { ip -n "$NS_NODE" -o addr show | grep -c " $PROXY_IP/"; }
check "kvsplice started with only [$caps] and no_new_privs (listener registered)" \
	kvs_start_kvsplice || exit 1
expect_eq "it put the proxy address on the node" 1 "$(proxy_addr)"
pid=$(cat "$(kvs_pid_file)")
expect_eq "kvsplice's effective capabilities are exactly those" \
	"$(setpriv --bounding-set=-all$(printf ',+%s' $caps) --inh-caps=-all --no-new-privs -- \
		grep CapEff /proc/self/status | awk '{print $2}')" \
	"$(awk '/^CapEff/ { print $2 }' "/proc/$pid/status")"
expect_eq "its --cgroup directory is a read-only mount" ro \
	"$(awk -v m="$tmp/cgroup2" '$5 == m { split($6, o, ","); print o[1] }' "/proc/$pid/mountinfo")"
r0=$(kvs_bpf_stat rewritten)
out=$(tests/node/client.sh curl -s -m 10 -o /dev/null -w '%{http_code}' "http://$SVC_IP:$SVC_PORT/v1/models")
expect_eq "a client pod's request to the ClusterIP is answered" 200 "$out"
expect_eq "... through kvsplice (BPF rewrote the connect)" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
link=$(kvs_link_id link_connect4)
kvs_stop_kvsplice KILL
check "restarted with the same capabilities after SIGKILL" kvs_start_kvsplice
grep -q "keeper: kvsplice died" "$(kvs_log_file)" &&
	grep -q "taking over 1 listening socket(s)" "$(kvs_log_file)"
ok $? "its keeper took the listener over at the SIGKILL and handed it to the restarted one"
expect_eq "the restart took the pinned connect4 link over in place" "$link" "$(kvs_link_id link_connect4)"
bad=$(grep -ciE 'not permitted|EPERM|Failed to bump' "$(kvs_log_file)")
expect_eq "no permission error in kvsplice's log" 0 "$bad"
kvs_stop_kvsplice TERM
ok $([ "$(proxy_addr)" = 0 ] && [ ! -e "$PIN_DIR" ] && echo 0 || echo 1) \
	"SIGTERM: the address and the pinned state removed with these capabilities ($(ls "$PIN_DIR" 2>&1 | head -n 1))"

for c in $caps; do
	rest=$(tr ' ' '\n' <<<"$caps" | grep -vx "$c" | tr '\n' ' ')
	# shellcheck disable=SC2086
	KVSPLICE=$(wrapper "without-$c" $rest)
	: >"$(kvs_log_file)"
	KVSPLICE_WAIT=admin kvs_start_kvsplice >/dev/null 2>&1
	ready=$(kvs_in "$NS_NODE" curl -s -m 5 -w '%{http_code}' "http://$ADMIN_ADDR/readyz")
	kvs_intercepting
	icp=$?
	kvs_stop_kvsplice TERM
	ok $([ "$icp" -ne 0 ] && [ "$(proxy_addr)" = 0 ] &&
		grep -q "capability CAP_${c^^} missing" "$(kvs_log_file)" &&
		[[ $ready == "not ready: capability CAP_${c^^} missing"*503 ]] && echo 0 || echo 1) \
		"without $c (only: ${rest:-none}) kvsplice does not intercept, sets nothing up, and says: $(grep -m1 -o 'capability CAP_[A-Z_]* missing' "$(kvs_log_file)") (/readyz ${ready: -3})"
done
tap_done
