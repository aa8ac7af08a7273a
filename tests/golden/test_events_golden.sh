#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Golden vectors: KV event payloads encoded by an independent Python encoder (python3-msgpack,
# python3-xxhash, written from vLLM's wire format) decode, through build/kvevents (the C decoder and
# index), to exactly the events and the per-worker block state the encoder expects.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
dir=$(mktemp -d /tmp/kvs-golden.XXXXXX)
trap 'rm -rf "$dir"' EXIT
PY=/usr/bin/python3
$PY tests/golden/kv_events_golden.py gen "$dir" >"$dir/files" || { echo "not ok - generator ran"; exit 1; }
mapfile -t files <"$dir/files"
build/kvevents decode --seed 4242 --block-size 16 "${files[@]}" >"$dir/out" 2>"$dir/err"
ok $? "kvevents decode ran on ${#files[@]} payloads"
npre=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["n_before_clear"])' "$dir/expected.json")
build/kvevents decode --seed 4242 --block-size 16 "${files[@]:0:$npre}" >"$dir/pre" 2>>"$dir/err"
ok $? "kvevents decode ran on the $npre payloads before the clear"
$PY tests/golden/kv_events_golden.py check "$dir" "$dir/pre" <"$dir/out"
