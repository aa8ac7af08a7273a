#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsplice --metrics: a second listener for Prometheus (no BPF, loopback, two kvsim workers).
#  - it serves /metrics (the same families as the admin's), /healthz and /readyz, and no /debug
#    page (404 there, 200 on the admin address);
#  - a restart hands it over with the other listeners: a second kvsplice on the same addresses
#    takes the socket from the first (the first exits), and the address answers throughout;
#  - without --metrics nothing listens there, and --print-config shows --metrics only when set.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
dir=$(mktemp -d /tmp/kvs-mlisten.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	kvsim_stop
	rm -rf "$dir"
}
trap cleanup EXIT
bin=${KVS:-build/kvsplice}

KVSIM_WITH_EVENTS=1 kvsim_start 2 --num-blocks 64 --max-model-len 512 --time-scale 50 ||
	{ echo "not ok - kvsim started"; exit 1; }
kvsim_services >"$dir/services.json"
read -r lport aport mport < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
M=127.0.0.3:$mport # the metrics listener on another loopback address than the admin's
code() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$1"; }

# start NAME: a kvsplice on the fixed addresses, --metrics $M; its PID in $pid.
start() {
	"$bin" --services "$dir/services.json" --no-bpf --listen "127.0.0.1:$lport" \
		--admin "127.0.0.1:$aport" --metrics "$M" --log-level info 2>"$dir/$1.log" &
	pid=$!
	pids+=("$pid")
}
start first
for _ in $(seq 200); do [ "$(code "http://$M/readyz")" = 200 ] && break; sleep 0.05; done
expect_eq "--metrics: /readyz 200 once serving" 200 "$(code "http://$M/readyz")"
expect_eq "--metrics: /healthz 200" 200 "$(code "http://$M/healthz")"
curl -s -o /dev/null "http://127.0.0.1:$lport/v1/completions" -H 'Content-Type: application/json' \
	-d "{\"model\":\"Qwen/Qwen3-0.6B\",\"prompt\":[$(seq -s, 1 40)],\"max_tokens\":2}"
curl -s -m 5 "http://$M/metrics" | awk '$1 == "#" && $2 == "TYPE" { print $3 }' | sort >"$dir/m.mon"
curl -s -m 5 "http://127.0.0.1:$aport/metrics" | awk '$1 == "#" && $2 == "TYPE" { print $3 }' |
	sort >"$dir/m.admin"
ok "$(grep -qx kvsplice_requests_total "$dir/m.mon" && cmp -s "$dir/m.mon" "$dir/m.admin"; echo $?)" \
	"--metrics: /metrics serves the admin's families ($(wc -l <"$dir/m.mon") of them)"
expect_eq "--metrics: requests counted there too" 1 \
	"$(curl -s -m 5 "http://$M/metrics" | awk '$1 == "kvsplice_requests_total" { print $2 }')"
for p in /debug/route /debug/workers /debug/index /debug/daemon; do
	expect_eq "--metrics: $p is not served (404); the admin address serves it" "404 200" \
		"$(code "http://$M$p") $(code "http://127.0.0.1:$aport$p")"
done

# A restart: the second process takes the listeners over, the first drains and exits.
first=$pid
start second
for _ in $(seq 200); do kill -0 "$first" 2>/dev/null || break; sleep 0.05; done
ok "$(! kill -0 "$first" 2>/dev/null; echo $?)" "restart: the first kvsplice handed over and exited"
expect_eq "restart: the --metrics address answers, from the second" 200 "$(code "http://$M/readyz")"
ok "$(grep -q 'taking over 3 listening socket' "$dir/second.log"; echo $?)" \
	"restart: the metrics listener was among the sockets taken over (3: proxy, admin, metrics)"
grep -q 'handover: .* not configured here' "$dir/second.log"
ok $((!$?)) "restart: no socket of the first was left unused"
kill "$pid" && wait "$pid"
ok $? "kvsplice exits cleanly"
pids=()

# --admin on port 0 with --port-file: the file names the admin's port, not the metrics one.
"$bin" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
	--metrics "$M" --port-file "$dir/ports" --log-level info 2>"$dir/third.log" &
pid=$!
pids+=("$pid")
for _ in $(seq 200); do [ -s "$dir/ports" ] && break; sleep 0.05; done
read -r _ pf_admin <"$dir/ports"
ok "$([ -n "$pf_admin" ] && [ "$pf_admin" != "$mport" ]; echo $?)" \
	"--port-file: the admin port ($pf_admin) is not the metrics port ($mport)"
expect_eq "--port-file: its admin port serves /debug/workers (the metrics listener would 404)" 1 \
	"$(c=$(code "http://127.0.0.1:$pf_admin/debug/workers"); [ "$c" = 200 ] && echo 1 || echo "$c")"
kill "$pid" && wait "$pid"
pids=()

"$bin" --services "$dir/services.json" --no-bpf --admin "127.0.0.1:$aport" \
	--metrics "127.0.0.1:$aport" 2>"$dir/conflict.err"
expect_eq "--metrics on the admin's address: a usage error (2)" 2 $?
ok "$(grep -q -- '--metrics must differ' "$dir/conflict.err"; echo $?)" "... that says why"

expect_eq "without --metrics: --print-config has no --metrics line" 0 \
	"$("$bin" --no-bpf --print-config | grep -c -- '^--metrics')"
expect_eq "with it: --print-config gives it back" "--metrics $M" \
	"$("$bin" --no-bpf --metrics "$M" --print-config | grep -- '^--metrics ')"
tap_done
