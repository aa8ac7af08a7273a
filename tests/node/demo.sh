#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: the seeds' experiment on one machine. A simulated node (network namespaces) with 6
# kvsim workers behind the Service 10.96.0.50:8000 (nftables DNAT, a random endpoint per
# connection, as kube-proxy does), and the seeds' workload (kvbench) from a client pod against
# that unchanged ClusterIP, on the same seeded requests for every variant:
#   service             kvsplice absent: kube-proxy's random choice
#   kvsplice-<policy>   kvsplice intercepting the ClusterIP through eBPF, --router <policy>
#                       (round-robin, dynamo, kv by default)
#   client-dynamo       the anchor: Dynamo's cost run client-side by kvbench to the pod IPs, what
#                       the workers hold from their KV events (Dynamo's KV routing, as the seeds
#                       ran it)
# Prints progress while it runs, then seed-style tables with the seeds' published numbers beside
# ours and one line saying what the run showed. Tables and raw JSON go to results/demo/.
# QUICK=1 (`make demo QUICK=1`, what `make test` runs): two points, fewer requests, time scale 10:
# about a minute, the same path end to end.
# Env: DEMO_TIME_SCALE (4), DEMO_POINTS (P:C pairs, "2:8 7:8 12:8 24:8 24:16"), DEMO_RUNS (1),
#      DEMO_SEED (1), DEMO_WORKERS (6), DEMO_POLICIES (kvsplice policies, "round-robin dynamo
#      kv"), DEMO_DYNAMO (1: the client-side anchor), DEMO_KVBENCH_ARGS (extra kvbench flags,
#      e.g. "--popularity zipf:1.1"), DEMO_KVSPLICE_ARGS (extra kvsplice flags), DEMO_OUT
#      (results/demo), KVS_TESTBED_ID (demo), DEMO_MODEL (the model family whose tokenizer every
#      part reads, a directory of models/: qwen3 by default, e.g. llama3_2), DEMO_API
#      (completions, or chat: the seeds' prompts sent as chat messages; chat by default for
#      every family but qwen3, whose seeds' run used completions), DEMO_GPUS (which GPU each
#      worker runs on, tests/node/up.sh's KVS_GPUS: the seeds' "a a a a b c", four workers
#      time-sliced on one GPU, for 6 workers; a GPU each otherwise, or with DEMO_GPUS=-).
set -euo pipefail
export KVS_TESTBED_ID=${KVS_TESTBED_ID:-demo}
source "$(dirname "$0")/lib.sh"
source "$KVS_ROOT/tools/kvsim/cluster.sh" # KVSIM_SEEDS_GPUS
cd "$KVS_ROOT"
if [ "${QUICK:-0}" = 1 ]; then
	TS=${DEMO_TIME_SCALE:-10}
	POINTS=${DEMO_POINTS:-7:8 24:8}
	QUICK_ARGS="--requests 160"
else
	TS=${DEMO_TIME_SCALE:-4}
	POINTS=${DEMO_POINTS:-2:8 7:8 12:8 24:8 24:16}
	QUICK_ARGS=""
fi
MODEL=${DEMO_MODEL:-qwen3}
[ -f "models/$MODEL/tokenizer.json" ] || { echo "demo: models/$MODEL is not there (make deps)" >&2; exit 1; }
# The served model name each family goes by (the kvsim workers serve it, kvbench asks for it).
case $MODEL in
qwen3) SERVED=Qwen/Qwen3-0.6B ;;
qwen2_5) SERVED=Qwen/Qwen2.5-0.5B-Instruct ;;
llama3_2) SERVED=meta-llama/Llama-3.2-1B-Instruct ;;
llama2) SERVED=meta-llama/Llama-2-7b-chat-hf ;;
deepseek_v3) SERVED=deepseek-ai/DeepSeek-V3 ;;
gemma3) SERVED=google/gemma-3-1b-it ;;
mistral_nemo) SERVED=mistralai/Mistral-Nemo-Instruct-2407 ;;
gptoss) SERVED=openai/gpt-oss-20b ;;
*) SERVED=$MODEL ;;
esac
if [ "$MODEL" = qwen3 ]; then API=${DEMO_API:-completions}; else API=${DEMO_API:-chat}; fi
TOKENIZER=$KVS_ROOT/models/$MODEL
RUNS=${DEMO_RUNS:-1}
SEED=${DEMO_SEED:-1}
POLICIES=${DEMO_POLICIES:-round-robin dynamo kv}
WORKERS=${DEMO_WORKERS:-6}
if [ "$WORKERS" = 6 ]; then GPUS=${DEMO_GPUS:-$KVSIM_SEEDS_GPUS}; else GPUS=${DEMO_GPUS:--}; fi
OUT=${DEMO_OUT:-$KVS_ROOT/results/demo}
say() { printf '\n== %s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces, BPF)" >&2; exit 1; }
for b in build/kvsim build/kvbench build/kvsplice; do
	[ -x "$b" ] || { echo "demo: $b is missing (make)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"

finished=0
cleanup() {
	tests/node/down.sh >/dev/null 2>&1 || true
	[ "$finished" = 1 ] || echo "demo: stopped early; partial results in $OUT" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

variants=(service)
for pol in $POLICIES; do variants+=("kvsplice-$pol"); done
[ "${DEMO_DYNAMO:-1}" = 1 ] && variants+=(client-dynamo)
npoints=$(wc -w <<<"$POINTS")
total=$((${#variants[@]} * npoints))
step=0 t_start=$SECONDS

say "node testbed: $WORKERS kvsim workers serving $SERVED (time scale $TS, GPUs: $GPUS), Service $SVC_IP:$SVC_PORT (DNAT, random), requests to /v1/$([ "$API" = chat ] && echo chat/)completions"
KVS_WORKER=kvsim KVS_TIME_SCALE=$TS KVS_TOKENIZER=$TOKENIZER KVS_MODEL=$SERVED KVS_GPUS=$GPUS \
	tests/node/up.sh --workers "$WORKERS" --no-kvsplice >&2

svc_url=http://$SVC_IP:$SVC_PORT
pods="" evs=""
for i in $(seq "$WORKERS"); do
	pods+="${pods:+,}http://$(worker_ip "$i"):$SVC_PORT"
	evs+="${evs:+,}tcp://$(worker_ip "$i"):$EVENTS_PORT"
done
tests/node/client.sh curl -sf --max-time 10 "$svc_url/v1/models" >/dev/null ||
	{ echo "demo: the Service does not answer" >&2; exit 1; }

# variant NAME kvbench-args...: every point for one variant, results as JSON lines in $OUT/NAME.
variant() {
	local name=$1 pt p c left
	shift
	: >"$OUT/$name.jsonl"
	for pt in $POINTS; do
		p=${pt%%:*} c=${pt##*:}
		step=$((step + 1))
		left=""
		if [ "$step" -gt 1 ]; then
			left=", about $(((SECONDS - t_start) * (total - step + 1) / (step - 1))) s left"
		fi
		say "[$step/$total] $name: P=$p, C=$c (${RUNS} run(s), seed $SEED)$left"
		# shellcheck disable=SC2086
		tests/node/client.sh build/kvbench "$@" --prefix-types "$p" --concurrency "$c" \
			--seed "$SEED" --runs "$RUNS" --tokenizer "$TOKENIZER" --model "$SERVED" --api "$API" \
			--metrics-urls "$pods" --reset --time-scale "$TS" --label "$name P=$p C=$c" \
			$QUICK_ARGS ${DEMO_KVBENCH_ARGS:-} --json >>"$OUT/$name.jsonl"
	done
}

variant service --url "$svc_url"
for pol in $POLICIES; do
	say "kvsplice --router $pol intercepting the same ClusterIP (eBPF)"
	# the testbed runs TS times faster than real time: so does the metrics cadence (250 ms real)
	KVSPLICE_ARGS="--router $pol --scrape-interval $((250 / TS))ms --tokenizer $TOKENIZER ${DEMO_KVSPLICE_ARGS:-}" \
		kvs_start_kvsplice
	variant "kvsplice-$pol" --url "$svc_url"
	kvs_in "$NS_NODE" curl -s "http://$ADMIN_ADDR/metrics" >"$OUT/kvsplice-$pol.metrics" || true
	kvs_stop_kvsplice || true
done
if [ "${DEMO_DYNAMO:-1}" = 1 ]; then
	variant client-dynamo --url "$pods" --spread dynamo --events "$evs"
fi

say "results ($((SECONDS - t_start)) s)"
python3 "$KVS_ROOT/tests/node/demo_report.py" "$OUT" "$WORKERS" "$TS" "${variants[@]}" |
	tee "$OUT/report.md"
finished=1
