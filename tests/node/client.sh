#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs CMD as a process of a client pod of the testbed (node I's with --node I, default
# $KVS_NODE, else node 1): first joins that node's client cgroup (where its interception programs
# are attached), then enters the pod's network namespace. The order matters: `ip netns exec`
# would remount /sys and hide cgroup2 and bpffs, `nsenter --net` does not.
#   client.sh [--node I] CMD [ARG...]      e.g. client.sh curl -s http://10.96.0.50:8000/v1/models
set -eu
source "$(dirname "$0")/lib.sh"
node=${KVS_NODE:-1}
if [ "${1:-}" = --node ]; then
	node=${2:-}
	shift 2 || shift
fi
[[ $node =~ ^[1-9][0-9]*$ ]] || { echo "client.sh: --node must be a node number (1..K)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: client.sh [--node I] CMD [ARG...]" >&2; exit 2; }
ns=$(ns_client "$node") cg=$(cg_clients "$node")
what="testbed${KVS_SFX:+ $KVS_SFX}"
[ "$node" = 1 ] || what="node $node of $what"
[ -e "/run/netns/$ns" ] && [ -d "$cg" ] || { echo "client.sh: $what is not up (tests/node/up.sh)" >&2; exit 1; }
echo $$ >"$cg/cgroup.procs"
exec nsenter --net="/run/netns/$ns" -- "$@"
