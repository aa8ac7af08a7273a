#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The proxy's files call one way (userspace/proxy/types.h): from the object files of
# userspace/proxy/*.c, the symbols each one defines and the ones it needs (nm) make a graph of
# which file calls which; any circle in it fails (a step calling back into the driver, pool.c
# calling conn.c which calls pool.c, ...). Also: a file's external functions are named after it
# (conn.c: conn_*; proxy.c: proxy_*, the public API), and only proxy.c assigns a connection's
# state (c->state). A self-check first: the check must fail on a copy of pool.c compiled with a
# call back up into conn.c.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

BUILD=${BUILD:-build}
srcs=(userspace/proxy/*.c)
objs=()
for s in "${srcs[@]}"; do objs+=("$BUILD/obj/${s%.c}.o"); done
if ! out=$(make --no-print-directory -s BUILD="$BUILD" "${objs[@]}" 2>&1); then
	ok 1 "the proxy's object files build"
	printf '%s\n' "$out" | sed 's/^/#   /'
	exit 1
fi

# nm_lines OBJ...: "file D symbol" (defined, external) and "file U symbol" (needed) lines, file
# being the object's base name without .o.
nm_lines() {
	local o f
	for o in "$@"; do
		f=$(basename "$o" .o)
		nm -g --defined-only "$o" | awk -v f="$f" 'NF >= 3 && $2 ~ /^[TDBR]$/ { print f, "D", $3 }'
		nm -u "$o" | awk -v f="$f" '{ print f, "U", $NF }'
	done
}

# Reads nm_lines; prints the file graph ("a -> b: sym, ...") and every circle found ("circle: a ->
# b -> a"); exits 1 when there is a circle.
find_circles() {
	awk '
	$2 == "D" { def[$3] = $1; files[$1] = 1; next }
	$2 == "U" { need[$1, ++nn[$1]] = $3; files[$1] = 1 }
	END {
		for (f in files)
			for (i = 1; i <= nn[f]; i++) {
				s = need[f, i]
				if (!(s in def) || def[s] == f)
					continue
				t = def[s]
				if (!((f, t) in edge)) {
					edge[f, t] = s
					out[f] = out[f] " " t
				} else {
					edge[f, t] = edge[f, t] ", " s
				}
			}
		for (k in edge) {
			split(k, ft, SUBSEP)
			print ft[1] " -> " ft[2] ": " edge[k]
		}
		bad = 0
		for (f in files)
			if (!color[f])
				bad += dfs(f, "")
		exit bad ? 1 : 0
	}
	# colour 1: on the current path, 2: done. A grey target is a circle.
	function dfs(f, path,   n, i, t, b, next_) {
		color[f] = 1
		path = path (path == "" ? "" : " -> ") f
		b = 0
		n = split(out[f], next_, " ")
		for (i = 1; i <= n; i++) {
			t = next_[i]
			if (color[t] == 1) {
				print "circle: " substr(path, index(path " ", t " ")) " -> " t
				b = 1
			} else if (!color[t]) {
				b += dfs(t, path)
			}
		}
		color[f] = 2
		return b
	}'
}

# Self-check: pool.c with a call back up into conn.c (conn.c calls pool_close), compiled as the
# Makefile compiles it, in place of the real pool.o.
tmp=$(mktemp -d /tmp/kvsplice-proxy-calls.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
git ls-files -co --exclude-standard userspace | tar -cf - -T - | tar -xf - -C "$tmp"
cat >>"$tmp/userspace/proxy/pool.c" <<'EOF'

#include "proxy/conn.h"
void pool_back_call(struct conn *c);
void pool_back_call(struct conn *c)
{
	conn_close(c);
}
EOF
mkdir -p "$tmp/obj"
if gcc -D_GNU_SOURCE -I"$tmp/userspace" -I"$BUILD/bpf" -std=gnu11 -O2 -c \
	"$tmp/userspace/proxy/pool.c" -o "$tmp/obj/pool.o" 2>"$tmp/cc.err"; then
	injected=()
	for o in "${objs[@]}"; do
		[ "$(basename "$o")" = pool.o ] && injected+=("$tmp/obj/pool.o") || injected+=("$o")
	done
	out=$(nm_lines "${injected[@]}" | find_circles)
	rc=$?
	if [ "$rc" -ne 0 ] && grep -qE '^circle: .*pool -> conn|^circle: .*conn -> pool' <<<"$out"; then
		ok 0 "the check fails on a copy of pool.c that calls conn_close (a circle pool -> conn)"
	grep "^circle" <<<"$out" | sed "s/^/#   /"
	else
		ok 1 "the check fails on a copy of pool.c that calls conn_close (a circle pool -> conn)"
		printf '%s\n' "$out" | sed 's/^/#   /'
	fi
else
	ok 1 "the injected copy of pool.c compiles"
	sed 's/^/#   /' "$tmp/cc.err"
fi

if out=$(nm_lines "${objs[@]}" | find_circles); then
	ok 0 "no call circle among the proxy's files"
else
	ok 1 "no call circle among the proxy's files"
fi
printf '%s\n' "$out" | sort | sed 's/^/#   /'

# Only the driver moves the state machine: no other file assigns a connection's state.
moved=$(grep -nE '(->|\.)state[[:space:]]*=[^=]' userspace/proxy/*.c | grep -v '^userspace/proxy/proxy.c:')
[ -z "$moved" ]
ok $? "only userspace/proxy/proxy.c changes a connection's state"
[ -z "$moved" ] || printf '%s\n' "$moved" | sed 's/^/#   /'

# A file's external functions carry its name.
bad=$(nm_lines "${objs[@]}" | awk '$2 == "D" && index($3, $1 "_") != 1 { print $1 ".c defines " $3 }')
[ -z "$bad" ]
ok $? "every external function of userspace/proxy/NAME.c is named NAME_*"
[ -z "$bad" ] || printf '%s\n' "$bad" | sed 's/^/#   /'
tap_done
