#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Round trip: kvsim workers' KV events through build/kvevents (events + index) must reproduce
# each worker's own cache contents. See events_kvsim.py.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
[ -x build/kvsim ] || { echo "not ok - build/kvsim missing"; exit 1; }
timeout 300 /usr/bin/python3 tests/e2e/events_kvsim.py build models/qwen3/tokenizer.json
