#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsplice killed with SIGKILL: 0 failed new connections (userspace/node/keeper.h,
# docs/internals/keeper.md), with the real daemon in the netns node:
#  1. kvsplice starts a keeper, a small child holding a second reference to its listener;
#  2. connections BPF handed to a kvsplice that then dies (frozen with SIGSTOP so that they are
#     certainly queued on its listener, then SIGKILLed) are all answered: the keeper takes the
#     listener out of the sockmap and relays each to its Service (DNAT); without the keeper
#     (--no-keeper) the same connections are reset, which is what this guards against;
#  3. the next kvsplice takes the listener from the keeper (nothing bound, nothing reset), and the
#     keeper leaves once its relays are done;
#  4. a stop in order (SIGTERM) takes the keeper along; a keeper with no successor within
#     --keeper-hold closes the listener and leaves, and a kvsplice started then binds its own;
#  5. as a container's PID 1 (a PID namespace of its own, as in the DaemonSet; supervisor.h) the
#     same crash resets nothing either: PID 1 stays a tiny init, the daemon is its child, the
#     keeper outlives it, and the daemon is started again and takes the listener back; SIGTERM to
#     PID 1 stops it in order.
#  6. --keeper-queue: the listener stays registered for a while after the crash, connects queue
#     for the next kvsplice, which serves them (nothing relayed, nothing falls open).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}tkp$$
source tests/node/lib.sh
tmp=$(mktemp -d /tmp/kvs-keeper.XXXXXX)
trap 'tests/node/down.sh >/dev/null 2>&1; rm -rf "$tmp"' EXIT

bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice}
if [ ! -x "$bin" ]; then
	skip "the keeper" "$bin is not built yet"
	exit 0
fi
export KVS_WORKER=testworker
export KVSPLICE_ARGS="--router round-robin ${KVSPLICE_ARGS:-}"
check "testbed up with 2 workers and kvsplice" tests/node/up.sh --workers 2 --kvsplice || exit 1
log=$(kvs_log_file)

# The keeper of daemon $1: its child started as `kvsplice --keeper`.
keeper_of() {
	local c
	for c in $(cat "/proc/$1/task/"*/children 2>/dev/null); do
		tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -q -- ' --keeper ' && echo "$c"
	done
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
wait_gone() { # PID SECONDS
	local i
	for i in $(seq $(($2 * 10))); do
		kvs_alive "$1" || return 0
		sleep 0.1
	done
	return 1
}
wait_not_intercepting() {
	local i
	for i in $(seq 20); do
		kvs_intercepting || return 0
		sleep 0.05
	done
	return 1
}
# N curls from the client pod in the background, results in $tmp/$tag.N: "code worker".
CURLS=()
curls() { # TAG N
	local i
	CURLS=()
	for i in $(seq "$2"); do
		tests/node/client.sh curl -s -m 20 -o /dev/null -D "$tmp/$1.$i.h" \
			-w '%{http_code}\n' "http://$SVC_IP:$SVC_PORT/v1/models" >"$tmp/$1.$i" 2>/dev/null &
		CURLS+=($!)
	done
}
answered() { # TAG N: how many got a 200 from a worker
	local i n=0
	for i in $(seq "$2"); do
		[ "$(cat "$tmp/$1.$i" 2>/dev/null)" = 200 ] &&
			grep -qi '^x-kvsim-worker: w[12]' "$tmp/$1.$i.h" 2>/dev/null && n=$((n + 1))
	done
	echo "$n"
}
# Freezes kvsplice, sends N requests that queue on its listener, kills it; waits for the curls.
freeze_send_kill() { # TAG N
	local pid r0
	pid=$(cat "$(kvs_pid_file)")
	kill -STOP "$pid"
	r0=$(kvs_bpf_stat rewritten)
	curls "$1" "$2"
	kvs_wait_stat rewritten $((r0 + $2)) || echo "# only $(($(kvs_bpf_stat rewritten) - r0)) of $2 rewritten"
	sleep 0.3
	kvs_stop_kvsplice KILL
	wait "${CURLS[@]}"
}

# --- 1. the keeper -------------------------------------------------------------------------------
pid=$(cat "$(kvs_pid_file)")
kp=$(keeper_of "$pid")
ok $([ -n "$kp" ] && echo 0 || echo 1) "kvsplice (pid $pid) started a keeper (pid ${kp:-none})"
krss=$(rss_kb "$kp") drss=$(rss_kb "$pid")
echo "# RSS: keeper ${krss:-?} KiB, daemon ${drss:-?} KiB"
ok $((${krss:-999999} < 16384 ? 0 : 1)) "the keeper is small (${krss:-?} KiB RSS)"
grep -q "keeper: pid $kp holds" "$log"
ok $? "the daemon says so in its log"

# --- 2. SIGKILL with connections queued: all answered --------------------------------------------
freeze_send_kill kill 8
n=$(answered kill 8)
expect_eq "8 requests queued on a kvsplice that was SIGKILLed: all answered by a worker" 8 "$n"
wait_not_intercepting
ok $? "interception is off (the keeper took the listener out of the sockmap)"
ok $(kvs_alive "$kp" && echo 0 || echo 1) "the keeper holds the listener for a successor"
grep -q "keeper: kvsplice died" "$log"
ok $? "the keeper logged the take-over"
w=$(tests/node/client.sh curl -s -m 5 -D - -o /dev/null "http://$SVC_IP:$SVC_PORT/health" |
	tr -d '\r' | awk 'tolower($1) == "x-kvsim-worker:" { print $2 }')
ok $([[ $w == w[12] ]] && echo 0 || echo 1) "a new connect meanwhile goes the DNAT way (${w:-no answer})"

# --- 3. the next kvsplice takes the listener from the keeper -------------------------------------
check "kvsplice started again" kvs_start_kvsplice
grep -q "taking over 1 listening socket(s) from pid $kp" "$log"
ok $? "it took the listener from the keeper (pid $kp)"
wait_gone "$kp" 5
ok $? "the keeper left"
grep -q "keeper: done: 8 connection(s) accepted, 8 relayed" "$log"
ok $? "the keeper relayed the 8 ($(grep -o 'keeper: done:.*' "$log" | tail -n 1))"
r0=$(kvs_bpf_stat rewritten)
out=$(tests/node/client.sh curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$SVC_IP:$SVC_PORT/health")
expect_eq "the new kvsplice serves: 200" 200 "$out"
ok $(($(kvs_bpf_stat rewritten) > r0 ? 0 : 1)) "through the proxy (rewritten $r0 -> $(kvs_bpf_stat rewritten))"

# --- 4. restart by handover; stop in order; hold expiry ------------------------------------------
pid=$(cat "$(kvs_pid_file)")
kp=$(keeper_of "$pid")
ok $([ -n "$kp" ] && echo 0 || echo 1) "the new kvsplice has its own keeper (pid ${kp:-none})"
# a stream held through the old process keeps it draining after the handover
tests/node/client.sh curl -s -m 20 -o "$tmp/sse" "http://$SVC_IP:$SVC_PORT/sse?n=50&ms=100" &
sse=$!
sleep 0.5
old=$pid
check "a restart by handover (the next kvsplice takes the listener, this one drains)" \
	kvs_start_kvsplice
wait_gone "$kp" 3
ok $? "the old kvsplice's keeper left at the handover (the listener is the successor's now)"
ok $(kvs_alive "$old" && echo 0 || echo 1) "while the old kvsplice still drains its stream"
wait "$sse"
ok $(grep -c '^data:' "$tmp/sse" | awk '{ print ($1 >= 50 ? 0 : 1) }') \
	"the stream it held ended whole ($(grep -c '^data:' "$tmp/sse") events)"
wait_gone "$old" 8
ok $? "then the old kvsplice exited"
kvs_intercepting
ok $? "interception stayed on"
pid=$(cat "$(kvs_pid_file)")
kp=$(keeper_of "$pid")
ok $([ -n "$kp" ] && echo 0 || echo 1) "the successor has its own keeper (pid ${kp:-none})"
kvs_stop_kvsplice TERM
wait_gone "$kp" 3
ok $? "SIGTERM: the keeper left with kvsplice"
c0=$(grep -c "keeper: kvsplice died" "$log")
expect_eq "and took nothing over" 1 "$c0"

KVSPLICE_ARGS="$KVSPLICE_ARGS --keeper-hold 0.5" kvs_start_kvsplice
pid=$(cat "$(kvs_pid_file)")
kp=$(keeper_of "$pid")
kvs_stop_kvsplice KILL
wait_gone "$kp" 5
ok $? "no successor within --keeper-hold 0.5: the keeper closed the listener and left"
grep -q "keeper: no successor within 500 ms" "$log"
ok $? "it said so"
KVSPLICE_ARGS="$KVSPLICE_ARGS --no-handover" check "a kvsplice started then binds its own" \
	kvs_start_kvsplice

# --- 5. as a container's PID 1 -------------------------------------------------------------------
kvs_stop_kvsplice TERM
children() { cat "/proc/$1/task/"*/children 2>/dev/null | tr ' ' '\n' | grep .; }
cat >"$tmp/pid1" <<EOF
#!/bin/sh
exec unshare --pid --fork --kill-child "$bin" "\$@"
EOF
chmod +x "$tmp/pid1"
KVSPLICE=$tmp/pid1 kvs_start_kvsplice
ok $? "kvsplice started as PID 1 of a PID namespace of its own"
init=$(children "$(cat "$(kvs_pid_file)")" | head -n 1)
daemon=$(children "$init" | head -n 1)
kp=$(keeper_of "$daemon")
expect_eq "its PID 1 is the init (NSpid ... 1)" 1 "$(awk '/^NSpid:/ { print $NF }' "/proc/$init/status" 2>/dev/null)"
ok $([ -n "$daemon" ] && [ -n "$kp" ] && echo 0 || echo 1) \
	"the daemon is PID 1's child (pid ${daemon:-none}), the keeper the daemon's (pid ${kp:-none})"
irss=$(rss_kb "$init")
echo "# RSS: init ${irss:-?} KiB, daemon $(rss_kb "$daemon") KiB, keeper $(rss_kb "$kp") KiB"
t0=$(grep -c "taking over 1 listening socket" "$log")
echo "$daemon" >"$tmp/daemon.pid"
kill -STOP "$daemon"
r0=$(kvs_bpf_stat rewritten)
curls pid1 8
kvs_wait_stat rewritten $((r0 + 8)) || echo "# only $(($(kvs_bpf_stat rewritten) - r0)) of 8 rewritten"
sleep 0.3
kill -KILL "$daemon"
wait_gone "$daemon" 5
wait "${CURLS[@]}"
expect_eq "PID 1's daemon SIGKILLed with 8 requests queued: all answered by a worker" 8 "$(answered pid1 8)"
for _ in $(seq 100); do
	[ "$(grep -c "taking over 1 listening socket" "$log")" -gt "$t0" ] && kvs_intercepting && break
	sleep 0.1
done
grep -q "init: kvsplice (pid [0-9]*) was killed by signal 9; starting it again" "$log"
ok $? "PID 1 started the daemon again"
grep -q "keeper: kvsplice died: connects queue on its listener for the next kvsplice for 1000 ms" "$log"
ok $? "as PID 1's daemon, its keeper kept the connects queueing for the next one (--keeper-queue 1)"
ok $(($(grep -c "taking over 1 listening socket" "$log") > t0 ? 0 : 1)) \
	"the new daemon took the listener from the keeper"
kvs_intercepting
ok $? "interception is on again"
daemon2=$(children "$init" | while read -r c; do tr '\0' ' ' <"/proc/$c/cmdline" | grep -q -- ' --keeper ' || echo "$c"; done | head -n 1)
ok $([ -n "$daemon2" ] && [ "$daemon2" != "$daemon" ] && echo 0 || echo 1) "a new daemon (pid ${daemon2:-none})"
out=$(tests/node/client.sh curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$SVC_IP:$SVC_PORT/health")
expect_eq "served through it: 200" 200 "$out"
kill -TERM "$init"
wait_gone "$init" 10
ok $? "SIGTERM to PID 1: the daemon drained and PID 1 exited"
grep -q "init: kvsplice exited with status 0" "$log"
ok $? "with the daemon's status 0"
kvs_stop_kvsplice TERM

# --- 6. --keeper-queue: connects wait for the next kvsplice instead of falling open --------------
# (the default as PID 1, where the supervisor starts the daemon again at once; set here by hand)
KVSPLICE_ARGS="$KVSPLICE_ARGS --keeper-queue 5" kvs_start_kvsplice
pid=$(cat "$(kvs_pid_file)")
kp=$(keeper_of "$pid")
pa0=$(kvs_bpf_stat proxy_absent)
kill -STOP "$pid"
r0=$(kvs_bpf_stat rewritten)
curls queue 8
kvs_wait_stat rewritten $((r0 + 8)) || echo "# only $(($(kvs_bpf_stat rewritten) - r0)) of 8 rewritten"
sleep 0.3
kvs_stop_kvsplice KILL
kvs_intercepting
ok $? "--keeper-queue 5, kvsplice SIGKILLed: its listener stays registered (connects queue)"
check "the next kvsplice takes the listener from the keeper" kvs_start_kvsplice
wait "${CURLS[@]}"
expect_eq "the 8 requests queued at the crash: all answered" 8 "$(answered queue 8)"
expect_eq "no connect fell open meanwhile (proxy_absent)" "$pa0" "$(kvs_bpf_stat proxy_absent)"
wait_gone "$kp" 5
ok $? "the keeper left"
grep -q "keeper: done: 0 connection(s) accepted, 0 relayed" "$log"
ok $? "it relayed none: the new kvsplice served them ($(grep -o 'keeper: done:.*' "$log" | tail -n 1))"
n=$(kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" | awk '$1 == "kvsplice_requests_total" { print $2 }')
ok $((${n:-0} >= 8 ? 0 : 1)) "the new kvsplice proxied them (kvsplice_requests_total ${n:-?})"
kvs_stop_kvsplice TERM

# --- without the keeper, the same crash resets what was queued -----------------------------------
KVSPLICE_ARGS="$KVSPLICE_ARGS --no-keeper" kvs_start_kvsplice
pid=$(cat "$(kvs_pid_file)")
expect_eq "--no-keeper: no keeper" "" "$(keeper_of "$pid")"
freeze_send_kill nokeeper 4
n=$(answered nokeeper 4)
echo "# --no-keeper: $n of 4 answered"
ok $((n < 4 ? 0 : 1)) "--no-keeper: the connections queued at the SIGKILL are reset ($((4 - n)) of 4)"
tap_done
