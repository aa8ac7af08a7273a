#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/limits.sh: kvsplice's limits under hostile load (docs/benchmarks.md#limits), in one run,
# on loopback (--no-bpf, no root): kvsim workers behind one kvsplice with its default limits
# (--header-timeout 30 s, --idle-timeout 300 s, --max-conns 16384, --max-conns-per-ip 4096, ...).
#   1. baseline: a normal client (sequential requests, a new connection each) alone;
#   2. hostile: LIMITS_IDLE idle connections (nothing sent, from LIMITS_SOURCES addresses of
#      127.0.0.0/8 so the per-address cap is not what is measured) and LIMITS_SLOW slowloris
#      connections (a head dribbled one byte every LIMITS_DRIP s) held open while the same
#      normal client runs again; then how long each slowloris lasted (expected: the header
#      timeout) and how many idle connections kvsplice closed, and when (a connection that never
#      sends a byte is held to the header timeout too);
#   3. bodies over --max-body: a Content-Length of 1 GiB and a chunked body of 1 GiB, sent as
#      fast as kvsplice takes them: status, time to the answer, bytes taken, RSS after;
#   4. the limits and their flags (kvsplice --help).
# Prints a table per part; JSON of every step in $LIMITS_OUT. kvsplice's RSS and open
# descriptors are sampled at each step, its peak RSS (VmHWM) after parts 2 and 3. Not part of
# `make test` (about 2 minutes). It holds LIMITS_IDLE ephemeral ports of the machine meanwhile:
# tests that close and bind a port again may meet EADDRINUSE; run it on its own.
# Env: LIMITS_IDLE (10000), LIMITS_SLOW (50), LIMITS_DRIP (1), LIMITS_HEADER_TIMEOUT (kvsplice's
#      default, 30 s; must be longer than LIMITS_SECONDS plus the time to connect),
#      LIMITS_SECONDS (normal client per phase, 20), LIMITS_SOURCES (4 addresses),
#      LIMITS_WORKERS (2), LIMITS_TIME_SCALE (10), LIMITS_OUT (bench/out/limits), KVS.
set -u
cd "$(dirname "$0")/.."
IDLE=${LIMITS_IDLE:-10000}
SLOW=${LIMITS_SLOW:-50}
DRIP=${LIMITS_DRIP:-1}
HT=${LIMITS_HEADER_TIMEOUT:-30}
SECS=${LIMITS_SECONDS:-20}
SOURCES=${LIMITS_SOURCES:-127.0.10.1,127.0.10.2,127.0.10.3,127.0.10.4}
W=${LIMITS_WORKERS:-2}
TS=${LIMITS_TIME_SCALE:-10}
OUT=${LIMITS_OUT:-bench/out/limits}
KVS=${KVS:-build/kvsplice}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
LOAD=bench/limits/load.py
source tools/kvsim/cluster.sh

[ -x "$KVS" ] && [ -x build/kvsim ] || { echo "limits: build first (make)" >&2; exit 2; }
# 10,000 connections need as many descriptors on both sides (kvsplice and the client), plus room
need=$((IDLE + SLOW + 1024))
ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge "$need" ] || echo "limits: only $(ulimit -n) descriptors (want $need): fewer idle connections will be up" >&2
mkdir -p "$OUT"
tmp=$(mktemp -d /tmp/kvs-limits.XXXXXX)
KPID="" HPID=""
cleanup() {
	[ -n "$HPID" ] && kill "$HPID" 2>/dev/null && wait "$HPID" 2>/dev/null
	[ -n "$KPID" ] && kill "$KPID" 2>/dev/null && wait "$KPID" 2>/dev/null
	kvsim_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

KVSIM_LOGDIR=$tmp kvsim_start "$W" --time-scale "$TS" || exit 2
IFS=, read -r -a urls <<<"$KVSIM_URLS"
eps="" sep=""
for i in "${!urls[@]}"; do
	eps+="$sep{\"name\":\"w$i\",\"ip\":\"127.0.0.1\",\"port\":${urls[$i]##*:}}"
	sep=,
done
echo "{\"services\":[{\"name\":\"limits\",\"cluster_ip\":\"10.96.0.61\",\"port\":8000,\"endpoints\":[$eps]}]}" >"$tmp/services.json"
"$KVS" --no-bpf --services "$tmp/services.json" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
	--no-events --header-timeout "$HT" --port-file "$tmp/ports" >"$OUT/kvsplice.log" 2>&1 &
KPID=$!
for _ in $(seq 200); do [ -s "$tmp/ports" ] && break; sleep 0.05; done
read -r LPORT APORT <"$tmp/ports" || { echo "limits: kvsplice did not start" >&2; cat "$OUT/kvsplice.log" >&2; exit 2; }
T=127.0.0.1:$LPORT

rss() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$KPID/status"; }
hwm() { awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$KPID/status"; }
fds() { ls "/proc/$KPID/fd" | wc -l; }
metric() { curl -s -m 5 "http://127.0.0.1:$APORT/metrics" | awk -v k="$1" '$1 == k { print $2; f=1 } END { if (!f) print "-" }'; }
jget() { "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2]))' "$1" "$2"; }

echo "limits: kvsplice pid $KPID on $T, $W kvsim workers (time scale $TS), --header-timeout $HT, descriptors $(ulimit -n)" >&2
"$PY" $LOAD normal --target "$T" --seconds 2 >/dev/null # warm up
hwm0=$(hwm)
rss0=$(rss) fd0=$(fds)

# 1. baseline
base=$("$PY" $LOAD normal --target "$T" --seconds "$SECS")
rss1=$(rss) fd1=$(fds)
echo "$base" >"$OUT/baseline.json"

# 2. hostile load held while the normal client runs again
"$PY" $LOAD hostile --target "$T" --idle "$IDLE" --sources "$SOURCES" --slowloris "$SLOW" \
	--interval "$DRIP" --seconds $((HT + 4)) --state "$tmp/hostile.state" \
	>"$tmp/hostile.json" 2>"$tmp/hostile.err" &
HPID=$!
for _ in $(seq 1200); do [ -s "$tmp/hostile.state" ] && break; sleep 0.1; done
ready=$(sed 's/^ready //' "$tmp/hostile.state" 2>/dev/null)
[ -n "$ready" ] || { echo "limits: the hostile client did not get ready" >&2; cat "$tmp/hostile.err" >&2; exit 2; }
rss2=$(rss) fd2=$(fds) act2=$(metric kvsplice_connections_active)
under=$("$PY" $LOAD normal --target "$T" --seconds "$SECS")
echo "$under" >"$OUT/hostile_normal.json"
rss3=$(rss) fd3=$(fds) act3=$(metric kvsplice_connections_active)
# the hostile client ends by itself once every slowloris could reach the header timeout
wait "$HPID"
HPID=""
hwm1=$(hwm)
hostile=$(cat "$tmp/hostile.json")
echo "$hostile" >"$OUT/hostile.json"
sleep 2
rss4=$(rss) fd4=$(fds) act4=$(metric kvsplice_connections_active)

# 3. bodies over the limit
big_cl=$("$PY" $LOAD bigbody --target "$T" --mode length --size $((1 << 30)))
rss5=$(rss)
big_ch=$("$PY" $LOAD bigbody --target "$T" --mode chunked --size $((1 << 30)))
sleep 1.5 # past PROXY_IDLE_TRIM_MS
rss6=$(rss) fd6=$(fds) hwm2=$(hwm)
echo "$big_cl" >"$OUT/bigbody_length.json"
echo "$big_ch" >"$OUT/bigbody_chunked.json"
after=$("$PY" $LOAD normal --target "$T" --seconds 3)

echo
echo "## kvsplice with $IDLE idle connections and $SLOW slowloris clients (--header-timeout $HT s)"
echo "| phase | normal client: requests | errors | p50 ms | p99 ms | max ms | kvsplice RSS MiB | open fds | client conns |"
echo "|---|---|---|---|---|---|---|---|---|"
echo "| before (warm, idle) | - | - | - | - | - | $rss0 | $fd0 | - |"
echo "| baseline (normal client alone) | $(jget "$base" requests) | $(jget "$base" errors) | $(jget "$base" p50_ms) | $(jget "$base" p99_ms) | $(jget "$base" max_ms) | $rss1 | $fd1 | - |"
echo "| hostile connections up | - | - | - | - | - | $rss2 | $fd2 | $act2 |"
echo "| normal client beside them | $(jget "$under" requests) | $(jget "$under" errors) | $(jget "$under" p50_ms) | $(jget "$under" p99_ms) | $(jget "$under" max_ms) | $rss3 | $fd3 | $act3 |"
echo "| hostile client gone | - | - | - | - | - | $rss4 | $fd4 | $act4 |"
echo
echo "kvsplice peak RSS (VmHWM): $hwm0 MiB before, $hwm1 MiB after the hostile part, $hwm2 MiB after the bodies"
echo "hostile client: $(jget "$hostile" idle_up) idle up ($(jget "$hostile" failed) failed, $(jget "$hostile" connect_s) s to connect)," \
	"$(jget "$hostile" idle_closed_by_server) closed by kvsplice $(jget "$hostile" idle_closed_after_s_min)-$(jget "$hostile" idle_closed_after_s_max) s after connecting;" \
	"slowloris: $(jget "$hostile" slow_cut) of $(jget "$hostile" slow_up) cut after $(jget "$hostile" slow_cut_s_min)-$(jget "$hostile" slow_cut_s_max) s (median $(jget "$hostile" slow_cut_s_median)), $(jget "$hostile" slow_open) still open"
echo
echo "## bodies over --max-body (default 32 MiB), 1 GiB offered"
echo "| body | status | answer after ms | body bytes kvsplice took | kvsplice RSS MiB after |"
echo "|---|---|---|---|---|"
echo "| Content-Length: 1 GiB | $(jget "$big_cl" status) | $(jget "$big_cl" answer_ms) | $(jget "$big_cl" body_bytes_sent) | $rss5 |"
echo "| chunked, 1 GiB | $(jget "$big_ch" status) | $(jget "$big_ch" answer_ms) | $(jget "$big_ch" body_bytes_sent) | $rss6 (fds $fd6) |"
echo "normal client afterwards: $(jget "$after" requests) requests, $(jget "$after" errors) errors"
echo
echo "## limits and their flags (kvsplice --help)"
echo "| limit | flag | default |"
echo "|---|---|---|"
"$KVS" --help 2>&1 | "$PY" -c '
import re, sys
h = sys.stdin.read()
rows = [("request head size (431)", "--max-head"), ("request body size (413)", "--max-body"),
        ("time to read a request (slowloris)", "--header-timeout"),
        ("keep-alive / relay silence", "--idle-timeout"), ("upstream connect", "--connect-timeout"),
        ("drain after SIGTERM", "--drain-timeout"), ("idle upstream connections", "--pool-size"),
        ("idle upstream lifetime", "--pool-idle-timeout"), ("client connections", "--max-conns"),
        ("client connections per address", "--max-conns-per-ip"),
        ("bytes buffered over all connections", "--max-buffered"),
        ("encoding cache per tokenizer", "--tokenizer-cache"),
        ("listen backlog", "--listen-backlog"),
        ("KV events queued per worker during a replay, bytes", "--kv-queue-bytes"),
        ("KV events queued over all workers, bytes", "--kv-queue-total-bytes"),
        ("KV events queued per worker during a replay, batches", "--kv-queue-batches"),
        ("admin connections at once", "--admin-max-conns"),
        ("admin request head size (431)", "--admin-max-head"),
        ("admin connection lifetime", "--admin-timeout"),
        ("worker /metrics body read", "--scrape-max-body"),
        ("worker /metrics head read", "--scrape-max-head"),
        ("one scrape of a worker", "--scrape-timeout"),
        ("KV event message size", "--kv-event-max-bytes"),
        ("KV event messages libzmq holds per worker", "--kv-event-queue"),
        ("a replay from a worker", "--kv-replay-timeout"),
        ("approximate view, (worker, block) pairs", "--approx-max-entries"),
        ("--services file size", "--services-max-bytes"),
        ("Kubernetes list page size", "--k8s-list-max-bytes"),
        ("Kubernetes watch event size", "--k8s-event-max-bytes")]
for what, flag in rows:
    m = re.search(r"^\s+" + re.escape(flag) + r"\b(.*?)(?=^\s+--|\Z)", h, re.M | re.S)
    d = re.search(r"default ([^);]*)", m.group(1)) if m else None
    print("| %s | %s | %s |" % (what, flag if m else "MISSING (" + flag + ")", d.group(1) if d else "-"))
'
