#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job, quick: `make demo QUICK=1`'s script (tests/node/demo.sh) on its own testbed, then
# checks on what it measured through the eBPF path, on the same seeded requests for every variant:
# the plain Service lands where random choice lands, kvsplice's dynamo policy near the client-side
# Dynamo anchor, kv above both at every point, no errors, the report printed.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
[ "$(id -u)" -eq 0 ] || { skip "quick demo" "needs root"; exit 0; }
tmp=$(mktemp -d /tmp/kvsplice-demo-test.XXXXXX)
out=$tmp/demo
trap 'rm -rf "$tmp"' EXIT

QUICK=1 DEMO_OUT="$out" KVS_TESTBED_ID=demotest bash tests/node/demo.sh >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
ok "$rc" "the quick demo ran to the end (exit $rc)" || { tail -n 30 "$tmp/stderr"; exit 1; }
check "the report has the three tables and the summary line" \
	grep -q "^kv: .* hits at P=24" "$tmp/stdout"
check "the report was written to the results directory" test -s "$out/report.md"
check "progress was shown with the time left" grep -q "about .* s left" "$tmp/stderr"

python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
res = {}
for f in os.listdir(out):
    if f.endswith(".jsonl"):
        res[f[:-6]] = {(d["prefix_types"], d["concurrency"]): d
                       for d in map(json.loads, filter(str.strip, open(os.path.join(out, f))))}
n = 0
def ok(cond, what):
    global n
    print(("ok - " if cond else "not ok - ") + what)
    n += not cond
want = ["service", "kvsplice-round-robin", "kvsplice-dynamo", "kvsplice-kv", "client-dynamo"]
ok(all(v in res and len(res[v]) == 2 for v in want), "every variant measured at both points: %s"
   % sorted(res))
for p in [(7, 8), (24, 8)]:
    h = {v: 100 * res[v][p]["hit_rate"] for v in want if p in res.get(v, {})}
    ok(len(h) == 5 and all(res[v][p]["errors"] == 0 for v in want), "P=%d: no errors" % p[0])
    if len(h) < 5:
        continue
    # the Service: kube-proxy's random choice. In the long run about 3.95 / P of requests hit at
    # 6 workers (56% at P=7); the quick run's 160 requests start from empty caches, so it lands
    # lower and spreads wide: client-side random choice over seeds 1-8 gave P=7 42.5-56.2 (mean
    # 49.9, sd 4.7) and P=24 11.2-21.2 (mean 15.9): `kvbench --spread random --requests 160
    # --concurrency 8 --time-scale 10 --seed S` on 6 workers of tools/kvsim/cluster.sh. Band:
    # that mean +- 13.
    ok(abs(h["service"] - {7: 49.9, 24: 15.9}[p[0]]) < 13,
       "P=%d: the plain Service near random choice (%.1f%%)" % (p[0], h["service"]))
    # Dynamo's cost depends on timing (loads), so two runs of the same 160 seeded requests differ:
    # client-side pairs over seeds 1-4 differed by up to 5.0 points at P=7 and 9.4 at P=24
    # (`kvbench --spread dynamo --requests 160 --seed S`, twice each). Band: 12.
    ok(abs(h["kvsplice-dynamo"] - h["client-dynamo"]) <= 12,
       "P=%d: kvsplice's dynamo policy near the client-side anchor (%.1f vs %.1f)"
       % (p[0], h["kvsplice-dynamo"], h["client-dynamo"]))
    ok(h["kvsplice-kv"] > max(h["kvsplice-dynamo"], h["service"], h["kvsplice-round-robin"]),
       "P=%d: kv above every other routing (%.1f%% vs dynamo %.1f%%, Service %.1f%%)"
       % (p[0], h["kvsplice-kv"], h["kvsplice-dynamo"], h["service"]))
ok(100 * res["kvsplice-kv"][(24, 8)]["hit_rate"] >= 80,
   "P=24, C=8: kv keeps at least 80%% of requests hitting (%.1f%%)"
   % (100 * res["kvsplice-kv"][(24, 8)]["hit_rate"]))

# The diagnosis docs/operating.md teaches, on kvsplice's own /metrics after each policy: every
# metric it names exists, kv takes nearly all the reuse the caches offered and dynamo less, and
# the workers confirm what the event-fed index predicted. Bands: in quick runs the workers
# reported 2.1% fewer cached tokens than predicted and missed 6 of 310 predicted hits (blocks
# evicted between the decision and the worker's scheduling, in full caches); an index not fed
# (events lost) predicts what the workers do not hold at all, far outside them.
import re
def counters(path):
    c = {}
    for line in open(path):
        m = re.match(r'^(kvsplice_\w+)(\{[^}]*\})? (\S+)$', line)
        if m:
            c[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return c
met = {p: counters(os.path.join(out, "kvsplice-%s.metrics" % p)) for p in ("kv", "dynamo")}
names = {k.split("{")[0] for k in met["kv"]} | {
    l.split()[2] for l in open(os.path.join(out, "kvsplice-kv.metrics")) if l.startswith("# TYPE ")}
cited = set(re.findall(r"kvsplice_[a-z0-9_]+", open("docs/operating.md").read()))
ok(cited and cited <= names, "every metric docs/operating.md names is served (missing: %s)"
   % sorted(cited - names))
def tok(p, kind):
    return met[p].get('kvsplice_route_tokens_total{kind="%s"}' % kind, 0)
for p in ("kv", "dynamo"):
    best, pred, rep = tok(p, "best_cached"), tok(p, "predicted_cached"), tok(p, "reported_cached")
    ok(best > 0 and 0 < pred <= best, "%s: the reuse offered and taken are counted (best %d, "
       "predicted %d)" % (p, best, pred))
    ok(pred > 0 and abs(rep - pred) <= 0.08 * pred, "%s: the workers confirm the prediction "
       "(reported %d of predicted %d cached tokens)" % (p, rep, pred))
    hm = met[p].get('kvsplice_route_outcomes_total{predicted="hit",reported="miss"}', 0)
    hh = met[p].get('kvsplice_route_outcomes_total{predicted="hit",reported="hit"}', 0)
    ok(hh > 0 and hm <= 0.05 * (hh + hm), "%s: predicted hits the workers missed: %d of %d"
       % (p, hm, hh + hm))
share = {p: tok(p, "predicted_cached") / max(tok(p, "best_cached"), 1) for p in met}
ok(share["kv"] >= 0.9 and share["kv"] > share["dynamo"], "kv takes more of the offered reuse "
   "than dynamo (%.3f vs %.3f of best_cached)" % (share["kv"], share["dynamo"]))
sys.exit(1 if n else 0)
EOF
