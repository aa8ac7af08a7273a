#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The official `openai` npm client (tests/js, pinned 6.x because the latest
# major needs Node.js 22), unmodified, pointed at http://10.96.0.50:8000/v1 from the client pod,
# completes a streaming chat completion through kvsplice. Workers: kvsim when built, else
# tests/node/testworker.py (up.sh's default).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}to$$
source tests/node/lib.sh
trap 'tests/node/down.sh >/dev/null 2>&1' EXIT

bin=${KVSPLICE:-$KVS_ROOT/build/kvsplice}
if [ ! -x "$bin" ]; then
	skip "openai client through kvsplice" "$bin is not built yet"
	exit 0
fi
[ -d tests/js/node_modules/openai ] || { echo "not ok - tests/js/node_modules/openai missing (make deps)"; exit 1; }
check "testbed up with 2 workers and kvsplice" tests/node/up.sh --workers 2 --kvsplice || exit 1
metric() {
	kvs_in "$NS_NODE" curl -s -m 5 "http://$ADMIN_ADDR/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
r0=$(kvs_bpf_stat rewritten)
q0=$(metric kvsplice_requests_total)
out=$(timeout 60 tests/node/client.sh node tests/js/openai_stream.mjs "http://$SVC_IP:$SVC_PORT/v1" 2>&1)
rc=$?
echo "# openai: $out"
ok $rc "openai: models.list() then chat.completions.create({stream: true}) completed"
res=$(tail -n 1 <<<"$out")
declare -A L=()
json_load L <<<"$res"
ok $((${L[chunks]:-0} >= 2 ? 0 : 1)) "several stream chunks arrived"
content=${L[content]:-}
ok $([ -n "$content" ] && [ "$content" != 0 ] && echo 0 || echo 1) "the streamed content is not empty"
fr=${L[finish_reason]:-}
ok $([[ $fr == stop || $fr == length ]] && echo 0 || echo 1) "the stream ended with a finish_reason ($fr)"
ok $(($(kvs_bpf_stat rewritten) > r0 ? 0 : 1)) "its connection was intercepted (BPF rewritten $r0 -> $(kvs_bpf_stat rewritten))"
ok $(($(metric kvsplice_requests_total) > q0 ? 0 : 1)) "and served by kvsplice (requests_total $q0 -> $(metric kvsplice_requests_total))"
tap_done
