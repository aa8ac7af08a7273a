#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The include rule of userspace/ (userspace/README.md): a file in userspace/LAYER/ includes
# userspace headers only by their folder ("core/log.h") and only from its own layer or one that
# LAYER may include. Tools, benches and tests name the folder too. A self-check first: the rule
# must fail on a copy of the tree with one include going up a layer.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

# LAYER: the layers it may include (besides its own), lowest first.
declare -A may=(
	[core]=""
	[discovery]="core"
	[prompt]="core"
	[kv]="core discovery"
	[route]="core discovery prompt kv"
	[node]="core discovery"
	[proxy]="core discovery prompt kv route node"
	[daemon]="core discovery prompt kv route node proxy"
)

# Prints one line per include that breaks the rule in the tree at $1; returns 1 if any.
check_tree() {
	local root=$1 bad=0 f layer inc dir base line
	local -A hdr=()
	for f in "$root"/userspace/*/*.h; do hdr[$(basename "$f")]=1; done
	while IFS= read -r f; do
		layer=
		case $f in "$root"/userspace/*/*) layer=${f#"$root"/userspace/}; layer=${layer%%/*} ;; esac
		if [ -n "$layer" ] && [ -z "${may[$layer]+x}" ]; then
			echo "$f: folder $layer is not a layer of userspace/README.md"; bad=1
		fi
		while IFS= read -r line; do
			inc=${line#*\"}; inc=${inc%%\"*}
			case $inc in
			*/*)
				dir=${inc%%/*}
				[ -n "${may[$dir]+x}" ] || continue # ../lib/x.h, bpf/ and the like
				[ -f "$root/userspace/$inc" ] || { echo "$f: includes $inc, which does not exist"; bad=1; continue; }
				if [ -n "$layer" ] && [ "$dir" != "$layer" ] && [[ " ${may[$layer]} " != *" $dir "* ]]; then
					echo "$f: $layer/ includes $inc ($layer may include: ${may[$layer]:-nothing})"
					bad=1
				fi
				;;
			*)
				base=$inc
				if [ -n "${hdr[$base]+x}" ]; then
					echo "$f: includes \"$inc\" without its folder"; bad=1
				fi
				;;
			esac
		done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f")
	done < <(cd "$root" && git ls-files -co --exclude-standard 'userspace/*.[ch]' 'tools/*.[ch]' \
		'bench/*.[ch]' 'tests/*.[ch]' | sed "s|^|$root/|")
	return $bad
}

# Self-check on a copy where core/ reaches up into route/.
tmp=$(mktemp -d /tmp/kvsplice-layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
git ls-files -co --exclude-standard userspace | tar -cf - -T - | tar -xf - -C "$tmp"
(cd "$tmp" && git init -q . && git add -A)
sed -i '0,/#include "core\/buf.h"/s//#include "core\/buf.h"\n#include "route\/router.h"/' "$tmp/userspace/core/http.h"
if out=$(check_tree "$tmp"); then
	ok 1 "the rule fails on core/http.h including route/router.h"
else
	ok 0 "the rule fails on core/http.h including route/router.h"
	printf '%s\n' "$out" | sed 's/^/#   /'
fi

if out=$(check_tree "$PWD"); then
	ok 0 "every include in userspace, tools, bench and tests follows the layer rule"
else
	ok 1 "every include in userspace, tools, bench and tests follows the layer rule"
	printf '%s\n' "$out" | sed 's/^/#   /'
fi

# No folder outside the table.
for d in userspace/*/; do
	d=${d%/}; d=${d#userspace/}
	[ -n "${may[$d]+x}" ]
	ok $? "userspace/$d is a layer of the table"
done
tap_done
