#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvsim --gpu-share: two workers on one time-sliced GPU take turns, two on GPUs of their own do
# not. Each worker gets one request at the same moment; every step costs 200 ms of GPU time
# (nothing on the host), so a request takes one step alone and waits for the neighbour's step
# when the GPU is shared: the two answers end about 200 ms apart, against about 0 apart on two
# GPUs. Compared are the ends, so a late start of one client (up to ~100 ms) does not decide.
set -u
cd "$(dirname "$0")/../.." || exit 1
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
trap kvsim_stop EXIT
COST=(--step-fixed-ms 200 --step-prefill-fixed-ms 0 --prefill-us-per-token 0 --decode-us-per-seq 0
	--api-overhead-ms 0 --step-host-ms 0)

# apart: how far apart (s) the two workers' answers end, each asked once at the same moment.
apart() {
	local u i
	IFS=, read -r -a u <<<"$KVSIM_URLS"
	for i in 0 1; do
		(curl -s -o /dev/null -m 10 "${u[$i]}/v1/completions" \
			-H 'content-type: application/json' \
			-d '{"model":"Qwen/Qwen3-0.6B","prompt":"hello there","max_tokens":1}' &&
			date +%s.%N) &
	done
	wait
}
gap() { sort -n | awk 'NR == 1 { a = $1 } NR == 2 { printf "%.3f\n", $1 - a }'; }

KVSIM_LOGDIR=$(mktemp -d /tmp/kvsim-gpu.XXXXXX)
KVSIM_GPUS="- -" kvsim_start 2 "${COST[@]}" || exit 1
g=$(apart | gap)
kvsim_stop
awk -v g="$g" 'BEGIN { exit !(g != "" && g < 0.12) }'
ok $? "GPUs of their own: both answers end together (${g}s apart)"

KVSIM_GPUS="g g" kvsim_start 2 "${COST[@]}" || exit 1
g=$(apart | gap)
kvsim_stop
awk -v g="$g" 'BEGIN { exit !(g != "" && g > 0.15 && g < 0.3) }'
ok $? "one GPU time-sliced: the second answer ends a step after the first (${g}s apart)"
[ -s "$KVSIM_LOGDIR/gpu-g" ]
ok $? "the GPU's clock file is in the workers' directory"
rm -rf "$KVSIM_LOGDIR"
tap_done
