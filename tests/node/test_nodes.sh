#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Several nodes on one cluster network (up.sh --nodes 3, 2 workers), each with its own client
# pod, client cgroup, Service DNAT and kvsplice in front of the same workers. Shows: each node's
# client reaches the ClusterIP through its own node's kvsplice only and sees the ClusterIP as its
# peer; every node's kvsplice follows every worker (KV events, replay, /metrics scrapes) and routes
# a prompt another node placed to the worker that cached it; node I's traffic to a worker goes
# over node I's own veth; SIGKILL of node 2's kvsplice falls open on node 2 only (0 failed
# connects) while nodes 1 and 3 keep intercepting, and a restart takes node 2 back; each node has
# its own pins (node 2's detach leaves node 1's and 3's programs and maps alone); no namespace has
# a route out; down.sh removes every node; a failed up.sh (a worker, or node 3's kvsplice, that
# does not start) leaves nothing behind.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
base=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}tn$$
export KVS_TESTBED_ID=$base
source tests/node/lib.sh
tmp=$(mktemp -d /tmp/kvs-nodes.XXXXXX)
trap 'tests/node/down.sh >/dev/null 2>&1; for s in f k; do KVS_TESTBED_ID=$base-$s tests/node/down.sh >/dev/null 2>&1; done; rm -rf "$tmp"' EXIT

bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice}
if [ ! -x "$bin" ]; then
	skip "several nodes with kvsplice" "$bin is not built yet"
	exit 0
fi
# kvsim publishes KV events and vLLM metrics (what every kvsplice must follow); without it the
# plumbing is still tested with testworker.py.
if [ -x "$KVS_ROOT/build/kvsim" ]; then export KVS_WORKER=kvsim; else export KVS_WORKER=testworker; fi
NODES="1 2 3"

host_before=$(ip -o addr; ip route; ip rule)
check "up.sh --nodes 3 --workers 2 --kvsplice ($KVS_WORKER workers)" \
	tests/node/up.sh --nodes 3 --workers 2 --kvsplice || exit 1
expect_eq "the machine's own addresses, routes and rules are unchanged" "$host_before" \
	"$(ip -o addr; ip route; ip rule)"

metric() { # NODE NAME: one value of node NODE's kvsplice /metrics (0 when absent)
	kvs_in --node "$1" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$2" '$1 == m { v = $2 } END { print v + 0 }'
}
# counts: "rewritten/accepted" of every node's BPF counter and kvsplice, e.g. "3/3 1/1 0/0".
counts() {
	local n out=""
	for n in $NODES; do
		out+="${out:+ }$(KVS_NODE=$n kvs_bpf_stat rewritten)/$(metric "$n" kvsplice_connections_accepted_total)"
	done
	echo "$out"
}
# plus COUNTS NODE: COUNTS with node NODE's rewritten and accepted one higher.
plus() {
	local n=0 c out=""
	for c in $1; do
		n=$((n + 1))
		[ "$n" = "$2" ] && c="$((${c%/*} + 1))/$((${c#*/} + 1))"
		out+="${out:+ }$c"
	done
	echo "$out"
}
# req NODE PATH [PROMPT]: one connection from node NODE's client pod to the ClusterIP; prints
# "PEER STATUS WORKER" (getpeername, HTTP status, x-kvsim-worker). A prompt is POSTed to
# /v1/completions.
req() {
	tests/node/client.sh --node "$1" python3 - "$SVC_IP" "$SVC_PORT" "$2" "${3:-}" <<'EOF'
import http.client, json, sys
c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10)
c.connect()
peer = "%s:%d" % c.sock.getpeername()
if sys.argv[4]:
    c.request("POST", sys.argv[3], body=json.dumps({"model": "Qwen/Qwen3-0.6B", "max_tokens": 2,
              "prompt": sys.argv[4]}), headers={"Content-Type": "application/json"})
else:
    c.request("GET", sys.argv[3])
r = c.getresponse()
r.read()
print(peer, r.status, r.getheader("x-kvsim-worker"))
EOF
}
cg_progs() { bpftool cgroup show "$(cg_clients "$1")" 2>/dev/null | awk 'NR > 1 { print $1 }' | sort | xargs; }
map_id() { bpftool map show pinned "$(pin_dir "$1")/$2" 2>/dev/null | awk -F: 'NR == 1 { print $1 }'; }

# --- the layout ----------------------------------------------------------------------------------
bad=""
for n in $NODES; do
	for ns in "$(ns_node "$n")" "$(ns_client "$n")"; do [ -e "/run/netns/$ns" ] || bad+=" no:$ns"; done
	[ -d "$(cg_clients "$n")" ] || bad+=" no:$(cg_clients "$n")"
	KVS_NODE=$n kvs_intercepting || bad+=" not-intercepting:$n"
	kvs_alive "$(cat "$(kvs_pid_file "$n")")" || bad+=" kvsplice-dead:$n"
done
expect_eq "3 node and 3 client namespaces, a client cgroup each, and on each node a kvsplice with its listener registered" "" "$bad"
pins="$(pin_dir 1) $(pin_dir 2) $(pin_dir 3)"
progs="$(cg_progs 1) | $(cg_progs 2) | $(cg_progs 3)"
maps="$(map_id 1 services) $(map_id 2 services) $(map_id 3 services)"
echo "# pins: $pins; programs by cgroup: $progs; services maps: $maps"
ok $([ "$(tr ' ' '\n' <<<"$pins" | sort -u | grep -c .)" = 3 ] &&
	[ "$(tr ' ' '\n' <<<"$maps" | sort -u | grep -c .)" = 3 ] &&
	[ "$(tr ' |' '\n\n' <<<"$progs" | sort -u | grep -c .)" = 15 ] && echo 0 || echo 1) \
	"each node has its own pin dir, maps, and 5 programs of its own on its own client cgroup"
bad=""
for n in $NODES; do
	for i in 1 2; do
		want="dev vw$i"
		ip -n "$(ns_node "$n")" route get "$(worker_ip "$i")" | grep -q "$want" || bad+=" node$n->w$i"
		want="via $(pod_gw "$n") dev eth$((n - 1))"
		ip -n "$(ns_worker "$i")" route get "$(client_ip "$n")" | grep -q "$want" || bad+=" w$i->client$n"
		ip -n "$(ns_worker "$i")" -o link show "eth$((n - 1))" | grep -q "link-netns $(ns_node "$n")\b" ||
			bad+=" w$i/eth$((n - 1))"
	done
done
expect_eq "node I reaches each worker over its own veth, and the worker answers node I's pods over it" "" "$bad"

# --- each node's client goes through its own node's kvsplice ------------------------------------
for n in $NODES; do
	c0=$(counts)
	out=$(req "$n" /v1/models)
	echo "# node $n: $out"
	ok $([[ $out == "$SVC_IP:$SVC_PORT 200 w"[12] ]] && echo 0 || echo 1) \
		"node $n's client: 200 from a worker, getpeername() shows the ClusterIP"
	expect_eq "node $n's connect was rewritten by node $n's BPF and accepted by node $n's kvsplice only (rewritten/accepted per node)" \
		"$(plus "$c0" "$n")" "$(counts)"
done

# --- every kvsplice follows every worker ---------------------------------------------------------
if [ "$KVS_WORKER" = kvsim ]; then
	followed() { # every node's kvsplice: each worker synced from its replay endpoint and scraped
		local n w
		for n in $NODES; do
			kvs_in --node "$n" curl -s -m 5 "http://$ADMIN_ADDR/debug/workers" >"$tmp/workers.$n"
			for w in qwen/w1 qwen/w2; do
				[ "$(metric "$n" "kvsplice_kv_replays_total{worker=\"$w\",result=\"ok\"}")" -ge 1 ] || return 1
			done
			python3 - "$tmp/workers.$n" <<-'EOF' || return 1
				import json, sys
				ws = json.load(open(sys.argv[1]))["workers"]
				sys.exit(0 if len(ws) == 2 and all(w["scrapes"] > 0 and w["scrape_failures"] == 0
				                                   and w["metrics_age_ms"] >= 0 for w in ws) else 1)
			EOF
		done
	}
	for _ in $(seq 50); do followed && break; sleep 0.1; done
	followed
	ok $? "every node's kvsplice synced both workers' KV events (replay ok) and scrapes both workers' /metrics"
	prompt="Node test $$: the quick brown fox jumps over the lazy dog while the testbed counts blocks"
	prompt+=" of sixteen tokens each, so this prompt spans several of them and is cached as such."
	out=$(req 1 /v1/completions "$prompt")
	w=${out##* }
	echo "# node 1 placed the prompt on $w"
	stored() { metric "$1" "kvsplice_kv_events_total{worker=\"qwen/$w\",type=\"BlockStored\"}"; }
	# Node 1's request must also have left every node's view of the load: a scrape taken while it
	# ran shows w1 busy, and kv rightly sends a request to an idle worker with room then (one
	# miss, nothing evicted) instead of queueing it behind the holder.
	idle() { # NODE: its kvsplice sees no request in flight, remote or its own, on any worker
		kvs_in --node "$1" curl -s -m 5 "http://$ADMIN_ADDR/debug/workers" >"$tmp/load.$1"
		python3 - "$tmp/load.$1" <<-'PYLOAD'
			import json, sys
			ws = json.load(open(sys.argv[1]))["workers"]
			sys.exit(0 if all(w["inflight"] == 0 and w["remote_requests"] == 0 and w["running"] == 0
			                  and w["waiting"] <= 0 for w in ws) else 1)
		PYLOAD
	}
	for _ in $(seq 50); do
		[ "$(stored 2)" -gt 0 ] && [ "$(stored 3)" -gt 0 ] && break
		sleep 0.1
	done
	for _ in $(seq 50); do idle 2 && break; sleep 0.1; done
	o2=$(req 2 /v1/completions "$prompt")
	for _ in $(seq 50); do idle 3 && break; sleep 0.1; done # node 2's request has left too
	o3=$(req 3 /v1/completions "$prompt")
	echo "# node 2: $o2; node 3: $o3"
	ok $([[ $w == w[12] && ${o2##* } == "$w" && ${o3##* } == "$w" ]] && echo 0 || echo 1) \
		"nodes 2 and 3 send the prompt node 1 placed to the worker that cached it ($w; learned from its KV events)"
else
	skip "every node's kvsplice follows every worker's events and metrics" "build/kvsim is not built"
	skip "nodes 2 and 3 route to the worker that cached node 1's prompt" "build/kvsim is not built"
fi

# --- SIGKILL of node 2's kvsplice while node 2's client connects in a loop, then a restart --------
links0="$(KVS_NODE=1 kvs_link_id link_connect4) $(KVS_NODE=2 kvs_link_id link_connect4) $(KVS_NODE=3 kvs_link_id link_connect4)"
rm -f "$tmp/stop"
tests/node/client.sh --node 2 python3 tests/node/connloop.py --seconds 30 --stop-file "$tmp/stop" >"$tmp/loop" &
loop=$!
KVS_NODE=2 kvs_wait_stat rewritten $(($(KVS_NODE=2 kvs_bpf_stat rewritten) + 30))
ok $? "node 2's loop client is served through node 2's kvsplice"
pa1=$(KVS_NODE=1 kvs_bpf_stat proxy_absent) pa2=$(KVS_NODE=2 kvs_bpf_stat proxy_absent)
pa3=$(KVS_NODE=3 kvs_bpf_stat proxy_absent)
pid2=$(cat "$(kvs_pid_file 2)")
KVS_NODE=2 kvs_stop_kvsplice KILL
ok $(! kvs_alive "$pid2" && ! KVS_NODE=2 kvs_intercepting && KVS_NODE=1 kvs_intercepting &&
	KVS_NODE=3 kvs_intercepting && echo 0 || echo 1) \
	"node 2's kvsplice SIGKILLed (pid $pid2): interception off on node 2, still on on nodes 1 and 3"
sleep 1
ok $(($(KVS_NODE=2 kvs_bpf_stat proxy_absent) > pa2 ? 0 : 1)) \
	"node 2's loop connects go the DNAT way meanwhile (proxy_absent $pa2 -> $(KVS_NODE=2 kvs_bpf_stat proxy_absent))"
for n in 1 3; do
	c0=$(counts)
	out=$(req "$n" /health)
	ok $([[ $out == "$SVC_IP:$SVC_PORT 200 w"[12] ]] && [ "$(counts)" = "$(plus "$c0" "$n")" ] && echo 0 || echo 1) \
		"meanwhile node $n's client still goes through node $n's kvsplice ($c0 -> $(counts))"
done
expect_eq "no connect fell back to DNAT on nodes 1 and 3 (proxy_absent)" "$pa1 $pa3" \
	"$(KVS_NODE=1 kvs_bpf_stat proxy_absent) $(KVS_NODE=3 kvs_bpf_stat proxy_absent)"
KVS_NODE=2 kvs_start_kvsplice
ok $? "node 2's kvsplice restarted"
r_restart=$(KVS_NODE=2 kvs_bpf_stat rewritten)
sleep 1
touch "$tmp/stop"
wait "$loop"
res=$(cat "$tmp/loop")
echo "# node 2's loop: $res"
declare -A L=()
json_load L <<<"$res"
expect_eq "node 2: 0 connects refused or timed out across the SIGKILL and the restart" 0 "${L[connect_failed]:-1}"
ok $((${L[lost]:-9} <= 2 ? 0 : 1)) \
	"node 2: only connections established with its kvsplice at the instant of SIGKILL were lost (${L[lost]:-?})"
expect_eq "node 2: getpeername() showed the ClusterIP on every connection" 0 "${L[peer_mismatch]:-1}"
ok $(($(KVS_NODE=2 kvs_bpf_stat rewritten) > r_restart ? 0 : 1)) \
	"the restarted kvsplice takes node 2 back (rewritten $r_restart -> $(KVS_NODE=2 kvs_bpf_stat rewritten))"
expect_eq "node 2's pinned connect4 link was taken over in place; nodes 1 and 3 kept theirs" "$links0" \
	"$(KVS_NODE=1 kvs_link_id link_connect4) $(KVS_NODE=2 kvs_link_id link_connect4) $(KVS_NODE=3 kvs_link_id link_connect4)"

# --- pins are per node: node 2's detach leaves nodes 1 and 3 alone --------------------------------
keep="$(cg_progs 1) | $(cg_progs 3) | $(map_id 1 services) $(map_id 1 stats) $(map_id 3 services) $(map_id 3 stats)"
"$bin" detach --pin-dir "$(pin_dir 2)" >>"$tmp/detach.log" 2>&1
ok $? "kvsplice detach --pin-dir $(pin_dir 2)"
ok $([ ! -e "$(pin_dir 2)" ] && [ -z "$(cg_progs 2)" ] && echo 0 || echo 1) \
	"node 2's pins are gone and no program is left on node 2's client cgroup"
expect_eq "nodes 1 and 3 keep their programs and pinned maps (same ids)" "$keep" \
	"$(cg_progs 1) | $(cg_progs 3) | $(map_id 1 services) $(map_id 1 stats) $(map_id 3 services) $(map_id 3 stats)"
c0=$(counts)
out1=$(req 1 /health) out2=$(req 2 /health)
ok $([[ $out1 == "$SVC_IP:$SVC_PORT 200 w"[12] && $out2 == "$SVC_IP:$SVC_PORT 200 w"[12] ]] &&
	[ "$(counts | cut -d' ' -f1)" = "$(plus "$c0" 1 | cut -d' ' -f1)" ] && echo 0 || echo 1) \
	"node 1's client still goes through node 1's kvsplice; node 2's is served by DNAT ($out2)"
KVS_NODE=2 kvs_stop_kvsplice TERM

# --- isolation -----------------------------------------------------------------------------------
bad=""
for ns in $(ns_node 1) $(ns_node 2) $(ns_node 3) $(ns_client 1) $(ns_client 2) $(ns_client 3) \
	$(ns_worker 1) $(ns_worker 2); do
	[ -z "$(ip -n "$ns" route show default)" ] || bad+=" default:$ns"
	ip -n "$ns" route get 192.0.2.1 >/dev/null 2>&1 && bad+=" out:$ns"
done
expect_eq "no namespace of the testbed has a default route or any route out" "" "$bad"
bad=""
for n in $NODES; do
	for m in $NODES; do
		[ "$n" = "$m" ] && continue
		ip -n "$(ns_node "$n")" route get "$(client_ip "$m")" >/dev/null 2>&1 && bad+=" node$n->client$m"
	done
done
expect_eq "a node has no route to another node's pods (no instance talks to another)" "" "$bad"

# --- down.sh -------------------------------------------------------------------------------------
tests/node/down.sh
ok $? "down.sh"
left="$(ip netns list | awk '{ print $1 }' | grep -- "-$base\$" | xargs)"
for d in $pins "$CG_TOP" "$RUN_DIR"; do [ -e "$d" ] && left+=" $d"; done
expect_eq "every node's namespaces, pin dirs, the cgroups and the run dir are gone" "" "$left"

# --- a failed up.sh cleans up every node ---------------------------------------------------------
leftovers() { # ID: what is left of testbed ID
	local id=$1 sfx=-$1 out
	out="$(ip netns list | awk '{ print $1 }' | grep -- "-$id\$" | xargs)"
	out+=" $(ls -d /sys/fs/bpf/kvsplice-test*"$sfx" "$CG2_ROOT/kvsplice-test$sfx" "/run/kvsplice-test$sfx" 2>/dev/null | xargs)"
	out+=" $(grep -l -- "$sfx" /proc/[0-9]*/cmdline 2>/dev/null | grep -v "/proc/$$/" |
		while read -r f; do { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q -- "--pin-dir /sys/fs/bpf/kvsplice-test[0-9]*$sfx" && echo "${f//[!0-9]/}"; done | xargs)"
	echo $out
}
KVS_TESTBED_ID=$base-f KVS_WORKER=testworker tests/node/up.sh --nodes 3 --workers 2 --worker-cmd false >"$tmp/f.log" 2>&1
ok $(($? != 0 ? 0 : 1)) "up.sh --nodes 3 fails when a worker does not start"
expect_eq "and leaves no namespace, cgroup, pin dir or run dir of any node" "" "$(leftovers "$base-f")"
# A kvsplice that refuses to start on node 3 only: nodes 1 and 2 are up with kvsplice and pins.
cat >"$tmp/kvsplice-not-on-3" <<EOF
#!/bin/sh
case " \$* " in *" --pin-dir $(KVS_TESTBED_ID=$base-k; source tests/node/lib.sh; pin_dir 3) "*) echo "not on node 3" >&2; exit 1 ;; esac
exec "$bin" "\$@"
EOF
chmod +x "$tmp/kvsplice-not-on-3"
KVS_TESTBED_ID=$base-k KVS_WORKER=testworker KVSPLICE=$tmp/kvsplice-not-on-3 \
	tests/node/up.sh --nodes 3 --workers 1 --kvsplice >"$tmp/k.log" 2>&1
ok $(($? != 0 ? 0 : 1)) "up.sh --nodes 3 fails when node 3's kvsplice does not start (nodes 1 and 2 already intercepting)"
grep -q "not on node 3" "$tmp/k.log" || sed 's/^/#   /' "$tmp/k.log"
expect_eq "and leaves no namespace, cgroup, pin dir, run dir or kvsplice process of any node" "" "$(leftovers "$base-k")"
tap_done
