# SPDX-License-Identifier: Apache-2.0
# Source me: starts and stops a set of kvsim workers on 127.0.0.1 with ephemeral ports (no fixed
# ports, so parallel runs do not collide).
#   kvsim_start N [kvsim flags...]  -> KVSIM_URLS (comma list), KVSIM_PIDS, KVSIM_EVENTS and
#                                      KVSIM_REPLAYS (bound endpoints; with KVSIM_WITH_EVENTS=1
#                                      each worker binds tcp://127.0.0.1:* for both)
#   kvsim_stop                      -> stops exactly the workers kvsim_start started
# KVSIM_BIN (build/kvsim) and KVSIM_TOKENIZER (models/qwen3/tokenizer.json) may be set.

KVSIM_PIDS=()
KVSIM_URLS=""
KVSIM_EVENTS=""
KVSIM_REPLAYS=""

kvsim_start() {
	local n=$1 i log port ev
	shift
	local bin=${KVSIM_BIN:-build/kvsim} tok=${KVSIM_TOKENIZER:-models/qwen3/tokenizer.json}
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
