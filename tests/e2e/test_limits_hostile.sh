#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile clients do not starve the others (the full-size run is bench/limits.sh,
# docs/benchmarks.md#limits): kvsplice (--no-bpf, loopback) in front of tests/e2e/upstream.py holds
# a few hundred idle connections and a few slowloris clients (a head dribbled a byte at a time)
# while a normal client's requests all succeed; the slowloris clients and the silent connections are
# cut at --header-timeout (not before); bodies over --max-body are refused with 413 without being
# read whole (Content-Length and chunked); afterwards every connection is gone.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

KVS=${KVS:-build-asan/kvsplice}
[ -x "$KVS" ] || KVS=build/kvsplice
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
LOAD=bench/limits/load.py
IDLE=300 SLOW=3 HT=2
ulimit -n $((IDLE * 2 + 256)) 2>/dev/null || true
tmp=$(mktemp -d /tmp/kvs-hostile-test.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

[ -x "$KVS" ] || { echo "not ok - $KVS not built"; exit 1; }
"$PY" tests/e2e/upstream.py h1 >"$tmp/up.port" 2>"$tmp/up.err" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/up.port" ] && break; sleep 0.05; done
printf '{"services":[{"name":"h","cluster_ip":"10.96.0.52","port":8000,"endpoints":[{"name":"e1","ip":"127.0.0.1","port":%s}]}]}\n' \
	"$(cat "$tmp/up.port")" >"$tmp/svc.json"
"$KVS" --no-bpf --no-events --no-tokenizer --router round-robin --services "$tmp/svc.json" \
	--listen 127.0.0.1:0 --admin 127.0.0.1:0 --header-timeout "$HT" --max-body 1M \
	--port-file "$tmp/ports" >"$tmp/kvs.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do [ -s "$tmp/ports" ] && break; sleep 0.05; done
read -r LPORT APORT <"$tmp/ports"
ok $? "kvsplice started" || { cat "$tmp/kvs.log"; exit 1; }
T=127.0.0.1:$LPORT

metric() { curl -s "http://127.0.0.1:$APORT/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
jget() { "$PY" -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2]))' "$1" "$2"; }
jtrue() { "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2], {}, d) else 1)' "$1" "$2"; }

# --- idle connections and slowloris held while a normal client runs -------------------------------
"$PY" $LOAD hostile --target "$T" --idle "$IDLE" --slowloris "$SLOW" --interval 0.2 \
	--seconds $((HT + 3)) --state "$tmp/state" >"$tmp/hostile.json" 2>"$tmp/hostile.err" &
hpid=$!
pids+=($hpid)
for _ in $(seq 300); do [ -s "$tmp/state" ] && break; sleep 0.05; done
check "$IDLE idle and $SLOW slowloris connections up" grep -q '"idle_up": '"$IDLE"', "slow_up": '"$SLOW" "$tmp/state"
for _ in $(seq 20); do # accepted by kvsplice (well before the header timeout)
	active=$(metric kvsplice_connections_active)
	[ "${active:-0}" -ge $((IDLE + SLOW)) ] && break
	sleep 0.05
done
check "kvsplice holds them ($active client connections)" test "${active:-0}" -ge $((IDLE + SLOW))
normal=$("$PY" $LOAD normal --target "$T" --path /echo --seconds 1)
check "a normal client beside them: every request answered 200 ($normal)" \
	jtrue "$normal" 'requests >= 1 and errors == 0'
wait "$hpid"
hostile=$(cat "$tmp/hostile.json")
check "every slowloris client cut by kvsplice, at the header timeout and not before ($hostile)" \
	jtrue "$hostile" "slow_cut == $SLOW and slow_open == 0 and slow_cut_s_min >= $HT - 0.1"
check "connections that never sent a byte closed at the header timeout too, not before" \
	jtrue "$hostile" "idle_closed_by_server == $IDLE and idle_closed_after_s_min >= $HT - 0.1"

# --- bodies over --max-body: 413 before the body is read ------------------------------------------
big=$("$PY" $LOAD bigbody --target "$T" --mode length --size $((1 << 30)))
check "Content-Length 1 GiB over --max-body 1M: 413, the body not read ($big)" \
	jtrue "$big" 'status == 413 and body_bytes_sent < (64 << 20)'
big=$("$PY" $LOAD bigbody --target "$T" --mode chunked --size $((1 << 30)))
check "chunked 1 GiB over --max-body 1M: 413 once past the limit, not read whole ($big)" \
	jtrue "$big" 'status == 413 and body_bytes_sent < (64 << 20)'

# --- afterwards ------------------------------------------------------------------------------------
for _ in $(seq 100); do [ "$(metric kvsplice_connections_active)" = 0 ] && break; sleep 0.05; done
expect_eq "every client connection gone" 0 "$(metric kvsplice_connections_active)"
normal=$("$PY" $LOAD normal --target "$T" --path /echo --seconds 0.2)
check "a normal request still succeeds" jtrue "$normal" 'requests >= 1 and errors == 0'
tap_done
