#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/soak.sh: kvsplice under steady kvbench load for a long time (docs/benchmarks.md#soak),
# to show that its memory and descriptors stay flat. On loopback (--no-bpf, no root needed):
# SOAK_WORKERS kvsim workers with KV events, one kvsplice (kv policy, events followed) in front,
# kvbench run after run through it until the duration ends. Each kvbench run takes a new workload
# seed (new prefixes: the index and the tokenizer cache keep turning over) and alternates a new
# connection per request with keep-alive, completions with chat.
# Every SOAK_INTERVAL seconds it samples the RSS and open descriptors of kvsplice and of the kvsim
# workers (summed) into a CSV; at the end a plot (gnuplot PNG, else an SVG written by python) and
# a verdict: "flat at the end" when, between the window right after the warm-up and the last
# window (5 minutes each at the default duration, a sixth of the run when shorter), kvsplice's RSS
# grew by at most max(3 %, 4 MiB) and its descriptors by at most 8, and the least-squares slope
# of its RSS over the last half of the run is below 1 MiB per 10 minutes.
# Not part of `make test`. Usage: bench/soak.sh [SECONDS]; SOAK_REPORT_ONLY=1 bench/soak.sh only
# writes the verdict and the plot again from an existing $SOAK_OUT/soak.csv.
# Env: SOAK_SECONDS (1800), SOAK_INTERVAL (10), SOAK_WARMUP (300, or a sixth of the run),
#      SOAK_WORKERS (3), SOAK_CONCURRENCY (4), SOAK_TIME_SCALE (4), SOAK_REQUESTS (per kvbench
#      run, 200), SOAK_OUT (bench/out/soak), SOAK_KVSPLICE_ARGS (more kvsplice flags, e.g.
#      "--tokenizer-cache 0"), KVS (build/kvsplice).
# Output: $SOAK_OUT/soak.csv, soak.png (or soak.svg), kvbench.jsonl, verdict.txt, summary.json.
# Exit status: 0 flat, 1 not flat or a kvbench run failed, 2 setup failure.
set -u
cd "$(dirname "$0")/.."
DUR=${1:-${SOAK_SECONDS:-1800}}
IVL=${SOAK_INTERVAL:-10}
W=${SOAK_WORKERS:-3}
C=${SOAK_CONCURRENCY:-4}
TS=${SOAK_TIME_SCALE:-4}
REQ=${SOAK_REQUESTS:-200}
OUT=${SOAK_OUT:-bench/out/soak}
KVS=${KVS:-build/kvsplice}
if [ -n "${SOAK_WARMUP:-}" ]; then WARM=$SOAK_WARMUP; elif [ "$DUR" -ge 1800 ]; then WARM=300; else WARM=$((DUR / 6)); fi
WIN=$WARM
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
source tools/kvsim/cluster.sh

report_only=${SOAK_REPORT_ONLY:-0}
fail=0
if [ "$report_only" != 1 ]; then
[ -x "$KVS" ] && [ -x build/kvsim ] && [ -x build/kvbench ] || { echo "soak: build first (make)" >&2; exit 2; }
mkdir -p "$OUT"
# Private copies of the binaries: a rebuild during the long run must not change or break it.
BIN=$(mktemp -d /tmp/kvs-soak.XXXXXX)
cp "$KVS" build/kvsim build/kvbench "$BIN/"
export KVSIM_BIN=$BIN/kvsim KVSIM_LOGDIR=$BIN
KPID="" SPID="" LPID=""
cleanup() {
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	[ -n "$KPID" ] && kill "$KPID" 2>/dev/null
	[ -n "$KPID" ] && wait "$KPID" 2>/dev/null
	kvsim_stop
	rm -rf "$BIN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

KVSIM_WITH_EVENTS=1 kvsim_start "$W" --time-scale "$TS" || exit 2
# endpoints with their event and replay ports, so the index is fed as in a real node
IFS=, read -r -a urls <<<"$KVSIM_URLS"
IFS=, read -r -a evs <<<"$KVSIM_EVENTS"
IFS=, read -r -a rps <<<"$KVSIM_REPLAYS"
eps="" sep=""
for i in "${!urls[@]}"; do
	eps+="$sep{\"name\":\"w$i\",\"ip\":\"127.0.0.1\",\"port\":${urls[$i]##*:},\"events_port\":${evs[$i]##*:},\"replay_port\":${rps[$i]##*:}}"
	sep=,
done
echo "{\"services\":[{\"name\":\"soak\",\"cluster_ip\":\"10.96.0.60\",\"port\":8000,\"route\":\"kv\",\"endpoints\":[$eps]}]}" >"$BIN/services.json"
"$BIN/kvsplice" --no-bpf --services "$BIN/services.json" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
	--tokenizer "$PWD/models/qwen3/tokenizer.json" --port-file "$BIN/ports" ${SOAK_KVSPLICE_ARGS:-} \
	>"$OUT/kvsplice.log" 2>&1 &
KPID=$!
for _ in $(seq 200); do [ -s "$BIN/ports" ] && break; sleep 0.05; done
read -r LPORT APORT <"$BIN/ports" || { echo "soak: kvsplice did not start" >&2; cat "$OUT/kvsplice.log" >&2; exit 2; }

fds() { local n=0 p; for p in "$@"; do n=$((n + $(ls "/proc/$p/fd" 2>/dev/null | wc -l))); done; echo $n; }
# the values of series NAME... in one scrape, comma-separated ("" for an absent one)
metrics() { curl -s -m 2 "http://127.0.0.1:$APORT/metrics" | awk -v ks="$*" 'BEGIN { n = split(ks, k, " ") } { v[$1] = $2 } END { for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? "," : ""), v[k[i]] }'; }

# the sampler: one CSV row every IVL seconds (the first one before any load)
echo "t_s,kvsplice_rss_kib,kvsplice_fds,kvsim_rss_kib,kvsim_fds,kvsplice_conns,kvbench_runs,tokenizer_cache_bytes,index_bytes" >"$OUT/soak.csv"
: >"$OUT/kvbench.jsonl"
t0=$(date +%s)
(
	while :; do
		st=$(awk '/^VmRSS/ { s += $2 } END { print s + 0 }' "/proc/$KPID/status" 2>/dev/null)
		ws=""
		for p in "${KVSIM_PIDS[@]}"; do ws+=" /proc/$p/status"; done
		wr=$(awk '/^VmRSS/ { s += $2 } END { print s + 0 }' $ws 2>/dev/null)
		m=$(metrics kvsplice_connections_active kvsplice_tokenizer_cache_bytes kvsplice_index_bytes)
		echo "$(($(date +%s) - t0)),$st,$(fds "$KPID"),$wr,$(fds "${KVSIM_PIDS[@]}"),${m%%,*},$(wc -l <"$OUT/kvbench.jsonl"),${m#*,}" >>"$OUT/soak.csv"
		sleep "$IVL"
	done
) &
SPID=$!

# the load: kvbench runs back to back until the time is up
fail=0 run=0
echo "soak: $DUR s, $W kvsim workers (time scale $TS), kvbench C=$C, $REQ requests a run, kvsplice pid $KPID" >&2
while [ $(($(date +%s) - t0)) -lt "$DUR" ]; do
	run=$((run + 1))
	extra=()
	[ $((run % 2)) = 0 ] && extra+=(--keep-alive)
	[ $((run % 4)) -ge 2 ] && extra+=(--api chat)
	left=$((DUR - ($(date +%s) - t0)))
	"$BIN/kvbench" --url "http://127.0.0.1:$LPORT" --prefix-types 12 --concurrency "$C" --seed "$run" \
		--requests "$REQ" --time-scale "$TS" --tokenizer models/qwen3/tokenizer.json --no-warmup \
		--timeout "$((left > 60 ? left : 60))" --json --quiet --label "soak run $run" "${extra[@]}" \
		>"$BIN/run.json" 2>"$BIN/run.err" &
	LPID=$!
	wait "$LPID"
	rc=$?
	LPID=""
	if [ "$rc" = 0 ]; then
		tr -d '\n' <"$BIN/run.json" >>"$OUT/kvbench.jsonl"
		echo >>"$OUT/kvbench.jsonl"
	else
		# a run cut by the end of the soak is not a failure
		if [ $(($(date +%s) - t0)) -lt "$DUR" ]; then
			fail=$((fail + 1))
			echo "soak: kvbench run $run failed (rc $rc):" >&2
			tail -n 5 "$BIN/run.err" >&2
		fi
	fi
done
sleep "$IVL" # one more sample after the load
kill "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null
SPID=""
curl -s -m 2 "http://127.0.0.1:$APORT/metrics" >"$OUT/metrics.txt"
else
	[ -s "$OUT/soak.csv" ] || { echo "soak: no $OUT/soak.csv" >&2; exit 2; }
	fail=$(cat "$OUT/failed_runs" 2>/dev/null || echo 0)
fi
echo "$fail" >"$OUT/failed_runs"

"$PY" - "$OUT" "$WARM" "$WIN" "$fail" "$DUR" "$IVL" "$C" "$W" "$TS" <<'EOF'
import csv, json, os, statistics, sys
out, warm, win, fail, dur, ivl, conc, workers, ts = sys.argv[1], *map(int, sys.argv[2:])
rows = [r for r in csv.DictReader(open(os.path.join(out, "soak.csv"))) if r["kvsplice_rss_kib"]]
t = [int(r["t_s"]) for r in rows]
rss = [int(r["kvsplice_rss_kib"]) / 1024 for r in rows]
fd = [int(r["kvsplice_fds"]) for r in rows]
wrss = [int(r["kvsim_rss_kib"]) / 1024 for r in rows]
wfd = [int(r["kvsim_fds"]) for r in rows]
end = t[-1]
def window(vals, lo, hi):
    return [v for ti, v in zip(t, vals) if lo <= ti < hi] or [vals[-1]]
early = (warm, warm + win)
late = (max(warm + win, end - win), end + 1)
def slope(lo):  # least squares, MiB per 10 minutes, over t >= lo
    xs = [ti for ti in t if ti >= lo]; ys = [v for ti, v in zip(t, rss) if ti >= lo]
    if len(xs) < 3: return 0.0
    mx, my = statistics.mean(xs), statistics.mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 600 if den else 0.0
def cache(win):
    v = [int(r["tokenizer_cache_bytes"]) / 1048576 for r in rows
         if win[0] <= int(r["t_s"]) < win[1] and r.get("tokenizer_cache_bytes")]
    return "%.1f" % statistics.mean(v) if v else "-"
e_rss, l_rss = statistics.mean(window(rss, *early)), statistics.mean(window(rss, *late))
e_fd, l_fd = max(window(fd, *early)), max(window(fd, *late))
e_wrss, l_wrss = statistics.mean(window(wrss, *early)), statistics.mean(window(wrss, *late))
sl = slope(end / 2)
runs = [json.loads(l) for l in open(os.path.join(out, "kvbench.jsonl")) if l.strip()]
reqs = sum(r.get("requests", 0) for r in runs)
errs = sum(r.get("errors", 0) for r in runs)
grow = l_rss - e_rss
flat_rss = grow <= max(0.03 * e_rss, 4.0)
flat_fd = l_fd - e_fd <= 8
flat_slope = sl < 1.0
ok = flat_rss and flat_fd and flat_slope and fail == 0
verdict = "flat at the end" if flat_rss and flat_fd and flat_slope else "NOT flat"
lines = [
    "soak: %d s, %d kvsim workers (time scale %d), kvbench C=%d: %d runs, %d requests, %d errors, %d failed runs"
    % (end, workers, ts, conc, len(runs), reqs, errs, fail),
    "| | after warm-up (%d-%d s) | last window (%d-%d s) | change |" % (early[0], early[1], late[0], end),
    "|---|---|---|---|",
    "| kvsplice RSS, MiB (mean) | %.1f | %.1f | %+.1f (%+.1f %%) |" % (e_rss, l_rss, grow, 100 * grow / e_rss),
    "| kvsplice open fds (max) | %d | %d | %+d |" % (e_fd, l_fd, l_fd - e_fd),
    "| kvsim RSS, MiB (mean, all workers) | %.1f | %.1f | %+.1f |" % (e_wrss, l_wrss, l_wrss - e_wrss),
    "| kvsim open fds (max, all workers) | %d | %d | %+d |" % (max(window(wfd, *early)), max(window(wfd, *late)), max(window(wfd, *late)) - max(window(wfd, *early))),
    "kvsplice RSS: start %.1f MiB, peak %.1f MiB, end %.1f MiB; slope over the last half %+.2f MiB / 10 min"
    % (rss[0], max(rss), rss[-1], sl),
    "kvsplice tokenizer cache: %s MiB after warm-up, %s MiB at the end (bounded by --tokenizer-cache)"
    % (cache(early), cache(late)),
    "verdict: %s (RSS growth <= max(3 %%, 4 MiB): %s; fds +<= 8: %s; slope < 1 MiB / 10 min: %s)"
    % (verdict, flat_rss, flat_fd, flat_slope),
]
print("\n".join(lines))
open(os.path.join(out, "verdict.txt"), "w").write("\n".join(lines) + "\n")
json.dump({"seconds": end, "runs": len(runs), "requests": reqs, "errors": errs, "failed_runs": fail,
           "rss_mib_early": e_rss, "rss_mib_late": l_rss, "rss_slope_mib_per_10min": sl,
           "fds_early": e_fd, "fds_late": l_fd, "kvsim_rss_mib_early": e_wrss,
           "kvsim_rss_mib_late": l_wrss, "flat": verdict == "flat at the end"},
          open(os.path.join(out, "summary.json"), "w"), indent=1)
sys.exit(0 if ok else 1)
EOF
rc=$?

# the plot: RSS (left axis) and descriptors (right axis) against minutes
if command -v gnuplot >/dev/null; then
	gnuplot <<EOF && echo "soak: plot $OUT/soak.png" >&2
set terminal pngcairo size 1000,700 font ",10"
set output "$OUT/soak.png"
set datafile separator ","
set key autotitle columnhead center right opaque box
set multiplot layout 2,1 title "kvsplice soak: $W kvsim workers, kvbench C=$C, time scale $TS"
set grid
set ylabel "RSS, MiB"
set xlabel "minutes"
set yrange [0:*]
set arrow from $WARM/60.0, graph 0 to $WARM/60.0, graph 1 nohead dt 2
plot "$OUT/soak.csv" using (\$1/60):(\$2/1024) with lines lw 2 title "kvsplice RSS", \
     "" using (\$1/60):(\$4/1024) with lines lw 1 title "kvsim RSS (all workers)", \
     "" using (\$1/60):(\$8/1048576) with lines lw 1 dt 3 title "kvsplice tokenizer cache (--tokenizer-cache)", \
     "" using (\$1/60):(\$9/1048576) with lines lw 1 dt 4 title "kvsplice index"
set ylabel "open descriptors"
plot "$OUT/soak.csv" using (\$1/60):3 with lines lw 2 title "kvsplice fds", \
     "" using (\$1/60):5 with lines lw 1 title "kvsim fds (all workers)", \
     "" using (\$1/60):6 with steps lw 1 title "kvsplice client connections"
unset multiplot
EOF
else
	"$PY" - "$OUT" <<'EOF'
import csv, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "soak.csv"))))
t = [int(r["t_s"]) / 60 for r in rows]
def poly(ys, color, top, h):
    m = max(ys) or 1
    pts = " ".join("%.1f,%.1f" % (60 + 880 * x / (t[-1] or 1), top + h - h * y / m) for x, y in zip(t, ys))
    return '<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (color, pts), m
a, ma = poly([int(r["kvsplice_rss_kib"]) / 1024 for r in rows], "blue", 40, 260)
b, mb = poly([int(r["kvsplice_fds"]) for r in rows], "red", 360, 260)
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="680">', a, b,
       '<text x="60" y="30">kvsplice RSS (max %.1f MiB) over %.0f min</text>' % (ma, t[-1]),
       '<text x="60" y="350">kvsplice open fds (max %d)</text>' % mb, '</svg>']
open(os.path.join(out, "soak.svg"), "w").write("\n".join(svg))
print("soak: plot %s/soak.svg" % out, file=sys.stderr)
EOF
fi
exit $rc
