#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsplice's bounds under abuse, on loopback (--no-bpf) in front of tests/e2e/upstream.py: no CPU
# spin on a dead upstream (pass-through and response relay) and the idle timeout honoured; bounded
# memory while a client pipelines requests kvsplice answers itself; buffers released after a
# request; the total buffered bytes bounded (503 + Retry-After beyond); connections capped
# overall and per client address; the admin port under a connection flood with few descriptors;
# pooled upstream connections checked before reuse; a POST not retried once it reached a worker;
# out-of-range flag values refused; the bounds that are not per request set by their flags and
# shown in /metrics (listen backlog, KV queue; the admin listener's connections, head and
# timeout, the KV queue's batch count, the largest worker /metrics body read and head, a scrape's
# deadline, the largest KV event message, the replay deadline, the approximate view's entries,
# the largest --services file, each also at work; libzmq's KV event queue); failed scrapes counted
# by cause.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

KVS=${KVS:-build-asan/kvsplice}
[ -x "$KVS" ] || KVS=build/kvsplice
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
UP=tests/e2e/upstream.py
TCK=$(getconf CLK_TCK)
tmp=$(mktemp -d /tmp/kvs-limits-test.XXXXXX)
pids=()
kvs=() # NAME:PID of every kvsplice started
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

start_up() { # start_up NAME [--echo-raw]: sets $port
	"$PY" "$UP" "$@" >"$tmp/$1.port" 2>"$tmp/$1.err" &
	pids+=($!)
	for _ in $(seq 100); do
		[ -s "$tmp/$1.port" ] && break
		sleep 0.05
	done
	port=$(cat "$tmp/$1.port")
}

start_kvs() { # start_kvs NAME SERVICES_FILE [flags...]: sets $lport $aport $kpid
	local name=$1 svc=$2
	shift 2
	rm -f "$tmp/$name.ports"
	"$KVS" --no-bpf --services "$svc" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
		--port-file "$tmp/$name.ports" "$@" >"$tmp/$name.log" 2>&1 &
	kpid=$!
	pids+=($kpid)
	kvs+=("$name:$kpid")
	for _ in $(seq 100); do
		[ -s "$tmp/$name.ports" ] && break
		sleep 0.05
	done
	lport="" aport=""
	read -r lport aport <"$tmp/$name.ports"
	ok $? "kvsplice $name started" || cat "$tmp/$name.log"
}

metric() { # metric ADMIN_PORT 'name{labels}' -> value ("absent" when the series does not exist)
	curl -s "http://127.0.0.1:$1/metrics" |
		awk -v k="$2" '$1 == k { print $2; f=1 } END { if (!f) print "absent" }'
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

cpu_ms() { # cpu_ms PID: user+system CPU time so far, ms
	awk -v t="$TCK" '{ print int(($14 + $15) * 1000 / t) }' "/proc/$1/stat"
}

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

# wait_metric ADMIN NAME VALUE SECS: until the metric equals VALUE; returns 1 on timeout
wait_metric() {
	for _ in $(seq $(($4 * 20))); do
		[ "$(metric "$1" "$2")" = "$3" ] && return 0
		sleep 0.05
	done
	return 1
}

[ -x "$KVS" ] || { echo "not ok - $KVS not built"; exit 1; }

# --- 1. no spin on a dead upstream; the idle timeout honoured ------------------------------------
start_up r1 --echo-raw; R1=$port
svc_json raw "$R1" >"$tmp/raw.json"
start_kvs raw "$tmp/raw.json" --idle-timeout 1.5
RAW=$lport RADM=$aport RPID=$kpid
"$PY" -c '
import socket,sys,time
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(3)
s.sendall(b"\x00finrst")
got=b""
while True:
    d=s.recv(100)
    if not d: break
    got+=d
assert got==b"r1:", got
open(sys.argv[2],"w").write("eof\n")
time.sleep(8)' "$RAW" "$tmp/finrst.state" &
holder=$!
for _ in $(seq 60); do [ -s "$tmp/finrst.state" ] && break; sleep 0.05; done
sleep 0.6 # the upstream's reset has arrived
c0=$(cpu_ms "$RPID")
sleep 2
c1=$(cpu_ms "$RPID")
check "pass-through, upstream closed then reset, client idle: no CPU spin ($((c1 - c0)) ms of CPU in 2 s)" \
	test $((c1 - c0)) -lt 300
check "... and the connection is closed by --idle-timeout (1.5 s)" wait_metric "$RADM" kvsplice_connections_active 0 3
kill "$holder" 2>/dev/null

start_up w1; P1=$port
svc_json qwen "$P1" >"$tmp/one.json"
start_kvs resp "$tmp/one.json" --idle-timeout 2
RESP=$lport RSADM=$aport RSPID=$kpid
"$PY" -c '
import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1",int(sys.argv[1])))
s.sendall(b"GET /rst HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(10)' "$RESP" &
holder=$!
# the upstream writes until kvsplice stops reading (client not reading), waits 0.5 s, resets
sleep 1.8
c0=$(cpu_ms "$RSPID")
sleep 1.5
c1=$(cpu_ms "$RSPID")
check "response relay, client not reading, upstream reset: no CPU spin ($((c1 - c0)) ms of CPU in 1.5 s)" \
	test $((c1 - c0)) -lt 300
check "... and the connection is closed by --idle-timeout (2 s)" wait_metric "$RSADM" kvsplice_connections_active 0 4
kill "$holder" 2>/dev/null

# --- 2. pipelined requests kvsplice answers itself: memory bounded ---------------------------------
svc_json empty >"$tmp/empty.json"
# a small quarantine, so that the RSS of a sanitizer build shows what kvsplice holds
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:quarantine_size_mb=4" start_kvs noep "$tmp/empty.json"
NOEP=$lport NPID=$kpid
rss0=$(rss_kb "$NPID")
check "200 MiB of pipelined requests at a Service with no endpoint: every one answered 503, RSS bounded" "$PY" -c '
import socket,sys,threading,time
port,pid,rss0=int(sys.argv[1]),sys.argv[2],int(sys.argv[3])
req=b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a"*2000 + b"\r\n\r\n"
total=200<<20; n=total//len(req)
s=socket.create_connection(("127.0.0.1",port)); s.settimeout(30)
peak=[0]; stop=[False]; got=[0]; tail=[b""]
def rss():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
def sample():
    while not stop[0]:
        peak[0]=max(peak[0], rss()); time.sleep(0.05)
def reader():
    while True:
        d=s.recv(1<<20)
        if not d: break
        b=tail[0]+d
        got[0]+=b.count(b"HTTP/1.1 503 ")
        tail[0]=b[-12:]
ts=[threading.Thread(target=sample), threading.Thread(target=reader)]
[t.start() for t in ts]
batch=req*256
for i in range(n//256): s.sendall(batch)
s.sendall(req*(n%256))
s.shutdown(socket.SHUT_WR)
ts[1].join(); stop[0]=True; ts[0].join()
grow=(peak[0]-rss0)//1024
print("requests", n, "answered", got[0], "RSS growth", grow, "MiB")
assert got[0]==n, (got[0], n)
assert grow < 48, grow' "$NOEP" "$NPID" "$rss0"

# --- 3. per-connection memory, the total bound, connection caps -----------------------------------
# a small quarantine, so that memory freed shows in the RSS of a sanitizer build too
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:quarantine_size_mb=4" \
	start_kvs mem "$tmp/one.json" --max-body 32M --max-buffered 48M
MEM=$lport MADM=$aport MPID=$kpid
head -c $((32 << 20)) /dev/zero | tr '\0' a >"$tmp/body32m"
rss0=$(rss_kb "$MPID")
"$PY" -c '
import socket,sys,time,json
port,pid,body=int(sys.argv[1]),sys.argv[2],open(sys.argv[3],"rb").read()
ss=[]
for i in range(6):
    s=socket.create_connection(("127.0.0.1",port)); s.settimeout(30)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    buf=b""
    while b"\r\n\r\n" not in buf: buf+=s.recv(65536)
    h,b=buf.split(b"\r\n\r\n",1)
    n=int([l for l in h.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(b)<n: b+=s.recv(65536)
    assert h.startswith(b"HTTP/1.1 200") and json.loads(b)["body_len"]==len(body), h
    ss.append(s)
time.sleep(1.5)
print(open("/proc/%s/status" % pid).read().split("VmRSS:")[1].split()[0])
time.sleep(0.1)' "$MEM" "$MPID" "$tmp/body32m" >"$tmp/mem.out" 2>&1
ok $? "6 keep-alive connections, one 32 MiB POST each, all echoed" || cat "$tmp/mem.out"
rss1=$(tail -n1 "$tmp/mem.out")
check "... then idle: RSS $(((${rss1//[^0-9]/0} - rss0) / 1024)) MiB above the start (< 40): buffers released" \
	test $((${rss1//[^0-9]/0} - rss0)) -lt $((40 << 10))
b=$(metric "$MADM" kvsplice_buffer_bytes)
check "... kvsplice_buffer_bytes back to small ($b)" test "$b" != absent -a "${b/absent/999999999}" -lt $((1 << 20))

check "--max-buffered: a body that would pass it is shed with 503 + Retry-After, others go on" "$PY" -c '
import socket,sys,time,json
port=int(sys.argv[1])
def resp(s):
    buf=b""
    while b"\r\n\r\n" not in buf:
        d=s.recv(65536)
        if not d: break
        buf+=d
    return buf
a=socket.create_connection(("127.0.0.1",port)); a.settimeout(10)
a.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (30<<20) + b"a"*1000)
time.sleep(0.3)
b=socket.create_connection(("127.0.0.1",port)); b.settimeout(10)
b.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (30<<20) + b"b"*1000)
r=resp(b)
assert r.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: " in r and b"\"code\":503" in r.replace(b" ",b""), r[:300]
c=socket.create_connection(("127.0.0.1",port)); c.settimeout(10)
c.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n")
r=resp(c); assert r.startswith(b"HTTP/1.1 200"), r[:100]
a.sendall(b"a"*((30<<20)-1000))
r=resp(a); assert r.startswith(b"HTTP/1.1 200"), r[:100]
time.sleep(0.2)
d=socket.create_connection(("127.0.0.1",port)); d.settimeout(10)
d.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (30<<20) + b"d"*(30<<20))
r=resp(d); assert r.startswith(b"HTTP/1.1 200"), r[:100]' "$MEM"
check "... counted in kvsplice_shed_total" test "$(metric "$MADM" 'kvsplice_shed_total{reason="max_buffered"}')" = 1

start_kvs caps "$tmp/one.json" --max-conns 12 --max-conns-per-ip 4
CAPS=$lport CADM=$aport
check "--max-conns-per-ip 4 and --max-conns 12: the 5th connection of an address and the 13th overall get 503 + Retry-After" "$PY" -c '
import socket,sys,time
port=int(sys.argv[1])
def conn(ip):
    s=socket.socket(); s.bind((ip,0)); s.settimeout(5); s.connect(("127.0.0.1",port)); return s
def ok(s):
    s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n"); d=s.recv(65536)
    assert d.startswith(b"HTTP/1.1 200"), d[:100]
def refused(s):
    buf=b""
    while True:
        d=s.recv(65536)
        if not d: break
        buf+=d
    assert buf.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: " in buf, buf[:200]
a=[conn("127.0.0.1") for i in range(4)]
for s in a: ok(s)
refused(conn("127.0.0.1"))
b=[conn("127.0.0.2") for i in range(4)]+[conn("127.0.0.3") for i in range(4)]
for s in b: ok(s)
refused(conn("127.0.0.4"))
a[0].close(); time.sleep(0.3)
s=conn("127.0.0.1"); ok(s)
for s in a[1:]+b: s.close()' "$CAPS"
check "... refusals counted by reason" test "$(metric "$CADM" 'kvsplice_connections_refused_total{reason="max_conns_per_ip"}') $(metric "$CADM" 'kvsplice_connections_refused_total{reason="max_conns"}')" = "1 1"
check "... and every slot is given back when connections close" wait_metric "$CADM" kvsplice_connections_active 0 3
check "... then 4 connections from one address are accepted again" "$PY" -c '
import socket,sys
port=int(sys.argv[1]); ss=[]
for i in range(4):
    s=socket.create_connection(("127.0.0.1",port)); s.settimeout(5)
    s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n"); d=s.recv(65536)
    assert d.startswith(b"HTTP/1.1 200"), d[:100]; ss.append(s)' "$CAPS"

# --- 4. the admin port under a connection flood, few descriptors ---------------------------------
(
	ulimit -n 40
	exec "$KVS" --no-bpf --services "$tmp/one.json" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
		--port-file "$tmp/afd.ports"
) >"$tmp/afd.log" 2>&1 &
AFDPID=$!
pids+=($AFDPID)
kvs+=("afd:$AFDPID")
for _ in $(seq 100); do [ -s "$tmp/afd.ports" ] && break; sleep 0.05; done
read -r _ afdadm <"$tmp/afd.ports"
"$PY" -c '
import socket,sys,time
ss=[]
for i in range(100):
    try: ss.append(socket.create_connection(("127.0.0.1",int(sys.argv[1])), timeout=0.5))
    except OSError: pass
open(sys.argv[2],"w").write("%d\n" % len(ss))
time.sleep(3)
for s in ss: s.close()
time.sleep(5)' "$afdadm" "$tmp/flood.n" &
flood=$!
for _ in $(seq 100); do [ -s "$tmp/flood.n" ] && break; sleep 0.05; done
sleep 0.3
c0=$(cpu_ms "$AFDPID")
sleep 1.5
c1=$(cpu_ms "$AFDPID")
check "admin flood ($(cat "$tmp/flood.n") idle connections, 40 descriptors): no CPU spin ($((c1 - c0)) ms of CPU in 1.5 s)" \
	test $((c1 - c0)) -lt 300
check "... /healthz answers during the flood" \
	bash -c "[ \"\$(curl -s -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:$afdadm/healthz)\" = 200 ]"
sleep 1.5 # the flood's connections close
check "... and after it" \
	bash -c "[ \"\$(curl -s -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:$afdadm/healthz)\" = 200 ]"
kill "$flood" 2>/dev/null

# --- 6. pooled upstream connections checked before reuse; no blind retry of a POST ---------------
start_kvs pool "$tmp/one.json" --router round-robin
POOL=$lport PADM=$aport PPID_=$kpid
check "stray bytes on a pooled connection (a body after HEAD): the connection is discarded, not reused" "$PY" -c '
import socket,sys,time,os,signal
port,pid=int(sys.argv[1]),int(sys.argv[2])
s=socket.create_connection(("127.0.0.1",port)); s.settimeout(5)
s.sendall(b"HEAD /stray?ms=400 HTTP/1.1\r\nHost: x\r\n\r\n")
d=b""
while b"\r\n\r\n" not in d: d+=s.recv(65536)
assert d.startswith(b"HTTP/1.1 200"), d
# the upstream connection is in the pool now; stop kvsplice so that the next request and the stray
# bytes are seen in one batch, the request first
time.sleep(0.1)
os.kill(pid, signal.SIGSTOP)
try:
    s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.7)
finally:
    os.kill(pid, signal.SIGCONT)
d=b""
while b"\r\n\r\n" not in d: d+=s.recv(65536)
n=int([l for l in d.split(b"\r\n\r\n")[0].split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
while len(d.split(b"\r\n\r\n",1)[1]) < n: d+=s.recv(65536)
assert d.startswith(b"HTTP/1.1 200") and d.endswith(b"\r\n\r\nw1\n"), d' "$POOL" "$PPID_"
check "... counted as stale" test "$(metric "$PADM" kvsplice_upstream_stale_total)" -ge 1
check "a POST whose reused connection dies after the request was written: 502, not sent twice" "$PY" -c '
import socket,sys,urllib.request
port=int(sys.argv[1])
s=socket.create_connection(("127.0.0.1",port)); s.settimeout(5)
s.sendall(b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n"); d=b""
while not d.endswith(b"\r\n\r\nw1\n"): d+=s.recv(65536)
assert d.startswith(b"HTTP/1.1 200"), d
s.sendall(b"POST /die?key=p1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
d=b""
while b"\r\n\r\n" not in d:
    x=s.recv(65536)
    if not x: break
    d+=x
assert d.startswith(b"HTTP/1.1 502"), d[:100]
n=urllib.request.urlopen("http://127.0.0.1:%d/count?key=p1" % port).read()
assert n==b"1\n", n' "$POOL"

# --- 8. out-of-range flag values are refused ------------------------------------------------------
for f in "--max-body 1e30" "--max-body nan" "--max-body inf" "--max-head -1" "--max-buffered 1e300" \
	"--idle-timeout 1e30ms" "--idle-timeout nan" "--idle-timeout infms" "--idle-timeout -1" \
	"--connect-timeout 1e30" "--drain-timeout nanms" "--max-conns -1" "--max-conns-per-ip 1x" \
	"--listen-backlog 0" "--listen-backlog 1e3" "--kv-queue-bytes 0" "--kv-queue-total-bytes -1M" \
	"--admin-max-conns 0" "--admin-max-conns 2x" "--admin-max-head 0" "--admin-max-head 1e30" \
	"--admin-timeout 0" "--admin-timeout nan" "--admin-timeout 1e30ms" "--kv-queue-batches 0" \
	"--kv-queue-batches -3" "--kv-queue-batches 1e4" "--scrape-max-body 0" "--scrape-max-body 1e30" \
	"--scrape-max-body 4X" "--kv-event-max-bytes 0" "--kv-event-max-bytes 1e30" \
	"--kv-event-queue 0" "--kv-event-queue 1e5" "--kv-replay-timeout 0" "--kv-replay-timeout nan" \
	"--scrape-timeout 0" "--scrape-timeout -1" "--scrape-max-head 0" "--scrape-max-head 1e30" \
	"--approx-max-entries 0" "--approx-max-entries 1e6" "--services-max-bytes 0" \
	"--services-max-bytes 16Q" "--k8s-list-max-bytes 0" "--k8s-event-max-bytes -3M"; do
	# shellcheck disable=SC2086
	"$KVS" --no-bpf --services /nonexistent $f >"$tmp/flag.out" 2>&1
	rc=$?
	check "$f refused (exit 2, 'bad value')" \
		bash -c "[ $rc = 2 ] && grep -q 'bad value' '$tmp/flag.out' || { cat '$tmp/flag.out'; exit 1; }"
done

# --- 9. the bounds that are not per request are flags too -----------------------------------------
start_kvs bounds "$tmp/one.json" --listen-backlog 77 --kv-queue-bytes 1M --kv-queue-total-bytes 3M \
	--services-max-bytes 64K
# a listening socket's Send-Q in `ss -ltn` is its backlog
expect_eq "--listen-backlog 77: the proxy listens with a backlog of 77" 77 \
	"$(ss -Hltn "sport = :$lport" | awk '{ print $3 }')"
expect_eq "--kv-queue-bytes 1M: the per-worker replay queue bound" 1048576 \
	"$(metric "$aport" 'kvsplice_kv_queue_limit_bytes{scope="worker"}')"
expect_eq "--kv-queue-total-bytes 3M: the bound over all workers" 3145728 \
	"$(metric "$aport" 'kvsplice_kv_queue_limit_bytes{scope="total"}')"
expect_eq "kvsplice_services_limit_bytes shows --services-max-bytes" 65536 \
	"$(metric "$aport" kvsplice_services_limit_bytes)"

# --- 10. the admin listener's bounds --------------------------------------------------------------
start_kvs admin "$tmp/one.json" --admin-max-conns 2 --admin-max-head 1K --admin-timeout 1.5
ADM=$aport
# the default (32 connections, 10 s) would keep the first connection open through all of this
check "--admin-max-conns 2: two idle admin connections stay open, a third closes the oldest, not the other, and is answered" "$PY" -c '
import socket,sys,time
port=int(sys.argv[1])
def conn():
    s=socket.create_connection(("127.0.0.1",port)); time.sleep(0.1); return s
def state(s):  # "open" (nothing to read), "closed" (EOF or reset)
    s.setblocking(False)
    try: return "closed" if not s.recv(100) else "data"
    except BlockingIOError: return "open"
    except ConnectionResetError: return "closed"
a=conn(); b=conn(); time.sleep(0.2)
assert (state(a),state(b))==("open","open"), "2 of 2: both open"
c=conn()
a.settimeout(0.8)  # well before --admin-timeout 1.5 s
try: assert a.recv(100)==b"", "the oldest connection got data"
except ConnectionResetError: pass
assert state(b)=="open", "the second connection was closed too"
c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); c.settimeout(3)
r=c.recv(4096); assert r.startswith(b"HTTP/1.1 200"), r[:100]' "$ADM"
check "--admin-max-head 1K: a 900-byte request head answered 200, a 1500-byte one 431" "$PY" -c '
import socket,sys
port=int(sys.argv[1])
def get(pad):
    h=b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: "
    h+=b"a"*(pad-len(h)-4)+b"\r\n\r\n"; assert len(h)==pad
    s=socket.create_connection(("127.0.0.1",port)); s.settimeout(3); s.sendall(h)
    return s.recv(4096).split(b"\r\n")[0]
r=get(900); assert r==b"HTTP/1.1 200 OK", r
r=get(1500); assert r.startswith(b"HTTP/1.1 431 "), r' "$ADM"
check "--admin-timeout 1.5: an idle admin connection is closed after 1.5 s, not before" "$PY" -c '
import socket,sys,time
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(6); t=time.time()
try: assert s.recv(100)==b""
except ConnectionResetError: pass
dt=time.time()-t; assert 1.4<=dt<=3.0, dt
print("closed after %.2f s" % dt)' "$ADM"
expect_eq "kvsplice_admin_limit_connections shows --admin-max-conns" 2 \
	"$(metric "$ADM" kvsplice_admin_limit_connections)"
expect_eq "kvsplice_admin_limit_head_bytes shows --admin-max-head" 1024 \
	"$(metric "$ADM" kvsplice_admin_limit_head_bytes)"
expect_eq "kvsplice_admin_limit_timeout_seconds shows --admin-timeout" 1.5 \
	"$(metric "$ADM" kvsplice_admin_limit_timeout_seconds)"

# --- 11. the KV event queue's batch count ---------------------------------------------------------
# A vLLM worker stand-in: an XPUB publisher whose replay endpoint never listens, so the initial
# sync waits for its deadline (2 s) and the live batches queue meanwhile: three fit
# --kv-queue-batches 3 (a few bytes each, far below --kv-queue-bytes), the fourth gives the sync up.
"$PY" -c '
import json,sys,time,urllib.request
import msgpack
sys.path.insert(0,"tests/e2e")
from kvpub import admin_port,publisher,until
pub=publisher(sys.argv[1])
aport=admin_port(sys.argv[2])
assert pub.poll(10000), "kvsplice did not subscribe"
pub.recv()
def w():
    d=json.load(urllib.request.urlopen("http://127.0.0.1:%d/debug/index" % aport,timeout=3))
    return [x for x in d["workers"] if x["name"]=="qwen/e1"][0]
def send(seq): pub.send_multipart([b"kv",seq.to_bytes(8,"big"),msgpack.packb([time.time(),[],0])])
for seq in range(3): send(seq)
assert until(lambda: w()["pending"]==3,1.5), w()
x=w(); assert x["state"]=="syncing" and x["queue_overflows"]==0, x
send(3)
assert until(lambda: w()["queue_overflows"]==1,1.5), w()
x=w(); assert x["dropped_queued"]==3 and x["pending"]==0 and x["state"]=="live", x
print("3 batches queued during the sync, the 4th gave it up:", x)' "$tmp/kvq.pub" "$tmp/kvq.ports" >"$tmp/kvq.out" 2>&1 &
kvq=$!
pids+=($kvq)
for _ in $(seq 100); do [ -s "$tmp/kvq.pub" ] && break; sleep 0.05; done
read -r kvq_pub kvq_replay <"$tmp/kvq.pub"
printf '{"services":[{"name":"qwen","cluster_ip":"10.96.0.50","port":8000,"endpoints":[{"name":"e1","ip":"127.0.0.1","port":%s,"events_port":%s,"replay_port":%s}]}]}\n' \
	"$P1" "$kvq_pub" "$kvq_replay" >"$tmp/kvq.json"
start_kvs kvq "$tmp/kvq.json" --kv-queue-batches 3
wait "$kvq"
ok $? "--kv-queue-batches 3: 3 live batches queued during a worker's initial sync, the 4th gives the sync up (the queue dropped, the live stream taken from it)" ||
	sed 's/^/#   /' "$tmp/kvq.out"
expect_eq "... counted as an overflow of the batch bound" 1 \
	"$(metric "$aport" 'kvsplice_kv_queue_overflows_total{worker="qwen/e1",bound="batches"}')"
expect_eq "kvsplice_kv_queue_limit_batches shows --kv-queue-batches" 3 \
	"$(metric "$aport" 'kvsplice_kv_queue_limit_batches{scope="worker"}')"

# --- 12. the largest worker /metrics body read -----------------------------------------------------
start_up small --metrics-bytes 3000; MSMALL=$port
start_up large --metrics-bytes 40000; MLARGE=$port
svc_json qwen "$MSMALL" "$MLARGE" >"$tmp/scrape.json"
start_kvs scrape "$tmp/scrape.json" --scrape-max-body 32K --scrape-interval 0.1
check "--scrape-max-body 32K: a worker /metrics of 3,000 bytes is read, one of 40,000 bytes fails the scrape (EMSGSIZE; the worker's capacity stays unknown)" "$PY" -c '
import json,sys,time,urllib.request
def ws():
    d=json.load(urllib.request.urlopen("http://127.0.0.1:%s/debug/workers" % sys.argv[1],timeout=3))
    return {w["name"].split("/")[-1]: w for w in d["workers"]}
end=time.time()+5
while time.time()<end and not all(w["scrapes"]>=3 for w in ws().values()): time.sleep(0.1)
w=ws(); small,large=w["e1"],w["e2"]
assert small["scrape_error"]==0 and small["capacity_blocks"]==777, small
assert large["scrape_error"]==-90 and large["capacity_blocks"] is None and large["scrapes"]>=3, large' "$aport"
expect_eq "kvsplice_scrape_limit_body_bytes shows --scrape-max-body" 32768 \
	"$(metric "$aport" kvsplice_scrape_limit_body_bytes)"
n=$(metric "$aport" 'kvsplice_worker_scrape_errors_total{worker="qwen/e2",cause="too_large"}')
check "... the too-large page counted in kvsplice_worker_scrape_errors_total{cause=\"too_large\"} ($n)" \
	test "${n/absent/0}" -ge 3

# --- 13. the KV event stream's bounds: message size, replay deadline, libzmq's queue --------------
# A worker stand-in as in 11 (its replay endpoint never listens). --kv-replay-timeout 0.4: the sync
# on joining is given up within a second, not after the default 2 s; --kv-event-max-bytes 1K: a
# 620-byte batch is applied, a 2,000-byte one is dropped unread (libzmq cuts the connection,
# kvsplice counts it and reconnects), where the default (64M) would apply it.
"$PY" -c '
import json,sys,time,urllib.request
import msgpack
sys.path.insert(0,"tests/e2e")
from kvpub import admin_port,publisher,until
pub=publisher(sys.argv[1])
aport=admin_port(sys.argv[2])
t_ready=time.time()  # the sync on joining started before the port file was written
def w():
    d=json.load(urllib.request.urlopen("http://127.0.0.1:%d/debug/index" % aport,timeout=3))
    return [x for x in d["workers"] if x["name"]=="qwen/e1"][0]
assert until(lambda: w()["replays_failed"]==1,3), w()
dt=time.time()-t_ready
x=w(); assert x["state"]!="syncing" and dt<1.2, (dt,x)
print("sync on joining given up after %.2f s" % dt)
assert pub.poll(5000), "kvsplice did not subscribe"
pub.recv()
def send(seq,pad): pub.send_multipart([b"kv",seq.to_bytes(8,"big"),msgpack.packb([time.time(),[],0,b"p"*pad])])
send(0,600)
assert until(lambda: w()["batches"]==1,2), w()
send(1,2000)
assert until(lambda: w()["oversized"]==1,3), w()
x=w(); assert x["batches"]==1 and x["bad_batches"]==0, x
print("a 2,000-byte message dropped unread at --kv-event-max-bytes 1K:", x)' "$tmp/kve.pub" "$tmp/kve.ports" >"$tmp/kve.out" 2>&1 &
kve=$!
pids+=($kve)
for _ in $(seq 100); do [ -s "$tmp/kve.pub" ] && break; sleep 0.05; done
read -r kve_pub kve_replay <"$tmp/kve.pub"
printf '{"services":[{"name":"qwen","cluster_ip":"10.96.0.50","port":8000,"endpoints":[{"name":"e1","ip":"127.0.0.1","port":%s,"events_port":%s,"replay_port":%s}]}]}\n' \
	"$P1" "$kve_pub" "$kve_replay" >"$tmp/kve.json"
start_kvs kve "$tmp/kve.json" --kv-event-max-bytes 1K --kv-replay-timeout 0.4 --kv-event-queue 50
wait "$kve"
ok $? "--kv-replay-timeout 0.4: the sync on joining given up within a second (not 2 s); --kv-event-max-bytes 1K: a 620-byte batch applied, a 2,000-byte one dropped unread" ||
	sed 's/^/#   /' "$tmp/kve.out"
expect_eq "... counted as oversized in /metrics" 1 \
	"$(metric "$aport" 'kvsplice_kv_dropped_total{worker="qwen/e1",what="oversized"}')"
expect_eq "kvsplice_kv_event_limit_bytes shows --kv-event-max-bytes" 1024 \
	"$(metric "$aport" kvsplice_kv_event_limit_bytes)"
expect_eq "kvsplice_kv_replay_limit_timeout_seconds shows --kv-replay-timeout" 0.4 \
	"$(metric "$aport" kvsplice_kv_replay_limit_timeout_seconds)"
expect_eq "kvsplice_kv_event_queue_limit_messages shows --kv-event-queue" 50 \
	"$(metric "$aport" kvsplice_kv_event_queue_limit_messages)"

# --- 14. a scrape's deadline and head bound; failed scrapes counted by cause ----------------------
# e1 answers its /metrics after 0.7 s (read at the default 1 s), e2 with a 1,500-byte head, e3
# with a 3,000-byte one (read at the default 16K), e4 is a port nothing listens on.
start_up slow --metrics-bytes 3000 --metrics-delay 700; MSLOW=$port
start_up head15 --metrics-bytes 3000 --metrics-head-bytes 1500; MH15=$port
start_up head30 --metrics-bytes 3000 --metrics-head-bytes 3000; MH30=$port
MNONE=$("$PY" -c 'import sys; sys.path.insert(0,"tests/e2e"); from lowport import low_port; print(low_port())')
svc_json qwen "$MSLOW" "$MH15" "$MH30" "$MNONE" >"$tmp/scrape2.json"
start_kvs scrape2 "$tmp/scrape2.json" --scrape-timeout 0.3 --scrape-max-head 2K --scrape-interval 0.1
check "--scrape-timeout 0.3: a worker answering its /metrics after 0.7 s fails its scrapes (ETIMEDOUT); --scrape-max-head 2K: a 1,500-byte head is read, a 3,000-byte one fails (EMSGSIZE)" "$PY" -c '
import json,sys,time,urllib.request
def ws():
    d=json.load(urllib.request.urlopen("http://127.0.0.1:%s/debug/workers" % sys.argv[1],timeout=3))
    return {w["name"].split("/")[-1]: w for w in d["workers"]}
end=time.time()+6
while time.time()<end and not all(w["scrapes"]>=2 for w in ws().values()): time.sleep(0.1)
w=ws()
assert w["e1"]["scrape_error"]==-110 and w["e1"]["capacity_blocks"] is None, w["e1"]
assert w["e2"]["scrape_error"]==0 and w["e2"]["capacity_blocks"]==777, w["e2"]
assert w["e3"]["scrape_error"]==-90 and w["e3"]["capacity_blocks"] is None, w["e3"]
assert w["e4"]["scrape_error"]==-111, w["e4"]' "$aport"
sc() { metric "$aport" "kvsplice_worker_scrape_errors_total{worker=\"qwen/$1\",cause=\"$2\"}"; }
check "kvsplice_worker_scrape_errors_total by cause: e1 timeout ($(sc e1 timeout)), e3 too_large ($(sc e3 too_large)), e4 refused ($(sc e4 refused)); e2 none ($(sc e2 too_large))" \
	test "$(sc e1 timeout)" -ge 1 -a "$(sc e3 too_large)" -ge 1 -a "$(sc e4 refused)" -ge 1 \
	-a "$(sc e2 too_large)" = 0 -a "$(sc e1 too_large)" = 0
expect_eq "kvsplice_scrape_limit_timeout_seconds shows --scrape-timeout" 0.3 \
	"$(metric "$aport" kvsplice_scrape_limit_timeout_seconds)"
expect_eq "kvsplice_scrape_limit_head_bytes shows --scrape-max-head" 2048 \
	"$(metric "$aport" kvsplice_scrape_limit_head_bytes)"

# --- 15. the approximate view's bound -------------------------------------------------------------
# Without a tokenizer a completion is placed on its raw bytes, 64 bytes a block: a 2,000-byte body
# is a chain of 31 blocks, of which --approx-max-entries 8 keeps 8 (the default keeps all 31).
start_kvs approx "$tmp/one.json" --router approx --no-tokenizer --approx-max-entries 8
check "--approx-max-entries 8: a request of 31 blocks leaves 8 pairs in the approximate view, the rest counted as evicted" "$PY" -c '
import json,sys,urllib.request
port,aport=sys.argv[1],sys.argv[2]
body=json.dumps({"model":"m","prompt":"p"*1970}).encode(); assert len(body)>=1984, len(body)
r=urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port,data=body,headers={"Content-Type":"application/json"}),timeout=5)
assert r.status==200
m={l.split()[0]: float(l.split()[1]) for l in urllib.request.urlopen("http://127.0.0.1:%s/metrics" % aport,timeout=3).read().decode().splitlines() if l.startswith("kvsplice_approx_")}
assert m["kvsplice_approx_entries"]==8 and m["kvsplice_approx_evicted_total"]>=23, m' "$lport" "$aport"
expect_eq "kvsplice_approx_limit_entries shows --approx-max-entries" 8 \
	"$(metric "$aport" kvsplice_approx_limit_entries)"

# --- 16. the largest --services file ---------------------------------------------------------------
timeout 10 "$KVS" --no-bpf --no-tokenizer --services "$tmp/one.json" --services-max-bytes 50 \
	--listen 127.0.0.1:0 --admin 127.0.0.1:0 >"$tmp/svcmax.out" 2>&1
rc=$?
check "--services-max-bytes 50: a services file of $(stat -c %s "$tmp/one.json") bytes refused at start (exit 2, the size and the bound said)" \
	bash -c "[ $rc = 2 ] && grep -q 'bytes, larger than the bound of 50 (--services-max-bytes)' '$tmp/svcmax.out' && grep -q 'cannot load --services.*larger than --services-max-bytes' '$tmp/svcmax.out' || { cat '$tmp/svcmax.out'; exit 1; }"

# --- every kvsplice drains and exits cleanly (a sanitizer build reports nothing) ------------------
for k in "${kvs[@]}"; do
	name=${k%%:*} pid=${k#*:}
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	check "kvsplice $name: exit status 0, no sanitizer report" \
		bash -c "[ $rc = 0 ] && ! grep -E 'Sanitizer|runtime error' '$tmp/$name.log' || { tail -40 '$tmp/$name.log'; exit 1; }"
done

tap_done
