#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every C source (`make format-list`: all but the generated Unicode tables) is laid out as
# .clang-format says: one check per file, failing with the first lines clang-format would change.
# Fix with `make format`.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
command -v clang-format >/dev/null || { skip "clang-format" "not installed (make deps installs it)"; exit 0; }
for f in $(make -s --no-print-directory format-list); do
	if out=$(clang-format --dry-run -Werror "$f" 2>&1); then
		ok 0 "$f is formatted"
	else
		ok 1 "$f is formatted (make format)"
		printf '%s\n' "$out" | head -n 6 | sed 's/^/#   /'
	fi
done
tap_done
