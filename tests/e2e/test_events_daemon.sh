#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The daemon with --events: kvsplice (no BPF, loopback) follows two kvsim workers' KV events from
# the events_port / replay_port of its --services file; after requests sent through the proxy,
# /debug/index and /metrics on the admin port show, per worker, exactly the blocks kvsim holds;
# a worker removed from the file (reloaded on change) disappears from the index.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
dir=$(mktemp -d /tmp/kvs-evd.XXXXXX)
kvs_pid=""
cleanup() {
	[ -n "$kvs_pid" ] && kill "$kvs_pid" 2>/dev/null && wait "$kvs_pid" 2>/dev/null
	kvsim_stop
	rm -rf "$dir"
}
trap cleanup EXIT

KVSIM_WITH_EVENTS=1 kvsim_start 2 --num-blocks 64 --max-model-len 512 --time-scale 50 \
	--events-format map --int-block-hashes 0 || { echo "not ok - kvsim started"; exit 1; }
IFS=, read -r u0 u1 <<<"$KVSIM_URLS"
kvsim_services 2 >"$dir/services.json"
"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
	--port-file "$dir/ports" --events --log-level warn 2>"$dir/kvsplice.log" &
kvs_pid=$!
for _ in $(seq 100); do [ -s "$dir/ports" ] && break; sleep 0.05; done
read -r lport aport <"$dir/ports" 2>/dev/null
[ -n "${aport:-}" ]
ok $? "kvsplice --events started (admin port ${aport:-?})" || exit 1

# requests through the proxy (round-robin over the two workers), shared prefixes
$PY - "$lport" <<'PYEOF'
import json, random, sys, urllib.request
rng = random.Random(3)
fams = [[rng.randrange(1, 150000) for _ in range(150)] for _ in range(4)]
for i in range(24):
    p = fams[i % 4] + [rng.randrange(1, 150000) for _ in range(rng.randrange(10, 60))]
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % sys.argv[1],
                                 data=json.dumps({"model": "Qwen/Qwen3-0.6B", "prompt": p,
                                                  "max_tokens": 4}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()
PYEOF
ok $? "24 requests through the proxy"

# /debug/index per worker = kvsim's /debug/cache (blocks and next seq), waiting for the events
check_equal() {
	$PY - "$aport" "$u0" "$u1" "$1" <<'PYEOF'
import json, sys, time, urllib.request
aport, urls, n = sys.argv[1], sys.argv[2:4], int(sys.argv[4])
get = lambda u: json.loads(urllib.request.urlopen(u, timeout=10).read())
for _ in range(100):
    dbg = get("http://127.0.0.1:%s/debug/index" % aport)
    ws = {w["name"]: w for w in dbg["workers"]}
    good = len(ws) == n
    for i in range(n):
        c = get(urls[i] + "/debug/cache")
        w = ws.get("qwen/w%d" % i)
        good = good and w is not None and w["next_seq"] == c["events_next_seq"] and \
            w["blocks_gpu"] == c["cached_blocks"] and c["cached_blocks"] > 0
    if good:
        sys.exit(0)
    time.sleep(0.1)
print(json.dumps(dbg)[:2000])
sys.exit(1)
PYEOF
}
check_equal 2
ok $? "/debug/index: each worker's block count and seq equal kvsim's cache"

m=$(curl -s "http://127.0.0.1:$aport/metrics")
grep -q '^kvsplice_kv_batches_total{worker="qwen/w0"} [1-9]' <<<"$m" &&
	grep -q '^kvsplice_index_blocks{worker="qwen/w1",tier="gpu"} [1-9]' <<<"$m" &&
	grep -q '^kvsplice_kv_decode_errors_total{worker="qwen/w0",what="batch"} 0' <<<"$m"
ok $? "/metrics has the per-worker event and index series"

# remove w1 from the file: the daemon reloads it and drops w1's blocks
sleep 1.1 # the file source compares mtimes
kvsim_services 1 >"$dir/services.json.new" && mv "$dir/services.json.new" "$dir/services.json"
check_equal 1
ok $? "worker removed from --services: gone from the index"
kill "$kvs_pid" && wait "$kvs_pid"
ok $? "kvsplice exits cleanly"
kvs_pid=""

# Serving waits for the workers' initial syncs (--sync-wait): a kvsplice that routed before it
# knew the caches would place every prefix as new. w1's replay endpoint falls silent (kvsim's
# test hook), so its initial sync cannot end before --kv-replay-timeout: /readyz says no until
# --sync-wait has passed, then yes, with w0's blocks already known.
kvsim_services 2 >"$dir/services.json"
curl -s -o /dev/null -X POST "$u1/debug/events?replay=off"
# ms since the epoch of each line kvsplice's /readyz answered 200 (first) and of its start
serve_ms() { # ARGS...: starts kvsplice, prints "ms-until-ready w0-blocks-then", stops it
	local t0 p ready=""
	rm -f "$dir/ports"
	t0=$(date +%s%3N)
	"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 \
		--admin 127.0.0.1:0 --port-file "$dir/ports" --events --log-level info "$@" \
		2>>"$dir/kvsplice2.log" &
	p=$!
	for _ in $(seq 200); do [ -s "$dir/ports" ] && break; sleep 0.01; done
	read -r _ ap <"$dir/ports" 2>/dev/null
	for _ in $(seq 400); do
		if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ap:-1}/readyz")" = 200 ]; then
			ready=$(($(date +%s%3N) - t0))
			break
		fi
		sleep 0.01
	done
	echo "${ready:-never} $(curl -s "http://127.0.0.1:${ap:-1}/debug/index" |
		$PY -c 'import json, sys; print({w["name"]: w["blocks_gpu"] for w in json.load(sys.stdin)["workers"]}.get("qwen/w0", 0))')"
	kill "$p" && wait "$p"
}
read -r ms b0 < <(serve_ms --kv-replay-timeout 5 --sync-wait 1.2)
echo "# w1's replay silent: /readyz 200 after ${ms} ms, w0's blocks then: $b0"
ok $([[ $ms =~ ^[0-9]+$ ]] && [ "$ms" -ge 1100 ] && [ "$ms" -lt 4000 ] && echo 0 || echo 1) \
	"w1 not synced: not ready before --sync-wait 1.2 s has passed (${ms} ms)"
c0=$(curl -s "$u0/debug/cache" | $PY -c 'import json, sys; print(json.load(sys.stdin)["cached_blocks"])')
expect_eq "w0 synced meanwhile: its blocks known when serving starts" "$c0" "$b0"
grep -q "serving with 1 worker(s) not synced after 1200 ms" "$dir/kvsplice2.log"
ok $? "kvsplice said it serves with w1 not synced"
curl -s -o /dev/null -X POST "$u1/debug/events?replay=on"
read -r ms b0 < <(serve_ms --sync-wait 5)
echo "# replays answered: /readyz 200 after ${ms} ms"
ok $([[ $ms =~ ^[0-9]+$ ]] && [ "$ms" -lt 4000 ] && echo 0 || echo 1) \
	"both replays answered: ready once synced, long before --sync-wait 5 (${ms} ms), with w0's blocks known ($b0)"
grep -q "workers synced in [0-9]* ms: serving" "$dir/kvsplice2.log"
ok $? "kvsplice said the workers synced"

# --index-max-workers bounds the workers followed at once: with 1, the second endpoint is not
# subscribed, kvsplice says why, and /debug/index lists the one it follows (with its blocks).
rm -f "$dir/ports"
"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 \
	--admin 127.0.0.1:0 --port-file "$dir/ports" --events --index-max-workers 1 \
	--log-level warn 2>"$dir/kvsplice3.log" &
kvs_pid=$!
for _ in $(seq 200); do [ -s "$dir/ports" ] && break; sleep 0.01; done
read -r _ aport <"$dir/ports" 2>/dev/null
for _ in $(seq 200); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${aport:-1}/readyz")" = 200 ] && break
	sleep 0.02
done
followed=$(curl -s "http://127.0.0.1:${aport:-1}/debug/index" |
	$PY -c 'import json, sys; print(",".join("%s:%d" % (w["name"], w["blocks_gpu"] > 0) for w in json.load(sys.stdin)["workers"]))')
expect_eq "--index-max-workers 1: one worker followed, its blocks known" "qwen/w0:1" "$followed"
grep -q "worker qwen/w1: not subscribed: already following 1 workers (--index-max-workers)" \
	"$dir/kvsplice3.log"
ok $? "kvsplice said why qwen/w1 is not followed"
kill "$kvs_pid" && wait "$kvs_pid"
kvs_pid=""
"${KVS:-build/kvsplice}" --index-max-workers 1025 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "bad value for --index-max-workers" "$dir/err" && echo 0 || echo 1) \
	"--index-max-workers past the limit is refused (exit 2)"
