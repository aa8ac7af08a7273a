#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvbench's and kvsim's command lines, read from their option tables (tools/kvbench/opts.c,
# tools/kvsim/opts.c): --help shows the defaults the defaults functions set; values out of range
# or conflicting flags exit 2 with a message naming the option; accepted values land in the
# config (--print-config, which exits before anything is sent or bound) and --print-config reads
# back as the same config. Nothing is started: no network at all.
set -u
cd "$(dirname "$0")/../.." || exit 1
source tests/lib/tap.sh
KVBENCH=${KVBENCH_BIN:-build/kvbench}
KVSIM=${KVSIM_BIN:-build/kvsim}
U=http://127.0.0.1:1

# refused TOOL OPTION ARGS...: exit status 2 and a message naming --OPTION.
refused() {
	local tool=$1 opt=$2 out rc
	shift 2
	out=$("$tool" "$@" 2>&1 >/dev/null)
	rc=$?
	[ "$rc" -eq 2 ] && [[ "$out" == *"--$opt"* ]]
	ok $? "$(basename "$tool") $*: refused naming --$opt (status $rc: $out)"
}

# config TOOL ARGS...: the --print-config lines.
config() {
	local tool=$1
	shift
	"$tool" "$@" --print-config
}

# has TOOL LINE ARGS...: --print-config of ARGS has the line LINE.
has() {
	local tool=$1 line=$2
	shift 2
	config "$tool" "$@" | grep -qxF -- "$line"
	ok $? "$(basename "$tool") $*: --print-config has '$line'"
}

# joined: --help with each option's wrapped lines joined into one
joined() {
	awk 'substr($0, 1, 30) ~ /^ +$/ {sub(/^ +/, " "); printf "%s", $0; next}
		{printf "\n%s", $0} END {print ""}'
}

# --- --help: every default from the defaults function -------------------------------------------
help=$("$KVBENCH" --help | joined)
ok $? "kvbench --help exits 0"
for d in "--concurrency C.*default 8)" "--prefix-types P.*default 7)" "--spread .*" \
	"--timeout S.*default 600)" "--kv-spill-factor X.*default 2)" "--trace-block-tokens B.*"; do
	grep -qE -- "^  $d" <<<"$help"
	ok $? "kvbench --help lists ${d%% *}"
done
grep -qF "default: max(200, 20 x --prefix-types))" <<<"$help"
ok $? "kvbench --help: --requests' default is its rule"
help=$("$KVSIM" --help | joined)
ok $? "kvsim --help exits 0"
for d in "--block-size N.*default 16)" "--max-model-len N.*" "--kv-cache-memory-bytes SIZE" \
	"--step-fixed-ms X.*default 10)" "--log-level .*"; do
	grep -qE -- "^  $d" <<<"$help"
	ok $? "kvsim --help lists ${d%% *}"
done
grep -qF "(default 1G)" <<<"$help"
ok $? "kvsim --help: the KV capacity's default, 1G"

# --- kvbench: refused ---------------------------------------------------------------------------
refused "$KVBENCH" url --url ftp://x
refused "$KVBENCH" url --prefix-types 2
refused "$KVBENCH" url --url "http://127.0.0.1:0"
refused "$KVBENCH" spread --url $U --spread nope
refused "$KVBENCH" prefix-types --url $U --prefix-types 0
refused "$KVBENCH" concurrency --url $U --concurrency 0
refused "$KVBENCH" runs --url $U --runs 65
refused "$KVBENCH" output-tokens --url $U --output-tokens 0
refused "$KVBENCH" mixed-lengths --url $U --mixed-lengths 91
refused "$KVBENCH" requests --url $U --requests -1
refused "$KVBENCH" popularity --url $U --popularity zipf:x
refused "$KVBENCH" api --url $U --api nope
refused "$KVBENCH" time-scale --url $U --time-scale 0
refused "$KVBENCH" trace-block-tokens --url $U --trace-block-tokens 513
refused "$KVBENCH" trace-block-tokens --url $U --trace-block-tokens 0
refused "$KVBENCH" trace-speedup --url $U --trace-speedup 0
refused "$KVBENCH" trace-start --url $U --trace-start -1
refused "$KVBENCH" kv-spill-factor --url $U --kv-spill-factor 0.5
refused "$KVBENCH" api --url $U --trace tests/kvsim/traces/small.jsonl --api chat
refused "$KVBENCH" keep-alive --url $U --trace tests/kvsim/traces/small.jsonl --keep-alive
refused "$KVBENCH" requests --url $U --trace tests/kvsim/traces/small.jsonl --requests 5
refused "$KVBENCH" events --url $U --events tcp://127.0.0.1:5
refused "$KVBENCH" nope --url $U --nope

# --- kvbench: accepted, into the config ---------------------------------------------------------
has "$KVBENCH" "--url $U,http://127.0.0.1:2/v1" --url "$U,http://127.0.0.1:2/v1/"
has "$KVBENCH" "--spread kv" --spread kv
has "$KVBENCH" "--spread round-robin" --spread round-robin
has "$KVBENCH" "--popularity zipf:1.1" --popularity zipf:1.1
has "$KVBENCH" "--concurrency 3" --concurrency 3
has "$KVBENCH" "--api chat" --api chat
has "$KVBENCH" "--no-warmup" --no-warmup
has "$KVBENCH" "--kv-backlog 0.5" --kv-backlog 0.5
has "$KVBENCH" "--events tcp://127.0.0.1:5,tcp://127.0.0.1:6" \
	--events tcp://127.0.0.1:5 --events tcp://127.0.0.1:6
has "$KVBENCH" "--prefix-seed 42" --prefix-seed 42
config "$KVBENCH" --url $U | grep -qE -- "^--(requests|prefix-seed) "
ok $((!$?)) "kvbench: without --requests and --prefix-seed, neither is set (their rules apply)"
args=(--url "$U,http://127.0.0.1:2" --spread dynamo --prefix-types 3 --requests 9 --seed 5
	--time-scale 20 --trace-limit 4 --reset --json --kv-spill-slack 1)
a=$(config "$KVBENCH" "${args[@]}")
eval "again=($(tr '\n' ' ' <<<"$a"))" # --print-config's values are shell words
b=$(config "$KVBENCH" "${again[@]}")
expect_eq "kvbench: --print-config reads back as the same config" "$a" "$b"

# --- kvsim: refused -----------------------------------------------------------------------------
refused "$KVSIM" port --port 65536
refused "$KVSIM" port --port -1
refused "$KVSIM" time-scale --time-scale 0
refused "$KVSIM" block-size --block-size 0
refused "$KVSIM" max-model-len --max-model-len 0
refused "$KVSIM" max-num-batched-tokens --max-num-batched-tokens 0
refused "$KVSIM" max-num-seqs --max-num-seqs 0
refused "$KVSIM" kv-bytes-per-token --kv-bytes-per-token 0
refused "$KVSIM" events-format --events-format nope
refused "$KVSIM" int-block-hashes --int-block-hashes 2
refused "$KVSIM" log-level --log-level loud
refused "$KVSIM" num-blocks --num-blocks x
refused "$KVSIM" profile --profile a100-nope
refused "$KVSIM" gpu-speed --gpu-speed 0

# --- kvsim: accepted, into the config -----------------------------------------------------------
has "$KVSIM" "--port 8001" --port 8001
has "$KVSIM" "--kv-cache-memory-bytes 2G" --kv-cache-memory-bytes 2147483648
has "$KVSIM" "--events-format map" --events-format map
has "$KVSIM" "--int-block-hashes 0" --int-block-hashes 0
has "$KVSIM" "--time-scale 0.5" --time-scale 0.5
has "$KVSIM" "--log-level debug" --log-level debug
# Profiles: every value a profile sets, and a flag overrides it wherever it stands.
has "$KVSIM" "--profile seeds"
has "$KVSIM" "--step-host-ms 9"
has "$KVSIM" "--model Qwen/Qwen3-8B" --profile h200-qwen3-8b
has "$KVSIM" "--step-fixed-ms 7.5" --profile h200-qwen3-8b
has "$KVSIM" "--decode-attn-us 31" --profile h200-qwen3-8b
has "$KVSIM" "--max-num-batched-tokens 8192" --profile h200-qwen3-8b
has "$KVSIM" "--step-fixed-ms 3" --step-fixed-ms 3 --profile h200-qwen3-8b
has "$KVSIM" "--step-fixed-ms 3" --profile h200-qwen3-8b --step-fixed-ms 3
has "$KVSIM" "--model m" --model m --profile=h200-qwen3-0.6b
has "$KVSIM" "--step-fixed-ms 3.54" --profile=h200-qwen3-0.6b
has "$KVSIM" "--step-fixed-ms 10" --profile h200-qwen3-8b --profile seeds
a=$(config "$KVSIM" --profile h200-qwen3-8b --num-blocks 500)
eval "again=($(tr '\n' ' ' <<<"$a"))"
b=$(config "$KVSIM" "${again[@]}")
expect_eq "kvsim --profile h200-qwen3-8b: --print-config reads back as the same config" "$a" "$b"
args=(--port 9 --worker-id w3 --num-blocks 100 --block-size 32 --events-endpoint tcp://127.0.0.1:*
	--topic t --seed 4 --step-fixed-ms 1.5)
a=$(config "$KVSIM" "${args[@]}")
eval "again=($(tr '\n' ' ' <<<"$a"))" # --print-config's values are shell words
b=$(config "$KVSIM" "${again[@]}")
expect_eq "kvsim: --print-config reads back as the same config" "$a" "$b"
tap_done
