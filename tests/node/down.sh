#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Removes the netns node testbed built by up.sh (same KVS_TESTBED_ID), every node of it:
# processes (by the PIDs it recorded, and whatever still runs in its namespaces or client cgroups,
# by PID), namespaces, the client cgroups, every node's pinned BPF state and the run directory.
# Safe to run any time, also after a failed or partial up.sh (it finds the nodes by name, not by
# what up.sh recorded); exits 0 when nothing is left.
set -u
source "$(dirname "$0")/lib.sh"

sfx_re=${KVS_SFX//-/\\-}
pids=()
for f in "$RUN_DIR"/*.pid; do
	[ -f "$f" ] && pids+=("$(cat "$f")")
done
# Node I>1 adds its number to node 1's names: kvs-node2, kvs-client2, clients2, kvsplice-test2.
ours=$(ip netns list 2>/dev/null | awk '{print $1}' |
	grep -E "^kvs-(node[0-9]*|client[0-9]*|w[0-9]+)$sfx_re\$" || true)
for ns in $ours; do
	pids+=($(ip netns pids "$ns" 2>/dev/null))
done
cgroups=()
for cg in "$CG_TOP"/clients*; do
	[ -f "$cg/cgroup.procs" ] || continue
	cgroups+=("$cg")
	pids+=($(cat "$cg/cgroup.procs"))
done
pins=()
for d in /sys/fs/bpf/kvsplice-test*; do
	[[ ${d##*/} =~ ^kvsplice-test[0-9]*$sfx_re$ ]] && pins+=("$d")
done
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
for cg in "${cgroups[@]}"; do
	rmdir "$cg" 2>/dev/null
done
[ -d "$CG_TOP" ] && rmdir "$CG_TOP" 2>/dev/null
# Unpinning the links detaches the programs (nothing else holds them once kvsplice is gone).
rm -rf "${pins[@]}" "$RUN_DIR"

left=""
for ns in $ours; do
	[ -e "/run/netns/$ns" ] && left+=" netns:$ns"
done
[ -d "$CG_TOP" ] && left+=" cgroup:$CG_TOP"
for d in "${pins[@]}"; do
	[ -e "$d" ] && left+=" pins:$d"
done
if [ -n "$left" ]; then
	echo "down.sh: could not remove$left" >&2
	exit 1
fi
exit 0
