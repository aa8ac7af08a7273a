# SPDX-License-Identifier: Apache-2.0
# Source me: starts and stops a set of kvsim workers on 127.0.0.1 with ephemeral ports (no fixed
# ports, so parallel runs do not collide).
#   kvsim_start N [kvsim flags...]  -> KVSIM_URLS (comma list), KVSIM_PIDS, KVSIM_EVENTS and
#                                      KVSIM_REPLAYS (bound endpoints; with KVSIM_WITH_EVENTS=1
#                                      each worker binds tcp://127.0.0.1:* for both)
#   kvsim_stop                      -> stops exactly the workers kvsim_start started
#   kvsim_services [N]              -> a kvsplice --services file on stdout: the Service qwen
#                                      (10.96.0.50:8000) with the first N workers (all by default)
#                                      as endpoints w0, w1, ... (with their events and replay
#                                      ports when they have them)
# KVSIM_BIN (build/kvsim) and KVSIM_TOKENIZER (models/qwen3/tokenizer.json) may be set.
# KVSIM_GPUS: which GPU each worker runs on, one name per worker in order (workers beyond the
# list, or named "-", get a GPU of their own); workers with the same name share one time-sliced
# GPU (kvsim --gpu-share). The seeds' 6-worker deployment is "a a a a b c" (four workers on one
# GPU, one on each of two more): KVSIM_GPUS=$KVSIM_SEEDS_GPUS. KVSIM_GPU_SPEEDS gives a GPU's
# speed relative to the profile ("a=2 b=1": kvsim --gpu-speed for every worker on it).

KVSIM_PIDS=()
KVSIM_URLS=""
KVSIM_EVENTS=""
KVSIM_REPLAYS=""
KVSIM_SEEDS_GPUS="a a a a b c"

kvsim_start() {
	local n=$1 i log port ev gpu
	shift
	local bin=${KVSIM_BIN:-build/kvsim} tok=${KVSIM_TOKENIZER:-models/qwen3/tokenizer.json}
	local -a gpus
	local -A fresh=() speed=()
	read -r -a gpus <<<"${KVSIM_GPUS:-}"
	for gpu in ${KVSIM_GPU_SPEEDS:-}; do speed[${gpu%%=*}]=${gpu#*=}; done
	KVSIM_LOGDIR=${KVSIM_LOGDIR:-$(mktemp -d /tmp/kvsim.XXXXXX)}
	for ((i = 0; i < n; i++)); do
		log=$KVSIM_LOGDIR/w$i.log
		# Emptied here, before the worker starts: the wait below must never read the port of
		# a previous kvsim_start from the same log directory.
		: >"$log"
		ev=()
		if [ "${KVSIM_WITH_EVENTS:-0}" = 1 ]; then
			ev=(--events-endpoint "tcp://127.0.0.1:*" --replay-endpoint "tcp://127.0.0.1:*")
		fi
		gpu=${gpus[$i]:--}
		if [ "$gpu" != - ]; then
			# A new clock per kvsim_start: rm first, a clock left from an earlier set of
			# workers in the same directory must not delay this one's first steps.
			[ -n "${fresh[$gpu]:-}" ] || rm -f "$KVSIM_LOGDIR/gpu-$gpu"
			fresh[$gpu]=1
			ev+=(--gpu-share "$KVSIM_LOGDIR/gpu-$gpu")
			[ -z "${speed[$gpu]:-}" ] || ev+=(--gpu-speed "${speed[$gpu]}")
		fi
		"$bin" --host 127.0.0.1 --port 0 --worker-id "w$i" --tokenizer "$tok" "${ev[@]}" "$@" \
			2>"$log" &
		KVSIM_PIDS+=($!)
	done
	for ((i = 0; i < n; i++)); do
		log=$KVSIM_LOGDIR/w$i.log
		port=""
		for _ in $(seq 100); do
			port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\),.*/\1/p' "$log" 2>/dev/null)
			[ -n "$port" ] && break
			kill -0 "${KVSIM_PIDS[$i]}" 2>/dev/null || break
			sleep 0.05
		done
		if [ -z "$port" ]; then
			echo "kvsim w$i did not start:" >&2
			cat "$log" >&2
			return 1
		fi
		KVSIM_URLS+="${KVSIM_URLS:+,}http://127.0.0.1:$port"
		ev=$(sed -n 's/.*, events \([^ ,]*\), replay \([^ ]*\)$/\1/p' "$log")
		if [ -n "$ev" ] && [ "$ev" != none ]; then KVSIM_EVENTS+="${KVSIM_EVENTS:+,}$ev"; fi
		ev=$(sed -n 's/.*, events \([^ ,]*\), replay \([^ ]*\)$/\2/p' "$log")
		if [ -n "$ev" ] && [ "$ev" != none ]; then KVSIM_REPLAYS+="${KVSIM_REPLAYS:+,}$ev"; fi
	done
	return 0
}

kvsim_services() {
	local n=${1:-999} i=0 eps="" u e r
	local -a us es rs
	IFS=, read -ra us <<<"$KVSIM_URLS"
	IFS=, read -ra es <<<"$KVSIM_EVENTS"
	IFS=, read -ra rs <<<"$KVSIM_REPLAYS"
	for u in "${us[@]}"; do
		[ "$i" -lt "$n" ] || break
		e=${es[$i]:-} r=${rs[$i]:-}
		eps+="${eps:+,}{\"name\":\"w$i\",\"ip\":\"127.0.0.1\",\"port\":${u##*:}"
		[ -z "$e" ] || eps+=",\"events_port\":${e##*:},\"replay_port\":${r##*:}"
		eps+="}"
		i=$((i + 1))
	done
	echo "{\"services\":[{\"name\":\"qwen\",\"cluster_ip\":\"10.96.0.50\",\"port\":8000,\"endpoints\":[$eps]}]}"
}

kvsim_stop() {
	local p
	for p in "${KVSIM_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${KVSIM_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	KVSIM_PIDS=()
	KVSIM_URLS=""
	KVSIM_EVENTS=""
	KVSIM_REPLAYS=""
}
