#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test runner behind `make test`. Runs, in order:
#   1. the unit test binaries of the sanitizer build (build-asan/tests/test_*),
#   2. the test scripts tests/*/test_*.sh (shell, may drive node, python, the netns node),
#   3. a short libFuzzer run of every build/fuzz/fuzz_* target.
# Every test file prints TAP lines ("ok - what", "not ok - what", "ok - what # SKIP why"); a file
# that exits non-zero without a "not ok" line, or prints no result at all, counts as one failure.
# Usage: tests/run.sh [WORD]  runs only the files whose name contains WORD.
# Ends with one line: "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
filter=${1:-}
FUZZ_SECONDS=${FUZZ_SECONDS:-12}
FILE_TIMEOUT=${FILE_TIMEOUT:-900}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
pass=0 fail=0 skip=0
failed_files=()
logdir=$(mktemp -d /tmp/kvsplice-tests.XXXXXX)

run_file() {
	local name=$1
	shift
	local log="$logdir/${name//\//-}.log" t0=$SECONDS rc p f s # e2e-test_x.sh.log: two dirs may share a name
	timeout --kill-after=10 "$FILE_TIMEOUT" "$@" >"$log" 2>&1 </dev/null
	rc=$?
	p=$(grep -cE '^ok\b' "$log" | tr -d ' ')
	s=$(grep -cE '^ok\b.*# *SKIP' "$log" | tr -d ' ')
	f=$(grep -cE '^not ok\b' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc" >>"$log"
		f=1
	elif [ $((p + f + s)) -eq 0 ]; then
		echo "not ok - $name reported no result" >>"$log"
		f=1
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	printf '%-44s %4d passed %3d failed %3d skipped %5ds\n' "$name" "$p" "$f" "$s" $((SECONDS - t0))
	if [ "$f" -gt 0 ]; then
		failed_files+=("$name")
		echo "---- $name (failing lines and the last 40 lines) ----"
		grep -E '^not ok\b' "$log"
		tail -n 40 "$log"
		echo "----"
	fi
}

want() { [ -z "$filter" ] || [[ "$1" == *"$filter"* ]]; }

for t in build-asan/tests/test_*; do
	[ -x "$t" ] || continue
	want "$t" && run_file "unit/$(basename "$t")" "$t"
done
for t in tests/*/test_*.sh; do
	[ -f "$t" ] || continue
	want "$t" && run_file "${t#tests/}" bash "$t"
done
for t in build/fuzz/fuzz_*; do
	[ -x "$t" ] || continue
	want "$t" || continue
	corpus=tests/fuzz/corpus/$(basename "$t")
	# New inputs go to a scratch corpus of this target's own; the committed seeds are read only.
	mkdir -p "$logdir/corpus-$(basename "$t")"
	run_file "fuzz/$(basename "$t")" bash -c '
		"$1" -max_total_time="$2" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix="$3/" "$3/corpus-$(basename "$1")" $( [ -d "$4" ] && echo "$4" ) \
			&& echo "ok - $(basename "$1") ran $2 s with no crash and no sanitizer report"' \
		_ "$t" "$FUZZ_SECONDS" "$logdir" "$corpus"
done

if [ ${#failed_files[@]} -gt 0 ]; then
	echo "failed: ${failed_files[*]} (logs in $logdir)"
else
	rm -rf "$logdir"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
