#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/faults.sh: faults under load (docs/benchmarks.md#faults). The node testbed
# (tests/node/up.sh) with 3 kvsim workers and kvsplice (router kv, KV events); for each fault,
# kvbench from the client pod (the seeds' workload: P=6 prefixes, C=6 streamed requests, a new
# connection per request, no warm-up) and the fault injected FAULTS_AT seconds into the run:
#   none            no fault (the baseline)
#   worker-kill     w1 SIGKILLed mid-stream, started again 2 s later
#   worker-refuse   w2 killed just before the run (nothing in flight there) and left dead: its
#                   port refuses, until the scrapes show it down; started again after the run
#   worker-hang     w3 SIGSTOPped for 5 s (its kernel still accepts connects), then SIGCONT
#   events-drop     w1's next 5 event batches dropped (kvsim's /debug/events hook): a gap
#   replay-dead     w2's replay endpoint silent and its next 2 batches dropped: the replay fails
#   kvs-restart     a new kvsplice takes the listeners over, the old one gets SIGTERM and drains
#   kvs-term        kvsplice SIGTERM (falls open to the Service's DNAT), started again 2 s later
#   kvs-kill        kvsplice SIGKILL, started again 2 s later
# Prints a table (requests, kvbench errors, kvsplice's retries and requests taken from a hung
# worker, and what the fault shows: the ms until a killed worker's blocks left the index, the
# worker's downs, the replays) and writes bench/out/faults/faults.json. Not part of `make test`
# (about 3 minutes); tests/node/test_faults.sh asserts the same behaviour.
# kvsplice runs with its defaults (scrapes every 250 ms) whatever the workers' time scale: the
# faults happen in wall-clock time.
# Env: FAULTS_TIME_SCALE (4), FAULTS_REQUESTS (360), FAULTS_AT (3), FAULTS_ONLY (fault names).
set -euo pipefail
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-benchfaults}
source "$(dirname "$0")/../tests/node/lib.sh"
cd "$KVS_ROOT"
ts=${FAULTS_TIME_SCALE:-4}
N=${FAULTS_REQUESTS:-360}
AT=${FAULTS_AT:-3}
out=bench/out/faults
mkdir -p "$out"
rm -f "$out"/*.json
[ "$(id -u)" -eq 0 ] || { echo "faults.sh: needs root" >&2; exit 1; }
bpid=
tmp_poll=$(mktemp /tmp/faults-poll.XXXXXX)
cleanup() {
	[ -z "$bpid" ] || kill "$bpid" 2>/dev/null || true
	for i in 1 2 3; do kvs_signal_worker "$i" CONT 2>/dev/null || true; done
	tests/node/down.sh >/dev/null 2>&1 || true
	rm -f "$tmp_poll"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

KVS_WORKER=kvsim KVS_TIME_SCALE=$ts tests/node/up.sh --workers 3 --kvsplice >&2

adm() { kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR$1"; }
metric() { # NAME [LABELS]
	local m=$1
	[ -z "${2:-}" ] || m+="{$2}"
	adm /metrics | awk -v m="$m" '$1 == m { v = $2 } END { print v + 0 }'
}
field() { # PATH I FIELD: a field of worker wI in /debug/index or /debug/workers
	adm "$1" | python3 -c '
import json, sys
for w in json.load(sys.stdin)["workers"]:
    if w["name"].endswith("/w" + sys.argv[1]):
        print(json.dumps(w[sys.argv[2]]))' "$2" "$3"
}
hook() { kvs_in "$NS_NODE" curl -s -m 5 -X POST "http://$(worker_ip "$1"):$SVC_PORT/debug/events?$2" >/dev/null; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# poll_until PATH I FIELD VALUE: from the node, polls PATH every 5 ms until worker wI's FIELD is
# VALUE (JSON), for 10 s at most; prints the wall-clock ms then (empty on timeout). Start it in the
# background before the fault, once "polling" is in the file it writes to.
poll_until() {
	kvs_in "$NS_NODE" python3 -c '
import json, sys, time, urllib.request
url, w, field, want = "http://%s%s" % (sys.argv[1], sys.argv[2]), "/w" + sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
print("polling", flush=True)
end = time.time() + 10
while time.time() < end:
    d = json.load(urllib.request.urlopen(url, timeout=2))
    if any(x["name"].endswith(w) and x[field] == want for x in d["workers"]):
        print(int(time.time() * 1000))
        break
    time.sleep(0.005)' "$ADMIN_ADDR" "$1" "$2" "$3" "$4"
}
# poll_start PATH I FIELD VALUE: poll_until in the background into $tmp_poll, once it polls.
poll_start() {
	rm -f "$tmp_poll"
	poll_until "$@" >"$tmp_poll" &
	poll_pid=$!
	for _ in $(seq 100); do grep -q polling "$tmp_poll" 2>/dev/null && return; sleep 0.05; done
}
poll_wait() { # T0: waits for the poller (not from a subshell: it is this shell's child); sets
	# poll_ms to its time minus T0 (ms), or -1
	local t
	wait "$poll_pid" || true
	t=$(sed -n 2p "$tmp_poll")
	poll_ms=$((${t:-0} ? t - $1 : -1))
}
poll_pid=
counters() { # retries, connect failures, abandoned (retried, cut), as JSON fields
	printf '"retries":%s,"connect_failures":%s,"abandoned_retried":%s,"abandoned_cut":%s' \
		"$(metric kvsplice_upstream_retries_total)" \
		"$(metric kvsplice_upstream_connect_failures_total)" \
		"$(metric kvsplice_upstream_abandoned_total 'outcome="retried"')" \
		"$(metric kvsplice_upstream_abandoned_total 'outcome="cut"')"
}

# evstats I: worker wI's gaps, replays ok and failed, drops (/debug/index), space-separated;
# evdelta I BEFORE: what they moved by since, as JSON fields.
evstats() {
	local k
	for k in gaps replays_ok replays_failed drops; do printf '%s ' "$(field /debug/index "$1" "$k")"; done
}
evdelta() {
	local -a b a
	read -ra b <<<"$2"
	read -ra a <<<"$(evstats "$1")"
	printf '"w%s_gaps":%s,"w%s_replays_ok":%s,"w%s_replays_failed":%s,"w%s_drops":%s,' \
		"$1" $((a[0] - b[0])) "$1" $((a[1] - b[1])) "$1" $((a[2] - b[2])) "$1" $((a[3] - b[3]))
}

# What each fault does, once the run has gone FAULTS_AT seconds; prints its own JSON fields.
fault() {
	local t0 i
	case $1 in
	none) ;;
	worker-kill)
		poll_start /debug/index 1 blocks_gpu 0
		t0=$(now_ms)
		kvs_signal_worker 1 KILL
		poll_wait "$t0"
		printf '"index_drop_ms":%s,' "$poll_ms"
		sleep 2
		kvs_start_worker 1 >&2
		;;
	worker-refuse)
		printf '"w2_down_by":%s,"w2_backoff_ms":%s,' "$(field /debug/workers 2 down_by)" \
			"$(field /debug/workers 2 backoff_ms)"
		;;
	worker-hang)
		poll_start /debug/workers 3 down true
		t0=$(now_ms)
		kvs_signal_worker 3 STOP
		poll_wait "$t0"
		printf '"down_after_ms":%s,' "$poll_ms"
		sleep 3
		kvs_signal_worker 3 CONT
		;;
	events-drop)
		evs0=$(evstats 1)
		hook 1 drop=5
		sleep 3
		evdelta 1 "$evs0"
		;;
	replay-dead)
		evs0=$(evstats 2)
		hook 2 'replay=off&drop=2'
		sleep 4
		evdelta 2 "$evs0"
		hook 2 replay=on
		;;
	kvs-restart) kvs_restart_kvsplice >&2 ;;
	kvs-term)
		kvs_stop_kvsplice TERM
		sleep 2
		kvs_start_kvsplice >&2
		;;
	kvs-kill)
		kvs_stop_kvsplice KILL
		sleep 2
		kvs_start_kvsplice >&2
		;;
	esac
}

# After the run: what the fault left to see.
after() {
	case $1 in
	worker-kill) printf '"w1_disconnects":%s,"w1_restarts":%s,' "$(field /debug/index 1 disconnects)" \
		"$(field /debug/index 1 restarts)" ;;
	worker-refuse)
		printf '"w2_downs":%s,' "$(field /debug/workers 2 downs)"
		kvs_start_worker 2 >&2
		;;
	worker-hang) printf '"w3_downs":%s,' "$(field /debug/workers 3 downs)" ;;
	esac
}

faults="none worker-kill worker-refuse worker-hang events-drop replay-dead kvs-restart kvs-term kvs-kill"
[ -z "${FAULTS_ONLY:-}" ] || faults=$FAULTS_ONLY
for f in $faults; do
	echo "== $f" >&2
	# counters of the kvsplice running now (a restart starts from 0: the deltas are taken
	# from its own start then)
	c0=$(counters)
	[ "$f" != worker-refuse ] || kvs_signal_worker 2 KILL
	tests/node/client.sh build/kvbench --url "http://$SVC_IP:$SVC_PORT" --prefix-types 6 \
		--concurrency 6 --requests "$N" --seed 7 --time-scale "$ts" \
		--tokenizer "$KVS_ROOT/models/qwen3/tokenizer.json" --label "$f" --no-warmup --json --quiet \
		>"$out/$f.kvbench.json" || true &
	bpid=$!
	sleep "$AT"
	extra=$(fault "$f")
	wait "$bpid" || true
	bpid=
	extra+=$(after "$f")
	c1=$(counters)
	python3 - "$f" "$out/$f.kvbench.json" "{$c0}" "{$c1}" "{${extra%,}}" >"$out/$f.json" <<'EOF'
import json, sys
f, kb, c0, c1, extra = sys.argv[1], json.load(open(sys.argv[2])), *map(json.loads, sys.argv[3:])
restarted = f in ("kvs-restart", "kvs-term", "kvs-kill")  # counters from the new process
d = {k: c1[k] - (0 if restarted else c0[k]) for k in c1}
print(json.dumps({"fault": f, "requests": kb.get("requests"), "errors": kb.get("errors"),
                  "ttft_p99_ms": kb.get("ttft_p99_ms"), **d, **extra}))
EOF
	sleep 2 # the workers' queues empty, a restarted one syncs
done
python3 - "$out" $faults <<'EOF'
import json, sys
out, rows = sys.argv[1], [json.load(open("%s/%s.json" % (sys.argv[1], f))) for f in sys.argv[2:]]
json.dump(rows, open(out + "/faults.json", "w"), indent=1)
base = ("fault", "requests", "errors", "retries", "connect_failures", "abandoned_retried",
        "abandoned_cut", "ttft_p99_ms")
print("| fault | requests | errors | retries | connect failures | taken from a hung worker "
      "| TTFT p99 ms | what the fault shows |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    rest = ", ".join("%s %s" % (k, v) for k, v in r.items() if k not in base)
    ttft = r.get("ttft_p99_ms")
    print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r["fault"], r["requests"], r["errors"], r["retries"], r["connect_failures"],
        r["abandoned_retried"], "%.0f" % ttft if isinstance(ttft, (int, float)) else "-",
        rest or "-"))
EOF
echo "JSON: $out/faults.json" >&2
