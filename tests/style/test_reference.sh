#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# docs/reference/PAGE.md is exactly what `build/kvref PAGE` prints, for every page kvref lists
# (`kvref --list`), and no page of docs/reference/ is one kvref does not print. The pages are
# printed from the tables the daemon uses (userspace/daemon/catalog.c for metrics.md), so a stale
# page means a table changed without `make reference`. A self-check first: the comparison must
# fail on a copy of docs/reference/metrics.md with a family row dropped, and on one with a help
# text changed.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
KVREF=${KVREF:-build/kvref}
[ -x "$KVREF" ] || { echo "not ok - $KVREF missing (make all)"; exit 1; }

# stale DIR PAGE: prints the first differing lines and returns 1 when DIR/PAGE.md is not what
# kvref prints.
stale() {
	local out
	if ! out=$(diff -u "$1/$2.md" <("$KVREF" "$2") 2>&1); then
		printf '%s\n' "$out" | head -n 12
		return 1
	fi
	return 0
}

pages=$("$KVREF" --list)
printf '%s\n' "$pages" | grep -qx metrics
ok $? "kvref lists the metrics page"

tmp=$(mktemp -d /tmp/kvsplice-reference.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp docs/reference/metrics.md "$tmp/metrics.md"
sed -i '0,/^| `kvsplice_/{/^| `kvsplice_/d}' "$tmp/metrics.md"
if out=$(stale "$tmp" metrics); then
	ok 1 "self-check: a copy with its first family row dropped is found stale"
else
	ok 0 "self-check: a copy with its first family row dropped is found stale"
fi
awk '!done && /^\| `kvsplice_/ { sub(/ \|$/, " (stale) |"); done = 1 } 1' docs/reference/metrics.md \
	>"$tmp/metrics.md"
if out=$(stale "$tmp" metrics); then
	ok 1 "self-check: a copy with its first help text changed is found stale"
else
	ok 0 "self-check: a copy with its first help text changed is found stale"
fi

for p in $pages; do
	if out=$(stale docs/reference "$p"); then
		ok 0 "docs/reference/$p.md is what kvref $p prints"
	else
		ok 1 "docs/reference/$p.md is what kvref $p prints (make reference)"
		printf '%s\n' "$out" | sed 's/^/#   /'
	fi
done
for f in docs/reference/*.md; do
	p=$(basename "$f" .md)
	printf '%s\n' "$pages" | grep -qx "$p"
	ok $? "$f is a page kvref prints"
done
tap_done
