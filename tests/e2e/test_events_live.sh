#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Live KV events over real ZMQ sockets on 127.0.0.1 (random ports): a Python vLLM-worker
# stand-in (events_live.py) against build/kvevents. See events_live.py for what is checked.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
timeout 120 /usr/bin/python3 tests/e2e/events_live.py build/kvevents
