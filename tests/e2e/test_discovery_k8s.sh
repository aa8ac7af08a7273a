#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kubernetes discovery end to end (up to the snapshot): the real source
# (userspace/discovery/k8s.c, run by build/tests/node/discdump as the daemon runs it) against
# tests/e2e/k8s_api.py, the test API server (HTTPS on 127.0.0.1, certificates made at test time).
# Each change made on the server must reach the snapshot the source hands over: endpoint added,
# terminating, removed, not ready; annotation removed and added; a watch that expires (resumed
# from its resourceVersion, no relist), a bookmark (resumed from the bookmark's version), a
# connection cut mid-stream, a 410 (relist that finds a change no event announced), a bad token
# (401s, nothing lost, recovery once the token file holds the new token), a slow server (the loop
# never waits on it; a list slower than the request timeout is retried), a certificate for another
# name (refused, no request made); the daemon's bounds on a list page and a watch event. Listens
# on 127.0.0.1 only; every process is stopped by PID.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
build=${KVS_BUILD:-build}
bin=$build/tests/node/discdump
PY=/usr/bin/python3
if [ ! -x "$bin" ]; then
	skip "Kubernetes discovery against the test API server" "$bin is not built yet"
	exit 0
fi
command -v openssl >/dev/null || { skip "Kubernetes discovery" "no openssl CLI (make deps)"; exit 0; }
dir=$(mktemp -d /tmp/kvs-k8s.XXXXXX)
api_pid="" dump_pid="" bad_pid="" bad_dump_pid="" kvs_pid="" up_a="" up_b=""
cleanup() {
	for p in $kvs_pid $up_a $up_b $dump_pid $bad_dump_pid $api_pid $bad_pid; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	rm -rf "$dir"
}
trap cleanup EXIT

# --- the API server, its state, the source ---------------------------------------------------
mkdir "$dir/certs"
printf 'tok-1\n' >"$dir/token"
$PY tests/e2e/k8s_api.py --dir "$dir/certs" --token tok-1 --port-file "$dir/ports" \
	>"$dir/api.log" 2>&1 &
api_pid=$!
for _ in $(seq 150); do [ -s "$dir/ports" ] && break; sleep 0.1; done
read -r aport cport <"$dir/ports" 2>/dev/null
[ -n "${cport:-}" ]
ok $? "test API server up (HTTPS 127.0.0.1:${aport:-?}, control ${cport:-?})" || exit 1

ctl() { # ctl PATH JSON: a control request; prints the reply
	curl -sf -m 10 -X POST "http://127.0.0.1:$cport$1" -H 'Content-Type: application/json' -d "${2:-{\}}"
}
svc() { # svc NAME ANNOTATIONS_JSON
	ctl /service "{\"namespace\":\"ml\",\"name\":\"$1\",\"cluster_ip\":\"$3\",\"ports\":[{\"name\":\"http\",\"port\":8000},{\"name\":\"kv-replay\",\"port\":20081}],\"annotations\":$2}" >/dev/null
}
slice() { # slice NAME SERVICE ENDPOINTS_JSON [silent]
	ctl /slice "{\"namespace\":\"ml\",\"name\":\"$1\",\"service\":\"$2\",\"ports\":[{\"name\":\"http\",\"port\":8000},{\"name\":\"kv-replay\",\"port\":30081}],\"endpoints\":$3${4:+,\"silent\":true}}" >/dev/null
}
ann='{"kvsplice.io/route":"kv","kvsplice.io/events-port":"20080","kvsplice.io/replay-port":"kv-replay","kvsplice.io/model":"Qwen/Qwen3-0.6B"}'
ep() { echo "{\"ip\":\"$1\",\"pod\":\"$2\"${3:+,$3}}"; }
svc qwen "$ann" 10.96.0.50
svc plain '{}' 10.96.0.60
slice qwen-a qwen "[$(ep 10.244.1.10 vllm-0)]"
slice plain-a plain "[$(ep 10.244.2.10 web-0)]"

start_dump() { # start_dump OUT ERR PORT: discdump against 127.0.0.1:PORT, PID in $!
	"$bin" --kubernetes --api "https://127.0.0.1:$3" --token "$dir/token" \
		--ca "$dir/certs/ca.crt" --watch-timeout 30 --backoff-min 100 --backoff-max 800 \
		--request-timeout 3000 --log-level debug >"$1" 2>"$2" &
}
start_dump "$dir/dump.out" "$dir/dump.err" "$aport"
dump_pid=$!

# snap "what" PYTHON_EXPR [SECONDS]: waits until the newest snapshot s (a dict) satisfies the
# expression; helpers: svc(name) -> the Service or None, eps(name) -> {endpoint name: endpoint}.
snap() {
	local out
	out=$($PY - "$dir/dump.out" "$2" "${3:-10}" <<'PYEOF'
import json, sys, time
path, expr, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
end, s = time.time() + limit, None
while True:
    for line in open(path):
        if line.startswith('{"generation"'):
            s = json.loads(line)
    if s is not None:
        svc = lambda n: next((v for v in s["services"] if v["name"] == n), None)
        eps = lambda n: {e["name"]: e for e in (svc(n) or {"endpoints": []})["endpoints"]}
        if eval(expr):
            sys.exit(0)
    if time.time() > end:
        print("last snapshot: %s" % json.dumps(s))
        sys.exit(1)
    time.sleep(0.05)
PYEOF
)
	local rc=$?
	ok $rc "$1"
	[ $rc -eq 0 ] || echo "#   $out"
	return $rc
}
gen() { grep '^{"generation"' "$dir/dump.out" | tail -n 1 | $PY -c 'import json,sys; print(json.load(sys.stdin)["generation"])' 2>/dev/null; }
# reqs PYTHON_EXPR: evaluates over the API requests r (list of dicts) and the mark m (their count
# when mark was called); prints the result
mark() { m=$(curl -sf "http://127.0.0.1:$cport/log" | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["requests"]))'); }
reqs() {
	curl -sf "http://127.0.0.1:$cport/log" | $PY -c '
import json, sys
d = json.load(sys.stdin)
r, m, tls = d["requests"], int(sys.argv[2]), d["tls_errors"]
new = r[m:]
lists = lambda: [x for x in new if not x["watch"]]
watches = lambda: [x for x in new if x["watch"]]
print(eval(sys.argv[1]))' "$1" "${m:-0}"
}
wait_true() { # wait_true SECONDS PYTHON_EXPR: reqs EXPR becomes True
	for _ in $(seq $(($1 * 10))); do [ "$(reqs "$2")" = True ] && return 0; sleep 0.1; done
	return 1
}

# --- 1. the first lists and the opt-in -----------------------------------------------------------
snap "listed: ml/qwen served at 10.96.0.50:8000 with vllm-0, route kv, its model" \
	's and svc("ml/qwen") and svc("ml/qwen")["vip"] == "10.96.0.50:8000" and svc("ml/qwen")["route"] == "kv" and svc("ml/qwen")["model"] == "Qwen/Qwen3-0.6B" and list(eps("ml/qwen")) == ["vllm-0"] and eps("ml/qwen")["vllm-0"]["addr"] == "10.244.1.10:8000"' 15
snap "events port by number (20080), replay port by name from the EndpointSlice (kv-replay: 30081)" \
	'eps("ml/qwen")["vllm-0"]["events_port"] == 20080 and eps("ml/qwen")["vllm-0"]["replay_port"] == 30081'
snap "ml/plain, without the annotation, is not served" 'svc("ml/plain") is None'
m=0
wait_true 5 'len(lists()) >= 2 and all(x["query"].get("limit") for x in lists()) and any(x["path"].endswith("/services") for x in watches()) and any(x["path"].endswith("/endpointslices") for x in watches())'
ok $? "one list per kind (with limit), then a watch per kind"
expect_eq "the watches ask for bookmarks and resume at the lists' resourceVersion" True \
	"$(reqs 'all(x["query"].get("allowWatchBookmarks") == "true" and x["query"].get("resourceVersion") == lists()[-1]["query"].get("resourceVersion", str(x["query"]["resourceVersion"])) for x in watches()[:2]) and all(x["query"].get("resourceVersion") for x in watches()[:2])')"

# --- 2. endpoints: added, terminating, removed, not ready ------------------------------------------
slice qwen-a qwen "[$(ep 10.244.1.10 vllm-0),$(ep 10.244.1.11 vllm-1)]"
snap "endpoint added: vllm-1 serves" 'set(eps("ml/qwen")) == {"vllm-0", "vllm-1"} and not any(e["terminating"] for e in eps("ml/qwen").values())'
slice qwen-a qwen "[$(ep 10.244.1.10 vllm-0 '"ready":false,"serving":true,"terminating":true'),$(ep 10.244.1.11 vllm-1)]"
snap "endpoint terminating: vllm-0 kept and marked terminating (no new requests)" 'eps("ml/qwen").get("vllm-0", {}).get("terminating") is True and eps("ml/qwen")["vllm-1"]["terminating"] is False'
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1)]"
snap "endpoint removed: vllm-0 gone" 'list(eps("ml/qwen")) == ["vllm-1"]'
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.12 vllm-2 '"ready":false,"serving":true,"terminating":false'),$(ep 10.244.1.13 vllm-3)]"
snap "serving but not ready: vllm-2 gets nothing (vllm-3, in the same change, serves)" 'set(eps("ml/qwen")) == {"vllm-1", "vllm-3"}'

# --- 3. annotation removed, added ----------------------------------------------------------------
svc qwen '{}' 10.96.0.50
snap "annotation removed: ml/qwen no longer served" 'svc("ml/qwen") is None'
svc qwen "$ann" 10.96.0.50
svc plain '{"kvsplice.io/route":"round-robin"}' 10.96.0.60
snap "annotations added: ml/qwen back with its endpoints, ml/plain served round-robin with the slice stored before it opted in" \
	'set(eps("ml/qwen")) == {"vllm-1", "vllm-3"} and svc("ml/plain") and svc("ml/plain")["route"] == "round-robin" and list(eps("ml/plain")) == ["web-0"]'

# --- 4. a watch that expires: resumed from the last resourceVersion, no relist ---------------------
mark
# the newest resourceVersion of each kind: the last event each watch saw
rvs=$(curl -sf "http://127.0.0.1:$cport/state" | $PY -c '
import json, sys
o = json.load(sys.stdin)["objects"]
print(json.dumps({k: str(max(int(x["metadata"]["resourceVersion"]) for x in v)) for k, v in o.items()}))')
ctl /expire >/dev/null
wait_true 5 'len(watches()) >= 2'
ok $? "watch expired: both watches reconnect"
expect_eq "... each from the last resourceVersion it saw ($rvs), without a new list" True \
	"$(reqs "not lists() and all(x['query'].get('resourceVersion') == ${rvs}['Service' if x['path'].endswith('/services') else 'EndpointSlice'] for x in watches()[:2])")"
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.13 vllm-3),$(ep 10.244.1.14 vllm-4)]"
snap "after the expiry a change still arrives (vllm-4)" '"vllm-4" in eps("ml/qwen")'

# --- 5. a bookmark: the next watch resumes from the bookmark's version; no new snapshot ----------
g0=$(gen)
bm=$(ctl /bookmark | $PY -c 'import json,sys; print(json.load(sys.stdin)["rv"])')
sleep 0.5
mark
ctl /expire >/dev/null
wait_true 5 'len(watches()) >= 2'
expect_eq "bookmark: both watches resume at the bookmark's resourceVersion ${bm}" True \
	"$(reqs "not lists() and all(x['query'].get('resourceVersion') == '$bm' for x in watches()[:2])")"
expect_eq "a bookmark alone hands over no new snapshot" "$g0" "$(gen)"

# --- 6. the connection cut mid-stream: reconnect from the version, no relist ------------------------
mark
ctl /config '{"cut":true}' >/dev/null
ctl /expire >/dev/null
wait_true 5 'len(watches()) >= 2'
ok $? "connection cut without the last chunk: both watches reconnect"
ctl /config '{"cut":false}' >/dev/null
expect_eq "... with no relist" True "$(reqs 'not lists()')"
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.13 vllm-3),$(ep 10.244.1.14 vllm-4),$(ep 10.244.1.15 vllm-5)]"
snap "after the cut a change still arrives (vllm-5)" '"vllm-5" in eps("ml/qwen")'

# --- 7. 410 Gone: a relist, which finds a change no event announced ---------------------------------
mark
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.16 vllm-6)]" silent
sleep 0.3
snap "a change lost to compaction is not seen by the watch" '"vllm-6" not in eps("ml/qwen")' 1
ctl /gone >/dev/null
snap "410 Gone: the relist finds it (vllm-6 in, vllm-3..5 out)" 'set(eps("ml/qwen")) == {"vllm-1", "vllm-6"}'
expect_eq "... through a list of each kind (the watch of each got the 410)" True \
	"$(reqs 'len({x["path"] for x in lists()}) == 2')"
grep -q "410" "$dir/dump.err"
ok $? "... and the log says 410"

# --- 8. a bad token: 401s, nothing lost; the token file read again recovers ------------------------
g0=$(gen)
mark
ctl /config '{"token":"tok-2"}' >/dev/null
ctl /expire >/dev/null
wait_true 5 'len([x for x in new if x["status"] == 401]) >= 2'
ok $? "the token no longer accepted: requests answered 401"
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.16 vllm-6),$(ep 10.244.1.17 vllm-7)]"
sleep 1
expect_eq "while refused, the last snapshot stays (no empty one handed over)" "$g0" "$(gen)"
grep -q "401 Unauthorized" "$dir/dump.err"
ok $? "the log says 401 Unauthorized"
printf 'tok-2\n' >"$dir/token.new" && mv "$dir/token.new" "$dir/token"
snap "token file rotated: requests accepted again, the change made meanwhile arrives (vllm-7)" '"vllm-7" in eps("ml/qwen")'

# --- 9. a slow server: the loop never waits; a list slower than the request timeout is retried ----
ctl /config '{"delay":1.0}' >/dev/null
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.17 vllm-7)]"
snap "slow server (1 s before every response and event): the change arrives (vllm-6 out)" 'set(eps("ml/qwen")) == {"vllm-1", "vllm-7"}'
mark
ctl /config '{"delay":4.0}' >/dev/null
ctl /gone >/dev/null
wait_true 15 'len([x for x in lists()]) >= 3'
ok $? "lists slower than the request timeout (4 s > 3 s): abandoned and retried"
# the line is written as the request is abandoned, which a loaded machine may run a moment after
# the retry's list has reached the server
for _ in $(seq 50); do grep -q "Timeout was reached\|timed out" "$dir/dump.err" && break; sleep 0.2; done
grep -q "Timeout was reached\|timed out" "$dir/dump.err"
ok $? "... and the log says the request timed out"
ctl /config '{"delay":0}' >/dev/null
slice qwen-a qwen "[$(ep 10.244.1.11 vllm-1),$(ep 10.244.1.18 vllm-8)]"
snap "the server fast again: relisted, the change arrives (vllm-8)" 'set(eps("ml/qwen")) == {"vllm-1", "vllm-8"}' 15
hb=$(grep '^{"heartbeat"' "$dir/dump.out" | tail -n 1)
echo "# loop: $hb"
expect_eq "the loop never blocked: poll() under 20 ms and no gap over 250 ms between turns" True \
	"$($PY -c 'import json,sys; h=json.loads(sys.argv[1]); print(h["max_poll_us"] < 20000 and h["max_gap_ms"] < 250)' "$hb")"

# --- 10. a certificate for another name: refused, no request made -----------------------------------
$PY tests/e2e/k8s_api.py --dir "$dir/certs" --token tok-2 --cert wrong --port-file "$dir/ports.bad" \
	>"$dir/api-bad.log" 2>&1 &
bad_pid=$!
for _ in $(seq 100); do [ -s "$dir/ports.bad" ] && break; sleep 0.1; done
read -r bport bcport <"$dir/ports.bad" 2>/dev/null
start_dump "$dir/bad.out" "$dir/bad.err" "${bport:-1}"
bad_dump_pid=$!
sleep 3
expect_eq "certificate not for 127.0.0.1: no snapshot handed over" "" "$(grep '^{"generation"' "$dir/bad.out")"
grep -qi "SSL.*\(subject name\|certificate\)\|certificate.*verif" "$dir/bad.err"
ok $? "... the log names the certificate check ($(grep -im1 'ssl' "$dir/bad.err" | cut -c1-120))"
expect_eq "... and the server saw TLS refused and no HTTP request" True \
	"$(curl -sf "http://127.0.0.1:$bcport/log" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["tls_errors"] >= 1 and not d["requests"])')"
kill -TERM "$bad_dump_pid"
wait "$bad_dump_pid"
bad_dump_pid=""

# --- 11. the daemon itself (when it has --kubernetes): /readyz, metrics, requests served ---------
if "$build/kvsplice" --help 2>/dev/null | grep -q -- '--kubernetes'; then
	cat >"$dir/upstream.py" <<'PYEOF'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        body = json.dumps({"who": sys.argv[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = reply
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PYEOF
	$PY "$dir/upstream.py" A "$dir/upA" & up_a=$!
	$PY "$dir/upstream.py" B "$dir/upB" & up_b=$!
	for _ in $(seq 50); do [ -s "$dir/upA" ] && [ -s "$dir/upB" ] && break; sleep 0.1; done
	pa=$(cat "$dir/upA") pb=$(cat "$dir/upB")
	dslice() { # dslice NAME PORT ENDPOINTS_JSON
		ctl /slice "{\"namespace\":\"daemon\",\"name\":\"$1\",\"service\":\"qwen\",\"ports\":[{\"name\":\"http\",\"port\":$2}],\"endpoints\":$3}" >/dev/null
	}
	dsvc() {
		ctl /service "{\"namespace\":\"daemon\",\"name\":\"qwen\",\"cluster_ip\":\"10.96.0.70\",\"ports\":[{\"name\":\"http\",\"port\":8000}],\"annotations\":$1}" >/dev/null
	}
	dsvc '{"kvsplice.io/route":"round-robin"}'
	dslice qwen-a "$pa" "[$(ep 127.0.0.1 up-a)]"
	ctl /config '{"delay":1.5}' >/dev/null
	"$build/kvsplice" --kubernetes --k8s-api "https://127.0.0.1:$aport" --k8s-token "$dir/token" \
		--k8s-ca "$dir/certs/ca.crt" --k8s-namespace daemon --no-bpf --no-events --no-tokenizer \
		--router round-robin --listen 127.0.0.1:0 --admin 127.0.0.1:0 --port-file "$dir/kvs.ports" \
		--scrape-interval 0 --tokenizer-root models --log-level info 2>"$dir/kvsplice.log" &
	kvs_pid=$!
	for _ in $(seq 100); do [ -s "$dir/kvs.ports" ] && break; sleep 0.05; done
	read -r lport kport <"$dir/kvs.ports"
	expect_eq "daemon: /readyz says no before the first snapshot (slow API server)" 503 \
		"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$kport/readyz")"
	ctl /config '{"delay":0}' >/dev/null
	metric() { curl -s "http://127.0.0.1:$kport/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
	wait_metric() { # wait_metric NAME VALUE
		for _ in $(seq 100); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done
		return 1
	}
	who() { # who N: the upstreams that answered N requests through the proxy, sorted, unique
		for _ in $(seq "$1"); do
			curl -s -m 5 "http://127.0.0.1:$lport/v1/models" | $PY -c 'import json,sys; print(json.load(sys.stdin)["who"])' 2>/dev/null || echo error
		done | sort -u | tr '\n' ' '
	}
	wait_metric kvsplice_services 1 && wait_metric kvsplice_endpoints 1
	ok $? "daemon: the Service of namespace daemon with one endpoint applied"
	expect_eq "daemon: /readyz once synced" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$kport/readyz")"
	expect_eq "daemon: requests through the proxy reach endpoint A" "A " "$(who 4)"
	dslice qwen-b "$pb" "[$(ep 127.0.0.1 up-b)]"
	wait_metric kvsplice_endpoints 2
	ok $? "daemon: endpoint B added (2 endpoints)"
	expect_eq "daemon: requests reach A and B" "A B " "$(who 6)"
	dslice qwen-a "$pa" "[]"
	wait_metric kvsplice_endpoints 1
	ok $? "daemon: endpoint A removed (1 endpoint)"
	expect_eq "daemon: requests reach B only" "B " "$(who 6)"
	# kvsplice.io/model-tokenizers: loaded by the loader thread while the loop keeps serving;
	# a DIR outside --tokenizer-root is refused
	dsvc '{"kvsplice.io/route":"round-robin","kvsplice.io/model":"m","kvsplice.io/model-tokenizers":"m=qwen3, x=/etc"}'
	slow=0
	for _ in $(seq 8); do
		t=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$kport/healthz")
		awk -v t="$t" 'BEGIN { exit !(t > 0.25) }' && slow=$((slow + 1))
		sleep 0.1
	done
	wait_metric 'kvsplice_tokenizer_loads_total{result="ok"}' 1
	ok $? "daemon: the annotation's tokenizer (m=qwen3 under --tokenizer-root) loaded"
	expect_eq "daemon: ... x=/etc refused (outside the root)" 1 \
		"$(metric 'kvsplice_tokenizer_loads_total{result="refused"}')"
	ms=$(sed -n 's/.*model m: tokenizer models\/qwen3\/tokenizer.json loaded (\([0-9]*\) ms).*/\1/p' "$dir/kvsplice.log")
	echo "# the tokenizer loaded in ${ms:-?} ms off the loop; /healthz answers over 250 ms meanwhile: $slow of 8"
	expect_eq "daemon: the loop answered /healthz within 250 ms all through the load" 0 "$slow"
	dsvc '{}'
	wait_metric kvsplice_services 0
	ok $? "daemon: annotation removed: no Service served"
	kill -TERM "$kvs_pid"
	wait "$kvs_pid"
	expect_eq "daemon: SIGTERM, exit 0" 0 $?
	kvs_pid=""
	# the API server's bounds: a list page, a watch event past --k8s-list-max-bytes,
	# --k8s-event-max-bytes (defaults 64M, 3M) is abandoned with a log line naming the flag
	dsvc '{"kvsplice.io/route":"round-robin"}'
	k8s_daemon() { # k8s_daemon NAME FLAG...: a kvsplice on namespace daemon; sets kvs_pid, kport
		rm -f "$dir/$1.ports"
		"$build/kvsplice" --kubernetes --k8s-api "https://127.0.0.1:$aport" \
			--k8s-token "$dir/token" --k8s-ca "$dir/certs/ca.crt" --k8s-namespace daemon \
			--no-bpf --no-events --no-tokenizer --router round-robin --listen 127.0.0.1:0 \
			--admin 127.0.0.1:0 --port-file "$dir/$1.ports" --scrape-interval 0 "${@:2}" \
			2>"$dir/$1.log" &
		kvs_pid=$!
		for _ in $(seq 100); do [ -s "$dir/$1.ports" ] && break; sleep 0.05; done
		read -r _ kport <"$dir/$1.ports"
	}
	logged() { # logged FILE TEXT: TEXT appears in FILE within 5 s
		for _ in $(seq 50); do grep -qF -- "$2" "$1" && return 0; sleep 0.1; done
		return 1
	}
	k8s_daemon kvsl --k8s-list-max-bytes 300
	logged "$dir/kvsl.log" "list page larger than 300 bytes (--k8s-list-max-bytes): listing again"
	ok $? "--k8s-list-max-bytes 300: a list page over it is abandoned, logged with the flag"
	expect_eq "... nothing listed: /readyz says no" 503 \
		"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$kport/readyz")"
	expect_eq "kvsplice_k8s_limit_list_bytes shows --k8s-list-max-bytes" 300 \
		"$(metric kvsplice_k8s_limit_list_bytes)"
	kill -TERM "$kvs_pid"
	wait "$kvs_pid"
	k8s_daemon kvse --k8s-event-max-bytes 400
	wait_metric kvsplice_endpoints 1
	ok $? "--k8s-event-max-bytes 400: listed (a list page may be larger)"
	dslice qwen-b "$pb" "[$(ep 127.0.0.1 up-b),$(ep 127.0.0.2 up-c),$(ep 127.0.0.3 up-d)]"
	logged "$dir/kvse.log" "watch event larger than 400 bytes (--k8s-event-max-bytes): listing again"
	ok $? "... a watch event over it is abandoned, logged with the flag"
	wait_metric kvsplice_endpoints 3
	ok $? "... and the relist after the backoff brings the change (3 endpoints)"
	expect_eq "kvsplice_k8s_limit_event_bytes shows --k8s-event-max-bytes" 400 \
		"$(metric kvsplice_k8s_limit_event_bytes)"
	kill -TERM "$kvs_pid"
	wait "$kvs_pid"
	expect_eq "SIGTERM, exit 0" 0 $?
	kvs_pid=""
	kill "$up_a" "$up_b" 2>/dev/null
	wait "$up_a" "$up_b" 2>/dev/null
else
	skip "the daemon with --kubernetes" "$build/kvsplice has no --kubernetes (main.c patch not applied)"
fi

# --- 12. stop: the source's thread ends at once -------------------------------------------------
t0=$(date +%s%N)
kill -TERM "$dump_pid"
wait "$dump_pid"
rc=$?
dump_pid=""
ms=$((($(date +%s%N) - t0) / 1000000))
expect_eq "SIGTERM: the driver frees the source and exits 0 (${ms} ms)" "0 1" "$rc $((ms < 2000))"
expect_eq "no sanitizer report from the drivers (a sanitizer build: KVS_BUILD=...)" "" \
	"$(grep -h -m1 'Sanitizer\|runtime error' "$dir/dump.err" "$dir/bad.err")"
tap_done
