# SPDX-License-Identifier: Apache-2.0
# TAP helpers for test scripts: source it, then call ok/check/skip; end with tap_done.
# Output lines are what tests/run.sh counts.
TAP_FAILED=0

# ok COND_STATUS "what": prints ok / not ok for an exit status (0 = pass), and returns 0 / 1 so
# that `ok $? "started" || exit 1` stops a script whose later checks need what failed.
ok() {
	if [ "$1" -eq 0 ]; then
		echo "ok - $2"
		return 0
	fi
	echo "not ok - $2"
	TAP_FAILED=$((TAP_FAILED + 1))
	return 1
}

# check "what" CMD...: runs CMD, passes when it exits 0; its output is kept on failure.
check() {
	local what=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	ok "$rc" "$what"
	[ "$rc" -eq 0 ] || printf '#   %s\n' "${out//$'\n'/$'\n#   '}"
	return "$rc"
}

# expect_eq "what" EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then ok 0 "$1"; else ok 1 "$1 (expected '$2', got '$3')"; fi
}

skip() { echo "ok - $1 # SKIP $2"; }

tap_done() { [ "$TAP_FAILED" -eq 0 ]; }
