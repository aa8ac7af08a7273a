#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/replicate.sh: the seeds' whole matrix in the node testbed, through the eBPF path
# (docs/replication.md): P in {2, 7, 12, 24}, C in {4, 8, 16}, 6 and 3 workers; the plain
# Service, kvsplice round-robin, dynamo and kv, and the client-side Dynamo anchor; REPL_RUNS runs
# per point, the medians reported (kvbench --runs). Writes bench/out/replicate/w6/ and w3/
# (report.md, raw JSON, PNG plots) and docs/replication.md (the tables and plots, the seeds'
# numbers beside ours; the explanations in docs/replication.md's head are kept). Not part of `make
# test`: about two hours at the default time scale.
# Env: REPL_TIME_SCALE (4), REPL_RUNS (3), REPL_WORKERS ("6 3"; a size left out keeps its
# section of docs/replication.md as it was).
set -euo pipefail
cd "$(dirname "$0")/.."
ts=${REPL_TIME_SCALE:-4}
runs=${REPL_RUNS:-3}
out=bench/out/replicate
mkdir -p "$out"
points="2:4 7:4 12:4 24:4 2:8 7:8 12:8 24:8 2:16 7:16 12:16 24:16"
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) # the binaries' commit, at the start
for w in ${REPL_WORKERS:-6 3}; do
	echo "== replicate: $w workers" >&2
	DEMO_WORKERS=$w DEMO_POINTS="$points" DEMO_TIME_SCALE="$ts" DEMO_RUNS="$runs" \
		DEMO_OUT="$out/w$w" KVS_TESTBED_ID="repl$w" bash tests/node/demo.sh >/dev/null
done
python3 - "$out" "$ts" "$runs" "$rev" ${REPL_WORKERS:-6 3} <<'EOF'
import os, re, shutil, sys, time
out, ts, runs, rev, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
doc = "docs/replication.md"
head = text = ""
if os.path.exists(doc):  # keep the hand-written head (everything above the first measured part)
    text = open(doc).read()
    head = text.split("<!-- measured -->")[0]
os.makedirs("docs/replication", exist_ok=True)
# a size not re-run keeps its section as it was measured
kept = {}
if os.path.exists(doc) and "<!-- measured -->" in text:
    for sec in re.split(r"\n(?=## \d+ workers)", text.split("<!-- measured -->", 1)[1]):
        m = re.match(r"## (\d+) workers", sec.strip())
        if m:
            kept[m.group(1)] = sec.strip() + "\n"
day = time.strftime("%Y-%m-%d", time.gmtime())
fresh = {}
for w in workers:
    d = os.path.join(out, "w" + w)
    rep = open(os.path.join(d, "report.md")).read()
    for png in sorted(f for f in os.listdir(d) if f.endswith(".png")):
        shutil.copy(os.path.join(d, png), os.path.join("docs/replication", "w%s_%s" % (w, png)))
        rep = rep.replace("(%s)" % png, "(replication/w%s_%s)" % (w, png))
    rep = re.sub(r"raw JSON: .*", "raw JSON: `%s/*.jsonl`" % d, rep)
    fresh[w] = "## %s workers (time scale %s, medians of %s runs; binaries of %s, %s)\n\n%s" % (
        w, ts, runs, rev, day, rep)
parts = [head.rstrip() + "\n\n<!-- measured -->\n"]
for w in sorted(set(kept) | set(fresh), key=int, reverse=True):
    parts.append("\n" + fresh.get(w, kept.get(w)))
open(doc, "w").write("".join(parts))
print("wrote %s" % doc)
EOF
