#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# userspace/prompt/jinja against Python's jinja2 in transformers' environment
# (tests/e2e/ref_jinja.py, Debian's python3-jinja2), short versions of the long runs:
# - the unit table of tests/unit/test_jinja.c (test_jinja --table): every case equal;
# - each family's chat_template (models/*/tokenizer_config.json) with JINJA_COUNT seeded chat
#   variable sets (tests/e2e/jinja_parity.py; the long run is --count 5000);
# - JINJA_FUZZ random templates (tests/e2e/jinja_fuzz.py, differential; long run --count 100000);
# - the hostile templates (tests/e2e/jinja_hostile.py): every one bounded in time and memory.
# The sanitizer build of test_jinja renders when present.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

count=${JINJA_COUNT:-40}
fuzz=${JINJA_FUZZ:-300}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
bin=build-asan/tests/test_jinja
[ -x "$bin" ] || bin=build/tests/test_jinja
if [ ! -x "$bin" ] || [ ! -f models/qwen3/tokenizer_config.json ]; then
	echo "not ok - jinja parity: $bin or models/ missing (make deps tests)"
	exit 1
fi
if ! "$py" -c 'import jinja2' 2>/dev/null; then
	echo "not ok - jinja parity: Python's jinja2 missing (make deps)"
	exit 1
fi
tmp=$(mktemp -d /tmp/kvs-jinja-parity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$bin" --table > "$tmp/table.jsonl"
check "the unit table renders as Python's jinja2 renders it" \
	"$py" tests/e2e/jinja_fuzz.py --bin "$bin" --cases "$tmp/table.jsonl"
check "$count chat variable sets per family render as Python's jinja2 renders them" \
	"$py" tests/e2e/jinja_parity.py --bin "$bin" --count "$count"
check "$fuzz random templates render as Python's jinja2 renders them" \
	"$py" tests/e2e/jinja_fuzz.py --bin "$bin" --count "$fuzz" --seed "${JINJA_SEED:-$RANDOM}"
check "hostile templates end within their bounds (time, memory)" \
	"$py" tests/e2e/jinja_hostile.py --bin build/tests/test_jinja
tap_done
