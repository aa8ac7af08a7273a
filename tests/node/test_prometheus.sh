#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real Prometheus (Debian's) scraping kvsplice and two kvsim workers in the node testbed and
# evaluating deploy/monitoring/kvsplice.rules.yaml, with their windows shortened to fit a test
# (rate windows 5m -> 15s, every `for` -> 3s; the expressions are the shipped ones):
#  1. both jobs are up and the ratios are recorded from live traffic (kvbench through the
#     ClusterIP, policy kv), the workers confirming what kvsplice predicted; no alert fires;
#  2. worker 2's KV events are cut (nftables in its pod drops what its events port sends) while
#     requests still reach it: KvspliceEventsStale fires for worker 2, not for worker 1;
#  3. kvsplice is SIGKILLed: KvspliceInterceptionOpen fires (connections fall back to the
#     Service's DNAT meanwhile).
# kvsplice is scraped on its --metrics listener, as deploy/monitoring/prometheus.yaml does in a
# cluster. Prometheus runs inside the node namespace, on 127.0.0.1 there, and is stopped by its
# PID.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}tp$$
source tests/node/lib.sh
tmp=$(mktemp -d /tmp/kvs-prom.XXXXXX)
prom_pid="" bench_pid=""
cleanup() {
	[ -z "$bench_pid" ] || kill "$bench_pid" 2>/dev/null
	[ -z "$prom_pid" ] || { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; }
	tests/node/down.sh >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

for b in prometheus promtool; do
	if ! command -v "$b" >/dev/null; then
		skip "Prometheus against the testbed" "$b is not installed (make deps)"
		exit 0
	fi
done
for b in build/kvsplice build/kvsim build/kvbench; do
	if [ ! -x "$b" ]; then
		skip "Prometheus against the testbed" "$b is not built yet"
		exit 0
	fi
done

PROM=127.0.0.1:19091 # inside the node namespace
TOK=$KVS_ROOT/models/qwen3
export KVS_WORKER=kvsim KVS_TIME_SCALE=10 KVS_TOKENIZER=$TOK KVS_MODEL=Qwen/Qwen3-0.6B
MON=127.0.0.1:15092 # kvsplice --metrics, inside the node namespace: what the DaemonSet's Prometheus scrapes
export KVSPLICE_ARGS="--router kv --scrape-interval 100ms --tokenizer $TOK --metrics $MON"
check "testbed up with 2 kvsim workers and kvsplice (kv)" tests/node/up.sh --workers 2 --kvsplice ||
	exit 1

# The shipped rules, their windows shortened; the expressions untouched.
sed -e 's/\[5m\]/[15s]/g' -e 's/for: [0-9]*m$/for: 3s/' deploy/monitoring/kvsplice.rules.yaml \
	>"$tmp/rules.yaml"
cat >"$tmp/prometheus.yaml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [$tmp/rules.yaml]
scrape_configs:
  - job_name: kvsplice
    static_configs: [{targets: ["$MON"], labels: {instance: node1}}]
  - job_name: vllm
    static_configs: [{targets: ["$(worker_ip 1):$SVC_PORT", "$(worker_ip 2):$SVC_PORT"]}]
EOF
check "promtool check config (the test's scrape config, the shipped rules shortened)" \
	promtool check config "$tmp/prometheus.yaml"
kvs_in "$NS_NODE" prometheus --config.file="$tmp/prometheus.yaml" --storage.tsdb.path="$tmp/data" \
	--web.listen-address="$PROM" >"$tmp/prometheus.log" 2>&1 &
prom_pid=$!

# query EXPR: the instant vector as "labels value" lines (sorted), or nothing.
query() {
	kvs_in "$NS_NODE" curl -s -m 5 -G "http://$PROM/api/v1/query" --data-urlencode "query=$1" |
		python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for r in sorted(d.get("data", {}).get("result", []), key=lambda r: sorted(r["metric"].items())):
    m = r["metric"]
    print(",".join("%s=%s" % kv for kv in sorted(m.items()) if kv[0] != "__name__"), r["value"][1])'
}
# wait_for SECS EXPR: until EXPR has a sample; its lines on stdout. 1 when it never had.
wait_for() {
	local until=$((SECONDS + $1)) out
	while [ $SECONDS -lt $until ]; do
		out=$(query "$2")
		[ -n "$out" ] && { echo "$out"; return 0; }
		sleep 1
	done
	return 1
}

# Traffic through the ClusterIP for the whole test: 8 prefixes on 2 workers, so both get requests.
tests/node/client.sh build/kvbench --url "http://$SVC_IP:$SVC_PORT" --prefix-types 8 --concurrency 2 \
	--seed 1 --requests 100000 --tokenizer "$TOK" --model "$KVS_MODEL" --api completions \
	--time-scale "$KVS_TIME_SCALE" --quiet >"$tmp/kvbench.log" 2>&1 &
bench_pid=$!

# --- 1. scraped, recorded, quiet ------------------------------------------------------------------
ok "$(wait_for 30 'up{job="kvsplice"} == 1' >/dev/null; echo $?)" "Prometheus scrapes kvsplice's --metrics listener (up 1)"
expect_eq "Prometheus scrapes both workers' /metrics" 2 \
	"$(wait_for 30 'count(up{job="vllm"} == 1) == 2' | awk '{ print $NF }')" ||
	kvs_in "$NS_NODE" curl -s -m 5 "http://$PROM/api/v1/targets" | python3 -c '
import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]:
    print("#   target %s %s: %s" % (t["scrapeUrl"], t["health"], t["lastError"]))'
# a ratio is NaN until requests come (0/0): wait for a number
wait_for 60 'kvsplice:reuse_offered:ratio_rate5m > 0 and kvsplice:reuse_confirmed:ratio_rate5m > 0' >/dev/null
out=$(query 'kvsplice:reuse_confirmed:ratio_rate5m')
echo "# reuse confirmed: $out; offered: $(query kvsplice:reuse_offered:ratio_rate5m); taken: $(query kvsplice:reuse_taken:ratio_rate5m)"
ok "$(awk '{ exit !($2 > 0.9 && $2 < 1.1) }' <<<"${out:-x 0}"; echo $?)" \
	"recorded: the workers confirm what kvsplice predicted (reported / predicted cached tokens ~1)"
ok "$(query 'kvsplice:reuse_offered:ratio_rate5m > 0.3' | grep -q . ; echo $?)" \
	"recorded: the reuse offered (best cached / prompt tokens) is there and above 0.3"
ok "$(query 'kvsplice:route_decision_seconds:p99_5m > 0' | grep -q . ; echo $?)" \
	"recorded: the decision latency's p99"
ok "$(wait_for 30 'count(kvsplice:worker_routed:rate5m > 0 and on (instance, worker) kvsplice:kv_events:rate5m > 0) == 2' >/dev/null; echo $?)" \
	"recorded: events and requests for both workers"
expect_eq "no alert fires while all is well" "" "$(query 'ALERTS{alertstate="firing"}')"

# --- 2. worker 2's events cut -------------------------------------------------------------------
kvs_in "$(ns_worker 2)" nft -f - <<EOF
table inet kvstest {
	chain out { type filter hook output priority 0; tcp sport $EVENTS_PORT drop; }
}
EOF
ok $? "nftables in worker 2's pod drops what its events port sends"
out=$(wait_for 60 'ALERTS{alertname="KvspliceEventsStale",alertstate="firing"}') || out=""
echo "# firing: $out"
ok "$(grep -q 'w2' <<<"$out" && ! grep -q 'w1' <<<"$out"; echo $?)" \
	"KvspliceEventsStale fires for worker 2 (requests, no events), not for worker 1"

# --- 3. kvsplice killed -------------------------------------------------------------------------
kvs_stop_kvsplice KILL
out=$(wait_for 30 'ALERTS{alertname="KvspliceInterceptionOpen",alertstate="firing"}') || out=""
echo "# firing: $out"
ok "$(grep -q 'instance=node1' <<<"$out"; echo $?)" "KvspliceInterceptionOpen fires once kvsplice is killed"
tap_done
