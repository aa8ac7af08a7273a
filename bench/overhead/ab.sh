#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two kvsplice binaries side by side in one overhead run (a before/after of a change): both run
# at once on loopback (--no-bpf) in front of the same C upstream (build/bench/overhead --serve),
# and build/bench/overhead sends each case's requests to the upstream directly, to A and to B,
# alternating request by request. The order of A and B swaps every round, so the advantage of a
# position (seen here: the path measured second is a few µs faster) cancels out. Prints each
# round's table, then per case the median p50 / p99 of A and B and the mean difference B - A
# with its standard error over the rounds. Only 127.0.0.1 is used.
# Usage: bash bench/overhead/ab.sh BIN_A BIN_B [ROUNDS] [N] [CASE]
#   ROUNDS (default 6, even), N requests per case and path (default 3000), CASE a substring of
#   the cases to run (default "keep-alive").
set -euo pipefail
cd "$(dirname "$0")/../.."
a=${1:?usage: ab.sh BIN_A BIN_B [ROUNDS] [N] [CASE]}
b=${2:?usage: ab.sh BIN_A BIN_B [ROUNDS] [N] [CASE]}
rounds=${3:-6}
n=${4:-3000}
case_=${5:-keep-alive}
bench=build/bench/overhead
tok=${KVTOK_TOKENIZER:-models/qwen3/tokenizer.json}
[ -x "$bench" ] || { echo "ab.sh: run make first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/kvs-ovh-ab.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# free loopback ports: the upstream, then A's and B's proxy and admin ports
read -r up pa pb aa ab < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(5)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
"$bench" --serve "$up" >"$tmp/upstream.log" 2>&1 &
pids+=($!)
printf '{"services":[{"name":"qwen","cluster_ip":"10.96.0.50","port":8000,"endpoints":[{"name":"w0","ip":"127.0.0.1","port":%s}]}]}\n' \
	"$up" >"$tmp/services.json"
start() { # start BIN LISTEN ADMIN NAME
	"$1" --services "$tmp/services.json" --no-bpf --listen "127.0.0.1:$2" --admin "127.0.0.1:$3" \
		--no-handover --tokenizer "$tok" --log-level warn --port-file "$tmp/$4.ports" \
		2>"$tmp/$4.log" &
	pids+=($!)
}
start "$a" "$pa" "$aa" a
start "$b" "$pb" "$ab" b
for _ in $(seq 200); do [ -s "$tmp/a.ports" ] && [ -s "$tmp/b.ports" ] && break; sleep 0.1; done
[ -s "$tmp/a.ports" ] && [ -s "$tmp/b.ports" ] || { echo "ab.sh: a kvsplice did not start" >&2; cat "$tmp"/*.log >&2; exit 1; }

for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		order=(--target "127.0.0.1:$pa" --label A --target "127.0.0.1:$pb" --label B)
	else
		order=(--target "127.0.0.1:$pb" --label B --target "127.0.0.1:$pa" --label A)
	fi
	"$bench" --n "$n" --case "$case_" --target "127.0.0.1:$up" --label direct "${order[@]}" \
		>"$tmp/round-$r.txt"
	echo "round $r"
	grep '^|' "$tmp/round-$r.txt"
done

python3 - "$tmp" "$rounds" <<'EOF'
import statistics as st, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
per = {}
for r in range(1, rounds + 1):
    lines = [l for l in open("%s/round-%d.txt" % (tmp, r)) if l.startswith("|")]
    head = [c.strip() for c in lines[0].split("|")[1:-1]]
    for line in lines[2:]:
        c = [x.strip() for x in line.split("|")[1:-1]]
        row = dict(zip(head, c))
        d = per.setdefault(c[0], {"A": [], "B": [], "A99": [], "B99": []})
        for k in ("A", "B"):
            d[k].append(float(row["%s p50 µs" % k]))
            d[k + "99"].append(float(row["%s p99 µs" % k]))
print("\n| request | A p50 µs | B p50 µs | B - A p50 µs (± SE) | A p99 µs | B p99 µs | B - A p99 µs (± SE) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for case, d in per.items():
    def diff(a, b):
        x = [q - p for p, q in zip(d[a], d[b])]
        se = st.stdev(x) / len(x) ** 0.5 if len(x) > 1 else float("nan")
        return "%+.1f ± %.1f" % (st.mean(x), se)
    print("| %s | %.1f | %.1f | %s | %.1f | %.1f | %s |" % (
        case, st.median(d["A"]), st.median(d["B"]), diff("A", "B"),
        st.median(d["A99"]), st.median(d["B99"]), diff("A99", "B99")))
print("\n(medians over %d rounds; the order of A and B swaps every round)" % rounds)
EOF
