#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kubernetes discovery in the node testbed: kvsplice --kubernetes (BPF on) follows the test API
# server (tests/e2e/k8s_api.py, run inside the node's namespace) and each change reaches the BPF
# selection and the routing, with a request from the client pod served after each: the Service
# opted in (intercepted, served by its one endpoint), an endpoint added (both serve), one
# terminating (kept: 2 endpoints; still served), one removed (only the other serves), the
# annotation removed (no longer intercepted: the kube-proxy way), added back (intercepted again);
# and across a restart: the annotation removed while kvsplice is down, the new
# process drops the stale BPF entry once it has listed, and until then does not intercept.
# Needs root and kvsplice with --kubernetes; skipped otherwise.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}tk8$$
source tests/node/lib.sh
build=${KVS_BUILD:-build}
bin=$KVS_ROOT/$build/kvsplice
if [ "$(id -u)" -ne 0 ] || ! "$bin" --help 2>/dev/null | grep -q -- '--kubernetes'; then
	skip "kvsplice --kubernetes in the node testbed" "needs root and $bin with --kubernetes"
	exit 0
fi
tmp=$(mktemp -d /tmp/kvs-k8snode.XXXXXX)
api_pid=""
cleanup() {
	tests/node/down.sh >/dev/null 2>&1
	[ -n "$api_pid" ] && kill "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

export KVS_WORKER=testworker KVSPLICE_ARGS="--router round-robin --no-events --scrape-interval 0"
check "testbed up: 3 workers, no kvsplice yet" tests/node/up.sh --workers 3 --no-kvsplice || exit 1

# the test API server inside the node's namespace, where kvsplice runs
mkdir "$tmp/certs"
printf 'tok\n' >"$tmp/token"
kvs_in "$NS_NODE" python3 tests/e2e/k8s_api.py --dir "$tmp/certs" --token tok \
	--port-file "$tmp/ports" >"$tmp/api.log" 2>&1 &
api_pid=$!
for _ in $(seq 150); do [ -s "$tmp/ports" ] && break; sleep 0.1; done
read -r aport cport <"$tmp/ports" 2>/dev/null
[ -n "${cport:-}" ]
ok $? "test API server up in $NS_NODE" || exit 1
ctl() { kvs_in "$NS_NODE" curl -sf -m 10 -X POST "http://127.0.0.1:$cport$1" -d "$2" >/dev/null; }
svc() { # svc ANNOTATIONS_JSON
	ctl /service "{\"namespace\":\"ml\",\"name\":\"qwen\",\"cluster_ip\":\"$SVC_IP\",\"ports\":[{\"name\":\"http\",\"port\":$SVC_PORT}],\"annotations\":$1}"
}
slice() { # slice ENDPOINT... (N or N:terminating)
	local eps="" e
	for e in "$@"; do
		eps+="${eps:+,}{\"ip\":\"$(worker_ip "${e%%:*}")\",\"pod\":\"w${e%%:*}\""
		[[ $e == *:terminating ]] && eps+=",\"ready\":false,\"serving\":true,\"terminating\":true"
		eps+="}"
	done
	ctl /slice "{\"namespace\":\"ml\",\"name\":\"qwen-a\",\"service\":\"qwen\",\"ports\":[{\"name\":\"http\",\"port\":8000}],\"endpoints\":[$eps]}"
}
svc '{"kvsplice.io/route":"round-robin"}'
slice 1

# kvsplice as the testbed starts it, with the Kubernetes source instead of --services
cat >"$tmp/kvsplice" <<EOF
#!/bin/sh
skip=""
for a; do
	shift
	if [ -n "\$skip" ]; then skip=""; continue; fi
	if [ "\$a" = --services ]; then skip=1; continue; fi
	set -- "\$@" "\$a"
done
exec $bin --kubernetes --k8s-api https://127.0.0.1:$aport --k8s-token $tmp/token \\
	--k8s-ca $tmp/certs/ca.crt "\$@"
EOF
chmod +x "$tmp/kvsplice"
export KVSPLICE=$tmp/kvsplice
check "kvsplice --kubernetes started, its listener registered after the first lists" \
	kvs_start_kvsplice || exit 1

metric() {
	kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
wait_metric() { # wait_metric NAME VALUE
	for _ in $(seq 100); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done
	return 1
}
# served N: N requests from the client pod; prints the workers that answered (sorted, unique) and
# how many connects BPF rewrote meanwhile
served() {
	local r0 who
	r0=$(kvs_bpf_stat rewritten)
	who=$(for _ in $(seq "$1"); do
		tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/v1/models" |
			tr -d '\r' | awk 'tolower($1) == "x-kvsim-worker:" { print $2 }'
	done | sort -u | tr '\n' ' ')
	echo "${who}rewritten=$(($(kvs_bpf_stat rewritten) - r0))"
}

wait_metric kvsplice_services 1 && wait_metric kvsplice_endpoints 1
ok $? "the opted-in Service is applied with its one endpoint"
expect_eq "requests through kvsplice reach w1" "w1 rewritten=4" "$(served 4)"

slice 1 2
wait_metric kvsplice_endpoints 2
ok $? "endpoint added: 2 endpoints"
expect_eq "requests through kvsplice reach w1 and w2" "w1 w2 rewritten=6" "$(served 6)"

slice 1:terminating 2
sleep 0.5
expect_eq "endpoint w1 terminating: kept (2 endpoints)" 2 "$(metric kvsplice_endpoints)"
expect_eq "new requests go to w2 only (w1 finishes what it has)" "w2 rewritten=4" "$(served 4)"

slice 2
wait_metric kvsplice_endpoints 1
ok $? "endpoint removed: 1 endpoint"
expect_eq "requests through kvsplice reach w2 only" "w2 rewritten=6" "$(served 6)"

svc '{}'
wait_metric kvsplice_services 0
ok $? "annotation removed: no Service"
out=$(served 6)
[[ $out == *rewritten=0 && $out == w* ]]
ok $? "the ClusterIP is no longer intercepted and still served the kube-proxy way ($out)"

svc '{"kvsplice.io/route":"round-robin"}'
wait_metric kvsplice_services 1
ok $? "annotation added back"
expect_eq "intercepted again" "w2 rewritten=3" "$(served 3)"

# --- restart: the annotation removed while kvsplice is down ---------------------------------------
kvs_stop_kvsplice KILL
svc '{}'
ctl /config '{"delay":2}'
kvs_start_kvsplice >/dev/null 2>&1 &
starter=$!
sleep 1
a0=$(kvs_bpf_stat proxy_absent) n0=$(kvs_bpf_stat not_service)
out=$(served 2)
ctl /config '{"delay":0}'
[[ $out == *rewritten=0 && $out == w* ]]
ok $? "restarted kvsplice, not yet listed (slow API server): served the kube-proxy way ($out)"
expect_eq "... the stale entry still pinned, no listener registered (BPF proxy_absent +2)" \
	"$((a0 + 2)) $n0" "$(kvs_bpf_stat proxy_absent) $(kvs_bpf_stat not_service)"
wait "$starter"
ok $? "restarted kvsplice registered its listener after the first lists"
wait_metric kvsplice_services 0
ok $? "the restarted kvsplice serves no Service"
n0=$(kvs_bpf_stat not_service)
out=$(served 4)
[[ $out == *rewritten=0 && $out == w* ]]
ok $? "after the lists the stale BPF entry is gone: the kube-proxy way ($out)"
expect_eq "... BPF found no Service for the ClusterIP (not_service +4)" $((n0 + 4)) \
	"$(kvs_bpf_stat not_service)"
grep -q "Service ml/qwen" "$(kvs_log_file)"
ok $? "kvsplice's log names the Service it served"
tap_done
