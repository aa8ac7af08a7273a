#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kvbench --workload sessions and agent against kvsim workers on loopback: every turn answered;
# a turn sent only after the turn before it was answered, a think time later (the request log);
# on one worker that never evicts, a session's cached tokens are exactly the ideal (each turn
# reuses its turn before's whole blocks); agents share their system prompt; the same seed sends
# the same prompts; options that do not go together are refused before anything is sent.
# The generator's own shape (distributions, the growing prefix) is tests/unit/test_convo.c.
# KVSIM_BIN and KVBENCH_BIN (build/kvsim, build/kvbench) may be set.
set -u
cd "$(dirname "$0")/../.." || exit 1
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
source tests/lib/jsonq.sh
PY=/usr/bin/python3
KVBENCH=${KVBENCH_BIN:-build/kvbench}
TOK=models/qwen3/tokenizer.json
tmp=$(mktemp -d /tmp/test_workloads.XXXXXX)
trap 'kvsim_stop; rm -rf "$tmp"' EXIT
kvsim_start 2 --time-scale 20 --num-blocks 40000 --max-model-len 16384 || exit 1
W0=${KVSIM_URLS%%,*}


# --- refused before anything is sent ------------------------------------------------------------
for bad in "--workload sessions --trace tests/kvsim/traces/small.jsonl" "--turns 3" \
	"--workload sessions --keep-alive" "--workload agent --trace-block-tokens 24"; do
	# shellcheck disable=SC2086
	out=$("$KVBENCH" --url "$W0" --tokenizer "$TOK" $bad --quiet 2>&1)
	expect_eq "refused: $bad (exit 2)" 2 $?
	[ -n "$out" ]
	ok $? "  with a message ($out)"
done

# --- sessions on one worker: every turn in order, the ideal reached exactly --------------------
S=(--workload sessions --conversations 40 --convo-rate 8 --think-ms 400 --trace-block-tokens 16
	--time-scale 20 --tokenizer "$TOK")
j=$("$KVBENCH" --url "$W0" "${S[@]}" --reset --json --quiet --request-log "$tmp/log.jsonl")
ok $? "sessions, 1 URL: exits 0" || exit 1
n=$(field "$j" trace_rows)
expect_eq "mode sessions" sessions "$(field "$j" mode)"
expect_eq "every turn answered ($n), no errors" "$n 0" "$(field "$j" requests) $(field "$j" errors)"
[ "$n" -gt 40 ]
ok $? "more turns ($n) than the 40 sessions"
expect_eq "one worker that never evicts: cached tokens equal the ideal" \
	"$(field "$j" ideal_cached_tokens)" "$(field "$j" usage_cached_tokens)"
$PY -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["ideal_cached_ratio"] > 0.2 else 1)' "$j"
ok $? "the sessions reuse their context (ideal ratio $(field "$j" ideal_cached_ratio))"
expect_eq "every answer's usage.prompt_tokens is the length sent" 0 "$(field "$j" prompt_mismatches)"
$PY - "$tmp/log.jsonl" <<'PY'
import json, sys
rows = {r["k"]: r for r in map(json.loads, open(sys.argv[1]))}
late = early = 0
for r in rows.values():
    if r["after"] < 0:
        continue
    p = rows[r["after"]]
    assert p["conv"] == r["conv"] and p["turn"] + 1 == r["turn"]
    # sent after the turn before's answer ended and its think time passed (model ms), never
    # before; not long after either (10 s of model time is 0.5 s of wall clock at --time-scale
    # 20: a loaded machine delays the loop by milliseconds, a broken schedule by far more)
    gap = r["start_ms"] - (p["start_ms"] + p["total_ms"])
    if gap < r["gap_ms"] - 1:
        early += 1
    elif gap > r["gap_ms"] + 10000:
        late += 1
print("ok - %d later turns each sent its think time after the answer before it (%d early, %d late)"
      % (sum(r["after"] >= 0 for r in rows.values()), early, late)
      if early == 0 and late == 0 else "not ok - turns early %d, late %d" % (early, late))
sys.exit(0 if early == 0 and late == 0 else 1)
PY
TAP_FAILED=$((TAP_FAILED + $?))

# --- the same seed, the same prompts; another seed, others ---------------------------------------
j2=$("$KVBENCH" --url "$W0" "${S[@]}" --reset --json --quiet)
j3=$("$KVBENCH" --url "$W0" "${S[@]}" --seed 7 --reset --json --quiet)
expect_eq "the same seed: the same prompt tokens" "$(field "$j" trace_prompt_tokens)" \
	"$(field "$j2" trace_prompt_tokens)"
[ "$(field "$j" trace_prompt_tokens)" != "$(field "$j3" trace_prompt_tokens)" ]
ok $? "another seed: other prompts ($(field "$j3" trace_prompt_tokens) tokens)"

# --- chat requests (the template path): the ideal of the rendered prompts, reached on one worker -
for w in sessions agent; do
	j=$("$KVBENCH" --url "$W0" --api chat --workload $w --conversations 16 --convo-rate 8 \
		--turns 3 --think-ms 300 --convo-max-tokens 12000 --trace-block-tokens 16 \
		--time-scale 20 --tokenizer models/qwen3 --reset --json --quiet)
	ok $? "$w as chat requests, 1 URL: exits 0" || continue
	expect_eq "$w chat: no errors, every prompt the length kvbench rendered" "0 0" \
		"$(field "$j" errors) $(field "$j" prompt_mismatches)"
	expect_eq "$w chat: cached tokens equal the ideal of the rendered prompts" \
		"$(field "$j" ideal_cached_tokens)" "$(field "$j" usage_cached_tokens)"
	$PY -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["ideal_cached_ratio"] > 0.3 else 1)' "$j"
	ok $? "$w chat: the conversation's context is reused (ideal $(field "$j" ideal_cached_ratio))"
done

# --- agents on two workers: the shared system prompt is reused ----------------------------------
j=$("$KVBENCH" --url "$KVSIM_URLS" --spread kv --workload agent --conversations 12 --convo-rate 4 \
	--turns 4 --system-tokens 1024 --convo-max-tokens 12000 --trace-block-tokens 16 \
	--time-scale 20 --tokenizer "$TOK" \
	--reset --json --quiet)
ok $? "agent, 2 URLs, spread kv: exits 0" || exit 1
expect_eq "mode agent, no errors" "agent 0" "$(field "$j" mode) $(field "$j" errors)"
$PY -c 'import json,sys
d=json.loads(sys.argv[1])
sys.exit(0 if d["ideal_cached_ratio"] > 0.7 and 0 < d["cached_token_ratio"] <= d["ideal_cached_ratio"] + 1e-9 else 1)' "$j"
ok $? "agents share their system prompt (ideal $(field "$j" ideal_cached_ratio), cached $(field "$j" cached_token_ratio))"
tap_done
