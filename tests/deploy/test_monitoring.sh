#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/monitoring/ checked offline: the rules pass `promtool check rules` and their unit tests
# (`promtool test rules`: each alert fires on its problem, after its `for`, and not before, nor
# on a healthy node); every kvsplice_* series the rules and the dashboard read is one kvsplice
# exports (docs/reference/metrics.md, generated from the code's families), and the dashboard
# reads only the recorded series, `up` and the sockmap gauge; the scrape config
# (prometheus.yaml) finds the port the DaemonSet's --metrics opens.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
mon=deploy/monitoring
if ! command -v promtool >/dev/null; then
	skip "promtool checks of $mon/" "promtool is not installed (make deps: prometheus)"
	exit 0
fi
check "promtool check rules $mon/kvsplice.rules.yaml" promtool check rules "$mon/kvsplice.rules.yaml"
check "promtool test rules: every alert fires on its problem, not before its for, not on a healthy node" \
	sh -c "cd $mon && promtool test rules kvsplice.rules.test.yaml"

# The series the rules and the dashboard name, against the reference page.
check "every kvsplice_* series the rules and the dashboard read is exported" python3 - "$mon" <<'PY'
import json, re, sys
mon = sys.argv[1]
ref = open("docs/reference/metrics.md").read()
known = set(re.findall(r"^\| `(kvsplice_[a-z0-9_]+)`", ref, re.M))
rules = open(mon + "/kvsplice.rules.yaml").read()
dash = json.load(open(mon + "/dashboard.json"))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
recorded = set(re.findall(r"record: (\S+)", rules))
bad = []
for src, text in [("rules", rules)] + [("dashboard", e) for e in exprs]:
    for name in re.findall(r"\b(kvsplice_[a-z0-9_]+)", text):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if base not in known:
            bad.append("%s: %s" % (src, name))
allowed = {"up", "kvsplice_bpf_listener_registered"}  # a target's health, the sockmap gauge
for e in exprs:
    for name in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", e):
        if name not in recorded and name not in allowed:
            bad.append("dashboard: reads %s, neither a recorded series nor allowed" % name)
if not exprs:
    bad.append("dashboard: no panel queries")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
# The scrape config names the job the rules read and finds the DaemonSet's metrics port (Debian's
# promtool is built without Kubernetes discovery, so `promtool check config` cannot read it).
check "prometheus.yaml: job kvsplice keeps the DaemonSet's port named metrics, the one --metrics opens" \
	python3 - "$mon" <<'PY'
import re, sys, yaml
mon = sys.argv[1]
cfg = yaml.safe_load(open(mon + "/prometheus.yaml"))
jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
assert set(jobs) == {"kvsplice", "vllm"}, jobs.keys()
assert cfg["rule_files"] == ["kvsplice.rules.yaml"]
keep = [r for r in jobs["kvsplice"]["relabel_configs"] if r.get("action") == "keep"][0]
assert keep["regex"] == "kvsplice;metrics", keep
ds = yaml.safe_load(open("deploy/daemonset.yaml"))
c = ds["spec"]["template"]["spec"]["containers"][0]
port = [p for p in c["ports"] if p["name"] == "metrics"][0]["containerPort"]
flag = [a for a in c["args"] if a.startswith("--metrics=")]
assert flag and flag[0].endswith(":%d" % port), (flag, port)
assert ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "kvsplice"
PY
tap_done
