#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Removes the netns node testbed built by up.sh (same KVS_TESTBED_ID): processes (by the PIDs it
# recorded, and whatever still runs in its namespaces or client cgroup, by PID), namespaces,
# the client cgroup, the pinned BPF state and the run directory. Safe to run any time, also after
# a failed or partial up.sh; exits 0 when nothing is left.
set -u
source "$(dirname "$0")/lib.sh"

pids=()
for f in "$RUN_DIR"/*.pid; do
	[ -f "$f" ] && pids+=("$(cat "$f")")
done
ours=$(ip netns list 2>/dev/null | awk '{print $1}' |
	grep -E "^kvs-(node|client|w[0-9]+)${KVS_SFX//-/\\-}\$" || true)
for ns in $ours; do
	pids+=($(ip netns pids "$ns" 2>/dev/null))
done
if [ -f "$CG_CLIENTS/cgroup.procs" ]; then
	pids+=($(cat "$CG_CLIENTS/cgroup.procs"))
fi
if [ ${#pids[@]} -gt 0 ]; then
	kill -TERM "${pids[@]}" 2>/dev/null
	for _ in $(seq 40); do
		alive=0
		for p in "${pids[@]}"; do kvs_alive "$p" && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.05
	done
	kill -KILL "${pids[@]}" 2>/dev/null
fi

for ns in $ours; do
	ip netns del "$ns" 2>/dev/null
done
[ -d "$CG_CLIENTS" ] && rmdir "$CG_CLIENTS" 2>/dev/null
[ -d "$CG_TOP" ] && rmdir "$CG_TOP" 2>/dev/null
# Unpinning the links detaches the programs (nothing else holds them once kvsplice is gone).
rm -rf "$PIN_DIR" "$RUN_DIR"

left=""
for ns in $ours; do
	[ -e "/run/netns/$ns" ] && left+=" netns:$ns"
done
[ -d "$CG_TOP" ] && left+=" cgroup:$CG_TOP"
[ -e "$PIN_DIR" ] && left+=" pins:$PIN_DIR"
if [ -n "$left" ]; then
	echo "down.sh: could not remove$left" >&2
	exit 1
fi
exit 0
