#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The real daemon (build/kvsplice) in the netns node:
#  1. curl http://10.96.0.50:8000/... from the client pod is served through kvsplice (BPF counters
#     and kvsplice's /metrics move) and getpeername() in the client shows 10.96.0.50:8000;
#  3. a client connecting in a loop while kvsplice is SIGKILLed sees 0 failed connects (they go
#     the DNAT way); a restarted kvsplice takes the connections back, reusing the pinned links
#     and maps;
#  4. two requests on one keep-alive connection can go to two different workers.
# Also: the pinned Service selection reconciled at start and a stale entry's connection closed
# kvsplice's own connects never intercepted.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}tk$$
source tests/node/lib.sh
tmp=$(mktemp /tmp/kvs-kvsplice.XXXXXX)
trap 'tests/node/down.sh >/dev/null 2>&1; rm -f "$tmp"*' EXIT

bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice}
if [ ! -x "$bin" ]; then
	skip "interception through kvsplice" "$bin is not built yet"
	exit 0
fi
export KVS_WORKER=testworker # these tests are about the plumbing: the workers only say who they are
# Round-robin: "each request on a keep-alive connection is routed again" must not depend on what a
# KV-aware policy decides for these tiny prompts.
if "$bin" --help 2>&1 | grep -q -- '--router'; then
	export KVSPLICE_ARGS="--router round-robin ${KVSPLICE_ARGS:-}"
fi
check "testbed up with 2 workers and kvsplice" tests/node/up.sh --workers 2 --kvsplice || exit 1
metric() {
	kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
hdr() { tr -d '\r' | awk -v h="$1:" 'tolower($1) == h { print $2 }'; }

# --- 1. served through kvsplice, ClusterIP seen by the client ------------------------------------
r0=$(kvs_bpf_stat rewritten) a0=$(metric kvsplice_connections_accepted_total)
q0=$(metric kvsplice_requests_total)
out=$(tests/node/client.sh curl -s -m 10 -D - -o /dev/null -w 'remote=%{remote_ip}:%{remote_port}\n' \
	"http://$SVC_IP:$SVC_PORT/v1/models")
echo "# curl: $(tr -d '\r' <<<"$out" | grep -iE '^HTTP|x-kvsim|remote=' | tr '\n' ' ')"
ok $([[ $(head -n 1 <<<"$out") == HTTP/1.1\ 200* ]] && [[ $(hdr x-kvsim-worker <<<"$out") == w[12] ]] && echo 0 || echo 1) \
	"curl http://$SVC_IP:$SVC_PORT/v1/models from the client pod: 200 from a worker"
expect_eq "curl's remote address (getpeername) is the ClusterIP" "remote=$SVC_IP:$SVC_PORT" "$(grep remote= <<<"$out")"
expect_eq "BPF: the connect was rewritten to kvsplice" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
expect_eq "kvsplice /metrics: one connection accepted" $((a0 + 1)) "$(metric kvsplice_connections_accepted_total)"
expect_eq "kvsplice /metrics: one request proxied" $((q0 + 1)) "$(metric kvsplice_requests_total)"

# --- 4. keep-alive: each request on one connection routed again ----------------------------------
r0=$(kvs_bpf_stat rewritten) a0=$(metric kvsplice_connections_accepted_total)
res=$(tests/node/client.sh python3 - "$SVC_IP" "$SVC_PORT" <<'EOF'
import http.client, json, sys
c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10)
seen, socks = [], set()
for i in range(8):
    c.request("POST", "/v1/completions", body=json.dumps({"model": "qwen", "prompt": "hi %d" % i}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    seen.append(r.getheader("x-kvsim-worker"))
    socks.add(id(c.sock))
print(json.dumps({"workers": seen, "distinct": len(set(seen) - {None}), "connections": len(socks),
                  "peer": "%s:%d" % c.sock.getpeername()}))
EOF
)
echo "# keep-alive: $res"
declare -A L=()
json_load L <<<"$res"
expect_eq "8 requests went over one client connection" 1 "${L[connections]:-0}"
expect_eq "that connection was intercepted once" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
expect_eq "and accepted once by kvsplice" $((a0 + 1)) "$(metric kvsplice_connections_accepted_total)"
ok $((${L[distinct]:-0} >= 2 ? 0 : 1)) \
	"requests on that one connection reached two different workers"

# --- 3. SIGKILL while a client connects in a loop, then a restart --------------------------------
link0=$(kvs_link_id link_connect4)
pid0=$(cat "$RUN_DIR/kvsplice.pid")
rm -f "$tmp.stop"
tests/node/client.sh python3 tests/node/connloop.py --seconds 30 --stop-file "$tmp.stop" >"$tmp.loop" &
loop=$!
kvs_wait_stat rewritten $(($(kvs_bpf_stat rewritten) + 50))
ok $? "the loop client is being served through the proxy"
r_kill=$(kvs_bpf_stat rewritten) p_kill=$(kvs_bpf_stat proxy_absent)
kvs_stop_kvsplice KILL
kvs_intercepting
ok $((! $?)) "kvsplice SIGKILLed: the kernel dropped its listener, interception is off"
sleep 1
ok $(($(kvs_bpf_stat proxy_absent) > p_kill ? 0 : 1)) \
	"meanwhile the loop's connects go the DNAT way (proxy_absent $p_kill -> $(kvs_bpf_stat proxy_absent))"
check "kvsplice restarted" kvs_start_kvsplice
r_restart=$(kvs_bpf_stat rewritten)
sleep 1
touch "$tmp.stop"
wait "$loop"
res=$(cat "$tmp.loop")
echo "# loop: $res"
L=()
json_load L <<<"$res"
expect_eq "0 connects refused or timed out across the SIGKILL and the restart" 0 "${L[connect_failed]:-0}"
# SIGKILL loses what was established with the proxy at that instant: the request being relayed,
# and a connection the kernel had already queued on the dying listener. Nothing else may fail.
ok $((${L[lost]:-0} <= 2 ? 0 : 1)) \
	"only connections established with kvsplice at the instant of SIGKILL were lost (${L[lost]:-0})"
expect_eq "getpeername() showed the ClusterIP on every connection" 0 "${L[peer_mismatch]:-0}"
ok $(($(kvs_bpf_stat rewritten) > r_restart && r_restart >= r_kill ? 0 : 1)) \
	"the restarted kvsplice takes connections back (rewritten $r_kill -> $r_restart -> $(kvs_bpf_stat rewritten)): counters kept"
expect_eq "the pinned connect4 link was updated in place, not re-created" "$link0" "$(kvs_link_id link_connect4)"
ok $(($(metric kvsplice_requests_total) > 0 ? 0 : 1)) "the new kvsplice (pid $(cat "$RUN_DIR/kvsplice.pid"), was $pid0) serves requests"

# --- SIGTERM falls open at once ------------------------------------------------------------------
kill -TERM "$(cat "$RUN_DIR/kvsplice.pid")"
for _ in $(seq 50); do kvs_intercepting || break; sleep 0.1; done
kvs_intercepting
ok $((! $?)) "after SIGTERM interception is off"
w=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health" | hdr x-kvsim-worker)
ok $([[ $w == w[12] ]] && echo 0 || echo 1) "and the Service is still served (DNAT)"
kvs_stop_kvsplice TERM

# --- the pinned Service selection is reconciled at start; a stale entry's connection is closed ---
# A second Service is selected, kvsplice is SIGKILLed (its map entries stay pinned), the Service is
# removed meanwhile: the next kvsplice must unselect it, and a connection intercepted
# for an address no current Service has must be closed, never served by another Service.
other_ip=10.96.0.60
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
d["services"].append(dict(d["services"][0], name="other", cluster_ip=sys.argv[2]))
print(json.dumps(d))' "$RUN_DIR/services.json" "$other_ip" >"$RUN_DIR/services-two.json"
svc_entries() { # the ClusterIPs in the pinned services map, sorted
	bpftool -j map dump pinned "$(pin_dir)/services" 2>/dev/null | python3 -c '
import json, sys
print(" ".join(sorted(".".join(str(int(b, 16)) for b in e["key"][:4]) for e in json.load(sys.stdin))))'
}
KVSPLICE_SERVICES=$RUN_DIR/services-two.json kvs_start_kvsplice
expect_eq "two Services selected in the pinned map" "$SVC_IP $other_ip" "$(svc_entries)"
kvs_stop_kvsplice KILL
expect_eq "after SIGKILL both entries stay pinned" "$SVC_IP $other_ip" "$(svc_entries)"
kvs_start_kvsplice
expect_eq "restarted without the second Service: its entry is removed at start" "$SVC_IP" "$(svc_entries)"
expect_eq "kvsplice_bpf_services = 1" 1 "$(metric kvsplice_bpf_services)"
# the stale entry again, as if its Service went away between two snapshots
key=$(python3 -c 'import sys; print(" ".join("%02x" % int(b) for b in sys.argv[1].split(".")) + " 1f 40 00 00")' "$other_ip")
# shellcheck disable=SC2086
bpftool map update pinned "$(pin_dir)/services" key hex $key value hex 63 00 00 00 00 00 00 00
expect_eq "a stale entry put back by hand" "$SVC_IP $other_ip" "$(svc_entries)"
unknown='kvsplice_connections_refused_total{reason="unknown_destination"}'
u0=$(metric "$unknown") r0=$(kvs_bpf_stat rewritten)
out=$(tests/node/client.sh curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$other_ip:$SVC_PORT/health")
rc=$?
ok $([ "$rc" -ne 0 ] && [ "$out" = 000 ] && echo 0 || echo 1) \
	"a connection intercepted for $other_ip (no current Service) is closed, not served (curl rc $rc, status $out)"
expect_eq "it was intercepted" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
expect_eq "counted as unknown_destination" $((u0 + 1)) "$(metric "$unknown")"
expect_eq "and its stale entry is removed, so a retry takes kube-proxy's path" "$SVC_IP" "$(svc_entries)"
tests/node/client.sh curl -s -m 2 -o /dev/null "http://$other_ip:$SVC_PORT/health"
expect_eq "the retry is not intercepted" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
w=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health" | hdr x-kvsim-worker)
ok $([[ $w == w[12] ]] && echo 0 || echo 1) "the current Service is still served through kvsplice ($w)"
kvs_stop_kvsplice TERM

# --- kvsplice's own connects are never intercepted ----------------------------------------------
# kvsplice runs inside the intercepted cgroup (as on a node where the programs attach at the root)
# and its only endpoint is the Service address itself: without the SO_MARK exclusion its upstream
# connect would be handed back to itself.
python3 - "$RUN_DIR/services.json" "$SVC_IP" "$SVC_PORT" >"$RUN_DIR/services-loop.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["services"][0]["endpoints"] = [{"name": "svc", "ip": sys.argv[2], "port": int(sys.argv[3])}]
print(json.dumps(d))
EOF
KVSPLICE_CGROUP=$CG_CLIENTS KVSPLICE_SERVICES=$RUN_DIR/services-loop.json kvs_start_kvsplice
ok $? "kvsplice started inside the client cgroup, its endpoint = the Service address"
o0=$(kvs_bpf_stat own_connect) r0=$(kvs_bpf_stat rewritten)
out=$(tests/node/client.sh curl -s -m 10 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health")
ok $([[ $(hdr x-kvsim-worker <<<"$out") == w[12] ]] && echo 0 || echo 1) \
	"a client request is relayed by kvsplice to the Service address and answered by a worker"
ok $(($(kvs_bpf_stat own_connect) > o0 && $(kvs_bpf_stat rewritten) == r0 + 1 ? 0 : 1)) \
	"kvsplice's upstream connect was not intercepted (own_connect $o0 -> $(kvs_bpf_stat own_connect), rewritten +$(($(kvs_bpf_stat rewritten) - r0)))"
kvs_stop_kvsplice TERM
tap_done
