# SPDX-License-Identifier: Apache-2.0
# Source me: starts and stops a set of kvsim workers on 127.0.0.1 with ephemeral ports (no fixed
# ports, so parallel runs do not collide).
#   kvsim_start N [kvsim flags...]  -> KVSIM_URLS (comma list), KVSIM_PIDS, KVSIM_EVENTS
#                                      (tcp endpoints, when KVSIM_WITH_EVENTS=1)
#   kvsim_stop                      -> stops exactly the workers kvsim_start started
# KVSIM_BIN (build/kvsim) and KVSIM_TOKENIZER (models/qwen3/tokenizer.json) may be set.

KVSIM_PIDS=()
KVSIM_URLS=""
KVSIM_EVENTS=""

# A free TCP port on 127.0.0.1 for a ZMQ bind (ZMQ wildcard ports cannot be read back here).
kvsim_free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

kvsim_start() {
	local n=$1 i log port ev
	shift
	local bin=${KVSIM_BIN:-build/kvsim} tok=${KVSIM_TOKENIZER:-models/qwen3/tokenizer.json}
	KVSIM_LOGDIR=${KVSIM_LOGDIR:-$(mktemp -d /tmp/kvsim.XXXXXX)}
	for ((i = 0; i < n; i++)); do
		log=$KVSIM_LOGDIR/w$i.log
		ev=()
		if [ "${KVSIM_WITH_EVENTS:-0}" = 1 ]; then
			port=$(kvsim_free_port)
			ev=(--events-endpoint "tcp://127.0.0.1:$port")
			KVSIM_EVENTS+="${KVSIM_EVENTS:+,}tcp://127.0.0.1:$port"
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
	done
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
}
