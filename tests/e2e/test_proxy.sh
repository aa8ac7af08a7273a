#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsplice on loopback (--no-bpf) in front of small real HTTP/1.1 upstreams (tests/e2e/upstream.py,
# each on a port the kernel picked), driven by curl and raw sockets: keep-alive re-routing,
# chunked bodies, SSE streaming, pass-through, Upgrade (a tunnel only after the 101) and CONNECT
# (405), every error answer while another client streams, retries, timeouts, SIGTERM drain,
# reload, metrics. Limits under abuse: tests/e2e/test_proxy_limits.sh.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

# the sanitizer build when there is one (make test builds it): leaks and memory errors fail the run
KVS=${KVS:-build-asan/kvsplice}
[ -x "$KVS" ] || KVS=build/kvsplice
# Debian's python3 directly: a pyenv shim in PATH costs seconds per start on a loaded machine
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
UP=tests/e2e/upstream.py
tmp=$(mktemp -d /tmp/kvs-proxy-test.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# start_up NAME [--echo-raw]: starts an upstream, sets $port
start_up() {
	"$PY" "$UP" "$@" >"$tmp/$1.port" 2>"$tmp/$1.err" &
	pids+=($!)
	for _ in $(seq 100); do
		[ -s "$tmp/$1.port" ] && break
		sleep 0.05
	done
	port=$(cat "$tmp/$1.port")
}

# a port nothing listens on (bound then closed)
dead_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_kvs NAME SERVICES_FILE [flags...]: sets $lport $aport $kpid
start_kvs() {
	local name=$1 svc=$2
	shift 2
	rm -f "$tmp/$name.ports"
	"$KVS" --no-bpf --services "$svc" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
		--port-file "$tmp/$name.ports" "$@" >"$tmp/$name.log" 2>&1 &
	kpid=$!
	pids+=($kpid)
	for _ in $(seq 100); do
		[ -s "$tmp/$name.ports" ] && break
		sleep 0.05
	done
	read -r lport aport <"$tmp/$name.ports"
}

metric() { # metric ADMIN_PORT 'name{labels}' -> value (0 if absent)
	curl -s "http://127.0.0.1:$1/metrics" | awk -v k="$2" '$1 == k { print $2; f=1 } END { if (!f) print 0 }'
}

# reload_and_wait [hup]: waits (up to 5 s) until kvsplice loaded a new services snapshot, after a
# SIGHUP when asked (a fixed sleep is flaky on a loaded machine)
reload_and_wait() {
	local r0 r
	r0=$(metric "$MADM" kvsplice_services_reloads_total)
	[ "${1:-}" = hup ] && kill -HUP "$MAIN_PID"
	for _ in $(seq 100); do
		r=$(metric "$MADM" kvsplice_services_reloads_total)
		[ "$r" -gt "$r0" ] && return 0
		sleep 0.05
	done
	return 1
}

svc_json() { # svc_json NAME PORT...: one Service with endpoints on 127.0.0.1
	local name=$1 sep="" i=0
	shift
	printf '{"services":[{"name":"%s","cluster_ip":"10.96.0.50","port":8000,"endpoints":[' "$name"
	for p in "$@"; do
		i=$((i + 1))
		printf '%s{"name":"e%d","ip":"127.0.0.1","port":%s}' "$sep" "$i" "$p"
		sep=,
	done
	printf ']}]}\n'
}

[ -x "$KVS" ] || { echo "not ok - $KVS not built"; exit 1; }

start_up w1; P1=$port
start_up w2; P2=$port
svc_json qwen "$P1" "$P2" >"$tmp/svc.json"
start_kvs main "$tmp/svc.json" --router round-robin --max-head 4K --max-body 64K --header-timeout 1 --idle-timeout 2
MAIN_PID=$kpid MAIN=$lport MADM=$aport
base=http://127.0.0.1:$MAIN

# --- admin -----------------------------------------------------------------------------------
expect_eq "/healthz answers 200" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MADM/healthz")"
expect_eq "/readyz answers 200 when ready" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MADM/readyz")"
check "/metrics is Prometheus text with the proxy's counters" \
	bash -c "curl -s http://127.0.0.1:$MADM/metrics | grep -q '^# TYPE kvsplice_requests_total counter'"

# --- keep-alive: a new upstream choice per request on one connection ---------------------------
out=$(curl -s -w '%{num_connects}\n' "$base/who" "$base/who" "$base/who" "$base/who")
expect_eq "four requests on one client connection (curl reused it)" "1 0 0 0" \
	"$(echo "$out" | grep -E '^[0-9]+$' | tr '\n' ' ' | sed 's/ $//')"
names=$(echo "$out" | grep -E '^w[0-9]' | tr '\n' ' ')
expect_eq "keep-alive requests alternate between the two upstreams" "w1 w2 w1 w2 " "$names"
reused=$(metric "$MADM" kvsplice_upstream_reused_total)
check "upstream connections are reused from the pool (reused=$reused)" test "$reused" -ge 2

check "/debug/route lists the last decisions, newest first, with endpoint and status" "$PY" -c '
import json,sys,urllib.request
j=json.load(urllib.request.urlopen("http://127.0.0.1:%s/debug/route" % sys.argv[1]))
r=j["routes"]
assert j["router"]=="round-robin" and len(r)>=4, j
assert [x["endpoint"] for x in r[:4]]==["e2","e1","e2","e1"], r[:4]
assert all(x["status"]==200 and x["method"]=="GET" and x["target"]=="/who" and x["service"]=="qwen" and x["attempts"]==1 for x in r[:4]), r[:4]' "$MADM"

check "an Upgrade the upstream ignores (200) leaves the connection HTTP: the next request is parsed and routed" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(5)
s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /who HTTP/1.1\r\nHost: x\r\n\r\n")
buf=b""
while buf.count(b"\nw")<2: buf+=s.recv(65536)
names=[l.split(b": ")[1] for l in buf.split(b"\r\n") if l.startswith(b"X-Upstream")]
assert buf.count(b"HTTP/1.1 200")==2 and len(names)==2 and names[0]!=names[1], buf' "$MAIN"

check "/debug/route records the path without its query string" "$PY" -c '
import json,sys,urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/who?api_key=s3cret&x=1" % sys.argv[1]).read()
raw=urllib.request.urlopen("http://127.0.0.1:%s/debug/route" % sys.argv[2]).read()
r=json.loads(raw)["routes"][0]
assert r["target"]=="/who" and b"s3cret" not in raw, r' "$MAIN" "$MADM"

# --- request bodies ----------------------------------------------------------------------------
resp=$(curl -s -H 'Transfer-Encoding: chunked' --data-binary 'hello chunked world' "$base/echo")
check "chunked request body arrives whole, re-framed with Content-Length" "$PY" -c '
import json,sys; j=json.loads(sys.argv[1])
assert j["body"]=="hello chunked world", j
assert j["headers"].get("content-length")=="19" and "transfer-encoding" not in j["headers"], j' "$resp"
resp=$(curl -s --data-binary x "$base/echo")
check "the worker is told the client's address: X-Forwarded-For: 127.0.0.1" "$PY" -c '
import json,sys; j=json.loads(sys.argv[1])
assert j["headers"].get("x-forwarded-for")=="127.0.0.1", j["headers"]' "$resp"
resp=$(curl -s -H 'X-Forwarded-For: 10.9.8.7, 10.1.1.1' -H 'X-Forwarded-For: 10.2.2.2' --data-binary x "$base/echo")
check "the client's address appended to the addresses earlier proxies listed, one header" "$PY" -c '
import json,sys; j=json.loads(sys.argv[1])
assert j["headers"].get("x-forwarded-for")=="10.9.8.7, 10.1.1.1, 10.2.2.2, 127.0.0.1", j["headers"]' "$resp"
head -c 40000 /dev/urandom | base64 -w0 >"$tmp/body40k"
resp=$(curl -s -H 'Expect: 100-continue' --data-binary @"$tmp/body40k" "$base/echo")
check "Expect: 100-continue answered by the proxy, body forwarded, Expect not" "$PY" -c '
import json,sys; j=json.loads(sys.argv[1]); n=int(sys.argv[2])
assert j["body_len"]==n, (j["body_len"], n)
assert "expect" not in j["headers"], j["headers"]' "$resp" "$(stat -c %s "$tmp/body40k")"

# --- streaming ---------------------------------------------------------------------------------
check "SSE: first event arrives long before the upstream finishes (no buffering)" "$PY" -c '
import socket,sys,time
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])))
t0=time.time()
s.sendall(b"GET /sse?n=5&ms=300 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
buf=b""; first=None
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
    if first is None and b"data: " in buf: first=time.time()-t0
total=time.time()-t0
assert first is not None and first < 0.6 and total > 1.2, (first, total)
assert buf.count(b"data: ")==5 and buf.endswith(b"0\r\n\r\n"), buf[-100:]
print("first %.3fs total %.3fs" % (first,total))' "$MAIN"
for mode in splice copy; do
	[ $mode = copy ] && { start_kvs copy "$tmp/svc.json" --relay copy --no-forwarded-for; b2=http://127.0.0.1:$lport; } || b2=$base
	expect_eq "10 MB Content-Length response intact ($mode)" "200 10000000" \
		"$(curl -s -o "$tmp/big" -w '%{http_code} %{size_download}' "$b2/big?bytes=10000000")"
	expect_eq "10 MB chunked response intact ($mode)" "200 10000000" \
		"$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "$b2/bigchunked?bytes=10000000")"
	expect_eq "response delimited by close relayed ($mode)" "until-close" "$(curl -s "$b2/eof")"
done
resp=$(curl -s -H 'X-Forwarded-For: 10.9.8.7' --data-binary x "$b2/echo")
check "--no-forwarded-for: X-Forwarded-For forwarded as the client sent it" "$PY" -c '
import json,sys; j=json.loads(sys.argv[1])
assert j["headers"].get("x-forwarded-for")=="10.9.8.7", j["headers"]' "$resp"

# --- pipelining --------------------------------------------------------------------------------
check "pipelined requests answered in order" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])))
s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /close HTTP/1.1\r\nHost: x\r\n\r\n")
buf=b""
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
assert buf.count(b"HTTP/1.1 200")==3, buf
i1=buf.index(b"X-Upstream"); i2=buf.index(b"\"body\": \"abc\""); i3=buf.index(b"bye")
assert i1 < i2 < i3, buf' "$MAIN"

# --- errors, while another client streams --------------------------------------------------------
"$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])))
s.sendall(b"GET /sse?n=8&ms=250 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
buf=b""
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
open(sys.argv[2],"wb").write(buf)' "$MAIN" "$tmp/bystander" &
bystander=$!
sleep 0.2
raw() { # raw PORT BYTES(printf format) -> the answer's status line
	"$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(5)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
buf=b""
try:
    while True:
        d=s.recv(65536)
        if not d: break
        buf+=d
except Exception as e: buf+=b" TIMEOUT"
print(buf.split(b"\r\n")[0].decode("latin-1"), "|closed" if not buf.endswith(b"TIMEOUT") else "|open")' "$@"
}
expect_eq "malformed header: 400 then close" "HTTP/1.1 400 Bad Request |closed" \
	"$(raw "$MAIN" 'GET / HTTP/1.1\r\nHost: x\r\nBad header\r\n\r\n')"
expect_eq "CL+TE smuggling attempt: 400" "HTTP/1.1 400 Bad Request |closed" \
	"$(raw "$MAIN" 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')"
expect_eq "bad chunk size: 400" "HTTP/1.1 400 Bad Request |closed" \
	"$(raw "$MAIN" 'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')"
big=$("$PY" -c 'print("X-Pad: " + "a"*5000)')
expect_eq "head over --max-head: 431" "HTTP/1.1 431 Request Header Fields Too Large |closed" \
	"$(raw "$MAIN" "GET / HTTP/1.1\\r\\nHost: x\\r\\n$big\\r\\n\\r\\n")"
expect_eq "Content-Length over --max-body: 413 at once" "HTTP/1.1 413 Content Too Large |closed" \
	"$(raw "$MAIN" 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n')"
check "413 reaches a client that sent its whole oversized body first (lingering close, no reset)" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(5)
body=b"x"*600000
try: s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
except OSError: pass
buf=b""
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
assert buf.startswith(b"HTTP/1.1 413"), buf[:100]' "$MAIN"
head -c 70000 /dev/zero | tr '\0' a >"$tmp/body70k"
code=$(curl -s -o "$tmp/413.json" -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/body70k" "$base/echo")
expect_eq "chunked body over --max-body: 413" 413 "$code"
check "413 body is an OpenAI error object" "$PY" -c '
import json,sys; e=json.load(open(sys.argv[1]))["error"]
assert e["code"]==413 and e["type"]=="invalid_request_error" and e["message"] and e["param"] is None' "$tmp/413.json"
expect_eq "unsupported transfer coding: 501" "HTTP/1.1 501 Not Implemented |closed" \
	"$(raw "$MAIN" 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n')"
expect_eq "CONNECT: 405 then close" "HTTP/1.1 405 Method Not Allowed |closed" \
	"$(raw "$MAIN" 'CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n\x16\x03\x01')"
check "CONNECT's 405 is an OpenAI error object" "$PY" -c '
import json,socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(5)
s.sendall(b"CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n")
buf=b""
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
e=json.loads(buf.split(b"\r\n\r\n",1)[1])["error"]
assert e["code"]==405 and e["type"]=="invalid_request_error" and e["param"] is None and e["message"], e' "$MAIN"
t0=$(date +%s%N)
expect_eq "request head not finished within --header-timeout: 408" "HTTP/1.1 408 Request Timeout |closed" \
	"$(raw "$MAIN" 'GET / HTTP/1.1\r\nHost: x\r\n')"
dt=$((($(date +%s%N) - t0) / 1000000))
check "408 came after about 1 s (${dt} ms)" test "$dt" -ge 900 -a "$dt" -le 2600
wait "$bystander"
check "the streaming bystander got all 8 events untouched" "$PY" -c '
import sys; b=open(sys.argv[1],"rb").read()
assert b.startswith(b"HTTP/1.1 200") and b.count(b"data: ")==8 and b.endswith(b"0\r\n\r\n"), b[-200:]' "$tmp/bystander"

check "idle keep-alive connection closed after --idle-timeout" "$PY" -c '
import socket,sys,time
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(6)
s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n")
d=s.recv(65536); assert d.startswith(b"HTTP/1.1 200"), d
t0=time.time()
while s.recv(65536): pass
dt=time.time()-t0
assert 1.5 < dt < 4, dt' "$MAIN"

t0=$(date +%s%N)
code=$(curl -s -o "$tmp/504.json" -w '%{http_code}' "$base/slow?ms=4000")
dt=$((($(date +%s%N) - t0) / 1000000))
expect_eq "endpoint silent for --idle-timeout after the request: 504" 504 "$code"
check "504 came after about 2 s (${dt} ms)" test "$dt" -ge 1800 -a "$dt" -le 3800

# --- HEAD, HTTP/1.0 ------------------------------------------------------------------------------
out=$(curl -s -I -o /dev/null -w '%{http_code} %{num_connects}\n' "$base/who" -o /dev/null "$base/who")
expect_eq "HEAD (Content-Length, no body) then GET on the same connection" "200 1 200 0" "$(echo $out)"
expect_eq "HTTP/1.0 client served" "w" "$(curl -s --http1.0 "$base/who" | cut -c1)"

# --- many clients at once ------------------------------------------------------------------------
check "40 concurrent keep-alive clients x 15 mixed requests: all answered correctly" "$PY" -c '
import socket,sys,threading,json
port=int(sys.argv[1]); errs=[]
def rd(s, buf):
    d=s.recv(65536)
    if not d: raise EOFError("closed")
    return buf+d
def client(k):
    try:
        s=socket.create_connection(("127.0.0.1",port)); s.settimeout(10); buf=b""
        for i in range(15):
            if i%3==0:
                s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n")
                while b"\n" not in buf.split(b"\r\n\r\n",1)[-1] or b"\r\n\r\n" not in buf: buf=rd(s,buf)
                assert buf.startswith(b"HTTP/1.1 200"), buf[:80]
            elif i%3==1:
                body=(b"%d-%d-" % (k,i))*50
                s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body),body))
                while True:
                    if b"\r\n\r\n" in buf:
                        h,b=buf.split(b"\r\n\r\n",1)
                        n=int([l for l in h.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
                        if len(b)>=n: break
                    buf=rd(s,buf)
                j=json.loads(b[:n]); assert j["body_len"]==len(body) and j["body"]==body.decode(), j
                buf=b[n:]; continue
            else:
                s.sendall(b"GET /sse?n=3&ms=10 HTTP/1.1\r\nHost: x\r\n\r\n")
                while not buf.endswith(b"0\r\n\r\n"): buf=rd(s,buf)
                assert buf.count(b"data: ")==3, buf
            buf=b""
        s.close()
    except Exception as e: errs.append("%d: %r" % (k,e))
ts=[threading.Thread(target=client,args=(k,)) for k in range(40)]
[t.start() for t in ts]; [t.join() for t in ts]
assert not errs, errs[:3]' "$MAIN"
for _ in $(seq 60); do [ "$(metric "$MADM" kvsplice_connections_active)" = 0 ] && break; sleep 0.05; done
expect_eq "no client connection left open after they closed" 0 "$(metric "$MADM" kvsplice_connections_active)"

# --- retries, 502, 503 (Services reloaded by SIGHUP) ------------------------------------------
D1=$(dead_port)
D2=$(dead_port)
fails0=$(metric "$MADM" kvsplice_upstream_connect_failures_total)
svc_json qwen "$D1" "$P1" "$D2" "$P2" >"$tmp/svc.json.new" && mv "$tmp/svc.json.new" "$tmp/svc.json"
reload_and_wait hup
codes=$(for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null -w '%{http_code} ' "$base/who"; done)
expect_eq "dead endpoints: every request retried on a live one" "200 200 200 200 200 200 200 200 " "$codes"
fails=$(metric "$MADM" kvsplice_upstream_connect_failures_total)
# Two right ways for the dead endpoints to leave: a request's connect is refused (counted), or the
# scraper finds them dead first (on a loaded machine it can win the race: then nothing connects to
# them). Which one it was is in /debug/workers; each is checked for what it implies.
by=$(curl -s "http://127.0.0.1:$MADM/debug/workers" | python3 -c '
import json, sys
print(" ".join(str(w.get("down_by")) for w in json.load(sys.stdin)["workers"]
               if w["name"].endswith(("/e1", "/e3"))))')
if [ "$fails" -gt "$fails0" ] || [ "$by" != "scrapes scrapes" ]; then
	check "connect failures counted ($fails0 -> $fails; dead endpoints down by: $by)" \
		test "$fails" -gt "$fails0"
else
	ok 0 "both dead endpoints were down by their scrapes before any connect (nothing to count)"
fi
svc_json qwen "$D1" "$D2" >"$tmp/svc.json.new" && mv "$tmp/svc.json.new" "$tmp/svc.json"
reload_and_wait hup
code=$(curl -s -o "$tmp/502.json" -w '%{http_code}' "$base/who")
expect_eq "all endpoints down: 502 after trying each" 502 "$code"
check "502 body is an OpenAI error object" "$PY" -c '
import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["code"]==502 and e["type"]=="server_error"' "$tmp/502.json"
svc_json qwen >"$tmp/svc.json.new" && mv "$tmp/svc.json.new" "$tmp/svc.json"
reload_and_wait hup
expect_eq "no endpoint: 503" 503 "$(curl -s -o /dev/null -w '%{http_code}' "$base/who")"
echo '{"services": [' >"$tmp/svc.json.new" && mv "$tmp/svc.json.new" "$tmp/svc.json"
e0=$(metric "$MADM" kvsplice_services_reload_errors_total)
kill -HUP "$MAIN_PID"
for _ in $(seq 100); do [ "$(metric "$MADM" kvsplice_services_reload_errors_total)" -gt "$e0" ] && break; sleep 0.05; done
expect_eq "a broken services file is refused, the last good one kept (still 503)" 503 \
	"$(curl -s -o /dev/null -w '%{http_code}' "$base/who")"
svc_json qwen "$P1" "$P2" >"$tmp/svc.json.new" && mv "$tmp/svc.json.new" "$tmp/svc.json"
reload_and_wait # picked up without SIGHUP: the file changed
expect_eq "services file change picked up without a signal" 200 \
	"$(curl -s -o /dev/null -w '%{http_code}' "$base/who")"
check "reload errors counted" test "$(metric "$MADM" kvsplice_services_reload_errors_total)" -ge 1

check "error counters moved" bash -c "
	for r in bad_request head_too_large body_too_large no_endpoint bad_gateway gateway_timeout request_timeout; do
		v=\$(curl -s http://127.0.0.1:$MADM/metrics | awk -v k=\"kvsplice_errors_total{reason=\\\"\$r\\\"}\" '\$1==k{print \$2}')
		[ \"\${v:-0}\" -ge 1 ] || { echo \"\$r=\$v\"; exit 1; }
	done"

# --- upstream closing a pooled connection: retried on a fresh one ---------------------------------
codes=$(for i in 1 2 3 4; do curl -s -o /dev/null -o /dev/null -w '%{http_code} ' "$base/close" "$base/who"; done)
expect_eq "responses with Connection: close, then reuse" "200 200 200 200 200 200 200 200 " "$codes"

# --- pass-through ------------------------------------------------------------------------------
start_up r1 --echo-raw; R1=$port
svc_json raw "$R1" >"$tmp/raw.json"
start_kvs raw "$tmp/raw.json"
RAW=$lport RADM=$aport
check "TLS ClientHello bytes relayed unchanged as plain TCP" "$PY" -c '
import socket,sys,os
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])))
msg=b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"+os.urandom(3000)
s.sendall(msg); s.shutdown(socket.SHUT_WR)
buf=b""
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
assert buf==b"r1:"+msg, (len(buf), buf[:20])' "$RAW"
check "HTTP/2 preface relayed unchanged" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])))
msg=b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
s.sendall(msg); s.shutdown(socket.SHUT_WR)
buf=b""
while True:
    d=s.recv(65536)
    if not d: break
    buf+=d
assert buf==b"r1:"+msg, buf' "$RAW"
check "interactive pass-through stream (server speaks, client answers)" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(3)
s.sendall(b"\x00hello")
got=b""
while len(got) < 9: got+=s.recv(100)
assert got==b"r1:\x00hello", got
s.sendall(b"more"); got=b""
while len(got) < 4: got+=s.recv(100)
assert got==b"more", got' "$RAW"
expect_eq "pass-through connections counted" 3 "$(metric "$RADM" kvsplice_passthrough_connections_total)"
check "Upgrade: a tunnel only after the upstream's 101; bytes sent early wait for it, then flow both ways" "$PY" -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(3)
# a client that does not wait for the 101: its early bytes must not reach the upstream before it
s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05early")
got=b""
while b"\n" not in got.partition(b"early=")[2] or len(got.partition(b"early=")[2].partition(b"\n")[2]) < 7:
    got+=s.recv(1000)
head,_,rest=got.partition(b"\r\n\r\n")
assert head.startswith(b"HTTP/1.1 101 ") and rest==b"early=0\n\x81\x05early", got
s.sendall(b"\x81\x05hello"); got=b""
while len(got) < 7: got+=s.recv(100)
assert got==b"\x81\x05hello", got' "$RAW"
expect_eq "upgrades counted (at the 101)" 1 "$(metric "$RADM" kvsplice_upgrades_total)"


# --- out of file descriptors: accepts pause, nothing spins, service resumes ----------------------
svc_json qwen "$P1" >"$tmp/fd.json"
( ulimit -n 40; exec "$KVS" --no-bpf --services "$tmp/fd.json" --listen 127.0.0.1:0 \
	--admin 127.0.0.1:0 --port-file "$tmp/fd.ports" ) >"$tmp/fd.log" 2>&1 &
FDPID=$!
pids+=($FDPID)
for _ in $(seq 100); do [ -s "$tmp/fd.ports" ] && break; sleep 0.05; done
read -r fdport _ <"$tmp/fd.ports"
check "60 idle connections against a 40-descriptor limit, then a request is served" "$PY" -c '
import socket,sys,time
port=int(sys.argv[1])
ss=[socket.create_connection(("127.0.0.1",port)) for i in range(60)]
time.sleep(0.8)
for s in ss: s.close()
time.sleep(0.5)
s=socket.create_connection(("127.0.0.1",port)); s.settimeout(5)
s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
d=s.recv(1000); assert d.startswith(b"HTTP/1.1 200"), d' "$fdport"
n=$(grep -c "pausing accepts" "$tmp/fd.log")
check "accepts paused (logged $n times in ~1.3 s, not a busy loop)" test "$n" -ge 1 -a "$n" -le 40
kill "$FDPID"

# --- SIGTERM drain -------------------------------------------------------------------------------
q0=$(metric "$MADM" kvsplice_requests_total)
curl -s -o "$tmp/slow" -w '%{http_code}' "$base/slow?ms=1500" >"$tmp/slow.code" &
slow=$!
# SIGTERM once the request is in kvsplice
for _ in $(seq 100); do [ "$(metric "$MADM" kvsplice_requests_total)" -gt "$q0" ] && break; sleep 0.02; done
kill -TERM "$MAIN_PID"
for _ in $(seq 60); do [ "$(metric "$MADM" kvsplice_draining)" = 1 ] && break; sleep 0.05; done
expect_eq "after SIGTERM: /readyz 503 while draining" 503 \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MADM/readyz")"
# The listener still accepts for PROXY_STOP_GRACE_MS (what BPF sent its way just before it left
# the sockmap is served, not reset), then closes while the drain goes on.
refused() { ! curl -s -o /dev/null --max-time 2 "$base/who"; }
for _ in $(seq 40); do refused && break; sleep 0.05; done
ok $(refused && kill -0 "$MAIN_PID" 2>/dev/null && echo 0 || echo 1) \
	"after SIGTERM: the listener closes after its grace while the drain goes on (new connects refused)"
wait "$slow"
expect_eq "the request in flight at SIGTERM completed" 200 "$(cat "$tmp/slow.code")"
for _ in $(seq 50); do kill -0 "$MAIN_PID" 2>/dev/null || break; sleep 0.1; done
check "kvsplice exited after draining" bash -c "! kill -0 $MAIN_PID 2>/dev/null"
wait "$MAIN_PID"
expect_eq "exit status 0" 0 "$?"

tap_done
