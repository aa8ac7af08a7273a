#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs CMD as a process of the testbed's client pod: first joins the client cgroup (where the
# interception programs are attached), then enters the pod's network namespace. The order
# matters: `ip netns exec` would remount /sys and hide cgroup2 and bpffs, `nsenter --net` does not.
#   client.sh CMD [ARG...]      e.g. client.sh curl -s http://10.96.0.50:8000/v1/models
set -eu
source "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || { echo "usage: client.sh CMD [ARG...]" >&2; exit 2; }
[ -e "/run/netns/$NS_CLIENT" ] && [ -d "$CG_CLIENTS" ] ||
	{ echo "client.sh: testbed${KVS_SFX:+ $KVS_SFX} is not up (tests/node/up.sh)" >&2; exit 1; }
echo $$ >"$CG_CLIENTS/cgroup.procs"
exec nsenter --net="/run/netns/$NS_CLIENT" -- "$@"
