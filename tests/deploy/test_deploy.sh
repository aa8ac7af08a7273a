#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/ checked statically (no cluster, no container runtime here): every YAML document parses,
# the objects and fields the design requires are there (DaemonSet with hostNetwork, exactly the
# capabilities BPF NET_ADMIN SYS_ADMIN SYS_RESOURCE, host bpffs and cgroup2 mounts; read-only
# RBAC on Services and EndpointSlices; a ConfigMap whose services.json is valid), the DaemonSet's
# flags are ones build/kvsplice --help lists (when built), and the Dockerfile builds what exists.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
flags=$(mktemp /tmp/kvs-deploy-flags.XXXXXX)
trap 'rm -f "$flags"' EXIT
export KVS_DEPLOY_FLAGS=$flags

out=$(python3 - <<'PY'
import json, os, sys, yaml

def ok(cond, what):
    print(("ok - " if cond else "not ok - ") + what)

docs = {}
for f in ("deploy/rbac.yaml", "deploy/configmap.yaml", "deploy/daemonset.yaml"):
    try:
        with open(f) as fh:
            for d in yaml.safe_load_all(fh):
                if d:
                    docs[(d["kind"], d["metadata"]["name"])] = d
        ok(True, "%s parses as YAML" % f)
    except Exception as e:  # noqa: BLE001 - any parse error is the finding
        ok(False, "%s parses as YAML: %s" % (f, e))

ds = docs.get(("DaemonSet", "kvsplice"))
ok(ds is not None, "a DaemonSet kvsplice")
if ds:
    spec = ds["spec"]["template"]["spec"]
    ok(spec.get("hostNetwork") is True, "DaemonSet: hostNetwork")
    c = [x for x in spec["containers"] if x["name"] == "kvsplice"][0]
    caps = set(c["securityContext"]["capabilities"]["add"])
    ok(caps == {"BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"},
       "DaemonSet: capabilities BPF NET_ADMIN SYS_ADMIN SYS_RESOURCE (got %s)" % sorted(caps))
    ok(not c["securityContext"].get("privileged", False), "DaemonSet: not privileged")
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    ok(vols.get(mounts.get("/sys/fs/bpf"), {}).get("hostPath", {}).get("path") == "/sys/fs/bpf",
       "DaemonSet: host bpffs mounted at /sys/fs/bpf")
    ok(vols.get(mounts.get("/sys/fs/cgroup"), {}).get("hostPath", {}).get("path") == "/sys/fs/cgroup",
       "DaemonSet: host cgroup2 root mounted")
    ok(spec.get("serviceAccountName") == "kvsplice", "DaemonSet: runs as ServiceAccount kvsplice")
    cm = vols.get(mounts.get("/etc/kvsplice"), {}).get("configMap", {}).get("name")
    ok(("ConfigMap", str(cm)) in docs, "DaemonSet: mounts the ConfigMap it names")
    args = c["args"]
    ok(any(a.startswith("--services=/etc/kvsplice/") for a in args), "DaemonSet: --services from the ConfigMap")
    with open(os.environ["KVS_DEPLOY_FLAGS"], "w") as fh:
        fh.write("\n".join(a.split("=")[0] for a in args if a.startswith("--")))

role = docs.get(("ClusterRole", "kvsplice"))
rules = {(g, r): set(x["verbs"]) for x in (role or {}).get("rules", [])
         for g in x["apiGroups"] for r in x["resources"]}
ok(rules.get(("", "services")) == {"get", "list", "watch"}, "RBAC: get/list/watch Services")
ok(rules.get(("discovery.k8s.io", "endpointslices")) == {"get", "list", "watch"},
   "RBAC: get/list/watch discovery.k8s.io EndpointSlices")
ok(len(rules) == 2, "RBAC: nothing more")
crb = docs.get(("ClusterRoleBinding", "kvsplice"))
ok(bool(crb) and crb["roleRef"]["name"] == "kvsplice" and
   crb["subjects"][0]["name"] == "kvsplice", "RBAC: bound to the ServiceAccount")

cm = docs.get(("ConfigMap", "kvsplice"))
try:
    svc = json.loads(cm["data"]["services.json"])
    good = all(s["cluster_ip"] and s["port"] and s["endpoints"] for s in svc["services"])
except Exception:  # noqa: BLE001
    good = False
ok(good, "ConfigMap: services.json is valid and lists Services with endpoints")
PY
)
echo "$out"
[ -z "$(grep '^not ok' <<<"$out")" ] || TAP_FAILED=1

if [ -x build/kvsplice ]; then
	help=$(build/kvsplice --help 2>&1)
	missing=$(while read -r f; do grep -q -- "$f" <<<"$help" || echo "$f"; done <"$flags")
	expect_eq "every DaemonSet flag is one build/kvsplice --help lists" "" "$missing"
else
	skip "DaemonSet flags against build/kvsplice --help" "build/kvsplice is not built yet"
fi
bad=""
for src in $(awk '/^COPY [^-]/ { print $2 }' deploy/Dockerfile); do
	[ -e "$src" ] || [ "$src" = "models/qwen3/" ] || bad+=" $src"
done
expect_eq "the Dockerfile copies paths that exist in the repository" "" "$bad"
grep -q 'make build/kvsplice' deploy/Dockerfile
ok $? "the Dockerfile builds build/kvsplice with the Makefile"
tap_done
