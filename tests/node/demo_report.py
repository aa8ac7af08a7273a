#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The report of `make demo` (tests/node/demo.sh): seed-style markdown tables of every variant on
the same requests, the seeds' published numbers beside ours, and one line saying what the run
showed. Usage: demo_report.py OUT_DIR WORKERS TIME_SCALE VARIANT... (reads OUT_DIR/VARIANT.jsonl,
one kvbench --json line per point)."""
import json
import os
import shutil
import subprocess
import sys

# The seeds' published numbers, 6 workers (their run of the plain Service, and their run of
# round-robin and Dynamo). Hit rate at C=8 (and the C=16 points they
# give), cached-token ratio at C=8, TTFT p50/p99 and req/s where published.
SEEDS_HIT = {
    "service": {(2, 8): 95.0, (7, 8): 55.5, (12, 8): 32.1, (24, 8): 17.5, (24, 16): 16.7},
    "round-robin": {(2, 8): 95.0, (7, 8): 53.5, (12, 8): 29.2, (24, 8): 17.5},
    "dynamo": {(2, 8): 97.5, (7, 8): 83.0, (12, 8): 67.9, (24, 8): 43.3, (7, 16): 91.0,
               (12, 16): 82.0, (24, 16): 52.0},
}
SEEDS_RATIO = {
    "round-robin": {(2, 8): 0.814, (7, 8): 0.439, (12, 8): 0.247, (24, 8): 0.149, (24, 16): 0.148},
    "dynamo": {(2, 8): 0.835, (7, 8): 0.702, (12, 8): 0.573, (24, 8): 0.361, (24, 16): 0.431},
}
# 3 workers: the Service (random) at C=8, and Dynamo at P=24 (C=4/8/16: 29/30/28%).
SEEDS3_HIT = {
    "service": {(2, 8): 98.0, (7, 8): 59.5, (12, 8): 33.8, (24, 8): 16.9},
    "dynamo": {(24, 4): 29.0, (24, 8): 30.0, (24, 16): 28.0},
}
SEEDS_TTFT = {
    (2, 8): "Service 47/190", (7, 8): "Service 93/526", (12, 8): "Service 126/493",
    (24, 8): "Service 136/635",
    (24, 16): "Service 205/1508, 13.3 req/s; RR 199/774, 14.3; Dynamo 109/242, 17.6",
}


def seed_key(variant):
    """Which seed column a variant is compared with."""
    if variant == "service":
        return "service"
    if variant.endswith("round-robin"):
        return "round-robin"
    if variant.endswith("dynamo"):
        return "dynamo"
    return None


def load(out, variants):
    res = {}
    for v in variants:
        res[v] = {}
        path = os.path.join(out, v + ".jsonl")
        if not os.path.exists(path):
            continue
        for line in open(path):
            line = line.strip()
            if line:
                d = json.loads(line)
                res[v][(d["prefix_types"], d["concurrency"])] = d
    return res


def main():
    out, workers, ts, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    res = load(out, variants)
    # the seeds measured 6 workers, and 3 for a few points; other sizes get no seed column
    seeds_hit = SEEDS_HIT if workers == 6 else SEEDS3_HIT if workers == 3 else {}
    seeds_ratio = SEEDS_RATIO if workers == 6 else {}
    seeds_ttft = SEEDS_TTFT if workers == 6 else {}
    points = sorted({p for v in variants for p in res[v]}, key=lambda k: (k[1], k[0]))
    fmt = lambda v, f: f % v if v is not None else "-"
    print("kvsplice demo: %d kvsim workers, time scale %s (TTFT and req/s in model time); "
          "every variant ran the same seeded requests\n" % (workers, ts))
    def table(title, cell, extra=None):
        """One table: a row per point, a column per variant (cell(v, p, d)), and an optional
        last column (extra(p))."""
        print(title + "\n")
        print("| P, C | " + " | ".join(variants) + (" | seeds |" if extra else " |"))
        print("|" + "---|" * (1 + len(variants) + (1 if extra else 0)))
        for p in points:
            row = ["%d, %d" % p] + [cell(v, p, res[v].get(p)) if res[v].get(p) else "-"
                                    for v in variants]
            if extra:
                row.append(extra(p))
            print("| " + " | ".join(row) + " |")

    def seed(table_, v, p, f):
        s = table_.get(seed_key(v) or "", {}).get(p)
        return f % s if s is not None else ""

    opening = max((d.get("opening_tokens", 0) for v in variants for d in res[v].values()),
                  default=0)
    hit_def = ("cached_tokens > 0" if not opening else
               "cached_tokens > %d: the template's opening every prompt shares, cached for all, "
               "does not count" % opening)
    table("Request-level hit rate (%s); seeds' numbers in brackets" % hit_def,
          lambda v, p, d: "%.1f%%" % (100 * d["hit_rate"]) + seed(seeds_hit, v, p, " (%.1f%%)"))
    print()
    table("Cached-token ratio (max 0.857); the workers' own metrics (hits/queries deltas) after it",
          lambda v, p, d: "%.3f / %s%s" % (d["cached_token_ratio"], fmt(d.get("metrics_hit_ratio"), "%.3f"),
                                          seed(seeds_ratio, v, p, " (%.3f)")))
    print()
    table("TTFT p50/p99 ms, req/s, distinct workers per prefix, errors",
          lambda v, p, d: "%.0f/%.0f, %.1f req/s, %.2f w/pfx, %d err" % (
              d["ttft_p50_ms"], d["ttft_p99_ms"], d["req_per_s"], d["workers_per_prefix"],
              d["errors"]),
          lambda p: seeds_ttft.get(p, "-"))
    # one line: kv against the plain Service and Dynamo's cost at the hardest C=8 point
    hard = max((p for p in points if p[1] == 8), default=None)
    kv = next((v for v in variants if v.endswith("-kv")), None)
    dyn = next((v for v in variants if v == "kvsplice-dynamo"), None) or \
        next((v for v in variants if v.endswith("dynamo")), None)
    if hard and kv and res[kv].get(hard) and res["service"].get(hard):
        line = "kv: %.1f%% hits at P=%d (C=%d) vs %.1f%% for the plain Service" % (
            100 * res[kv][hard]["hit_rate"], hard[0], hard[1],
            100 * res["service"][hard]["hit_rate"])
        if dyn and res[dyn].get(hard):
            line += " and %.1f%% for Dynamo's cost (%s)" % (100 * res[dyn][hard]["hit_rate"], dyn)
        line += "; cached-token ratio %.3f of 0.857" % res[kv][hard]["cached_token_ratio"]
        errs = sum(d["errors"] for v in variants for d in res[v].values())
        line += "; %d errors in all." % errs
        print("\n" + line)
    pngs = plots(out, res, variants, points)
    if pngs:
        print("\nPlots (PNG):\n")
        for title, f in pngs:
            print("![%s](%s)" % (title, f))
    print("\nraw JSON: %s/*.jsonl; kvsplice's /metrics after each policy: %s/*.metrics" % (out, out))
    for _, f in pngs:
        print("plot: %s" % os.path.join(out, f), file=sys.stderr)


def plots(out, res, variants, points):
    """PNG plots with gnuplot (Debian's gnuplot-nox): hit rate, TTFT p99 and throughput against
    the prefix types, one line per variant, one plot per concurrency. Returns [(title, file)];
    none when gnuplot is missing."""
    if not shutil.which("gnuplot"):
        print("(gnuplot not installed: no plots)", file=sys.stderr)
        return []
    made = []
    metrics = [("hit_rate", "request hit rate (%)", 100.0), ("ttft_p99_ms", "TTFT p99 (ms)", 1.0),
               ("req_per_s", "throughput (req/s)", 1.0)]
    for c in sorted({p[1] for p in points}):
        ps = sorted(p[0] for p in points if p[1] == c)
        if len(ps) < 2:
            continue
        dat = os.path.join(out, "plot_c%d.dat" % c)
        with open(dat, "w") as f:
            f.write("# P " + " ".join("%s_%s" % (v, m) for m, _, _ in metrics for v in variants) + "\n")
            for pt in ps:
                vals = []
                for m, _, k in metrics:
                    for v in variants:
                        d = res[v].get((pt, c))
                        vals.append("%.4f" % (k * d[m]) if d else "NaN")
                f.write("%d %s\n" % (pt, " ".join(vals)))
        for mi, (m, label, _) in enumerate(metrics):
            png = "%s_c%d.png" % (m, c)
            title = "%s, C=%d" % (label, c)
            cols = ", ".join("'%s' using 1:%d with linespoints lw 2 title '%s'" % (
                dat, 2 + mi * len(variants) + vi, v) for vi, v in enumerate(variants))
            script = ("set terminal pngcairo size 900,560 font 'sans,11'\n"
                      "set output '%s'\nset title '%s'\nset xlabel 'prefix types (P)'\n"
                      "set ylabel '%s'\nset grid\nset key outside right\nset xtics (%s)\n"
                      "plot %s\n") % (os.path.join(out, png), title, label,
                                       ", ".join(str(x) for x in ps), cols)
            r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
            if r.returncode == 0:
                made.append((title, png))
            else:
                print("gnuplot: %s" % r.stderr.strip(), file=sys.stderr)
    return made


if __name__ == "__main__":
    main()
