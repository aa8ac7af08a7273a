#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/ checked offline (no cluster, no container runtime here):
#  - kustomize: deploy/ and deploy/examples/ render with `kubectl kustomize` (when kubectl is
#    installed), every resource listed exists and parses; yamllint passes on deploy/;
#  - RBAC: exactly get/list/watch on Services and discovery.k8s.io EndpointSlices, bound to the
#    ServiceAccount the DaemonSet runs as;
#  - the DaemonSet's security-relevant fields: hostNetwork, capabilities exactly BPF and NET_ADMIN
#    (SYS_ADMIN only with a comment naming the call that needs it), drop ALL, not privileged, no
#    privilege escalation, seccomp RuntimeDefault, read-only root, host mounts only the bpffs pin
#    directory, the cgroup2 root and the tokenizer root (both read-only), probes /healthz and /readyz on the admin port, a
#    preStop hook, memory request <= limit, the nvidia.com/gpu toleration, maxUnavailable 1;
#  - flags: every $(VAR) in the args comes from a ConfigMap key that exists, every flag is one
#    `kvsplice --help` lists, and kvsplice parses the args with the ConfigMap's values;
#  - the example: vLLM with --kv-events-config (endpoint and replay endpoint),
#    --enable-prompt-tokens-details, --enable-prefix-caching, Qwen3-0.6B; its Service annotated
#    with a known policy and the same events / replay ports, selecting the Deployment's pods;
#  - the Dockerfile copies paths that exist and installs the package of every library kvsplice
#    links, as tools/deps.sh does.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
build=${KVS_BUILD:-build}
tmp=$(mktemp -d /tmp/kvs-deploy.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for d in deploy deploy/examples; do
	if command -v kubectl >/dev/null; then
		check "kubectl kustomize $d/ renders" sh -c "kubectl kustomize $d/ >$tmp/$(basename "$d").yaml"
	else
		skip "kubectl kustomize $d/" "kubectl is not installed"
	fi
done
if command -v yamllint >/dev/null; then
	lint='{extends: default, rules: {line-length: {max: 120}, document-start: disable,'
	lint+=' comments: {min-spaces-from-content: 1}, braces: {max-spaces-inside: 1}}}'
	check "yamllint passes on deploy/" yamllint -s -d "$lint" deploy/
else
	skip "yamllint on deploy/" "yamllint is not installed (make deps)"
fi
help=""
[ -x "$build/kvsplice" ] && help=$("$build/kvsplice" --help 2>&1)
printf '%s' "$help" >"$tmp/help"

out=$(KVS_HELP="$tmp/help" KVS_TMP="$tmp" python3 - <<'PY'
import json, os, re, shlex, yaml

def ok(cond, what):
    print(("ok - " if cond else "not ok - ") + what)
    return cond

def load(path):
    with open(path) as fh:
        return [d for d in yaml.safe_load_all(fh) if d]

# --- kustomization: every resource exists and parses -----------------------------------------
docs = {}
for base in ("deploy", "deploy/examples"):
    k = load(base + "/kustomization.yaml")[0]
    res = k.get("resources", [])
    ok(bool(res), "%s/kustomization.yaml lists resources" % base)
    for r in res:
        p = os.path.join(base, r)
        try:
            for d in load(p):
                docs[(d["kind"], d["metadata"]["name"])] = (d, p)
            ok(True, "%s parses" % p)
        except Exception as e:  # noqa: BLE001 - any error is the finding
            ok(False, "%s exists and parses: %s" % (p, e))
rendered = os.path.join(os.environ["KVS_TMP"], "deploy.yaml")
if os.path.exists(rendered):
    kinds = sorted(d["kind"] for d in load(rendered))
    ok(kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Namespace",
                 "ServiceAccount"],
       "kustomize renders Namespace, ServiceAccount, ClusterRole/Binding, ConfigMap, DaemonSet "
       "(got %s)" % kinds)
get = lambda kind, name: docs.get((kind, name), (None, None))[0]

# --- RBAC ---------------------------------------------------------------------------------------
role = get("ClusterRole", "kvsplice")
rules = {}
for x in (role or {}).get("rules", []):
    for g in x.get("apiGroups", []):
        for r in x.get("resources", []):
            rules.setdefault((g, r), set()).update(x.get("verbs", []))
ok(rules.get(("", "services")) == {"get", "list", "watch"}, "RBAC: get/list/watch Services")
ok(rules.get(("discovery.k8s.io", "endpointslices")) == {"get", "list", "watch"},
   "RBAC: get/list/watch discovery.k8s.io EndpointSlices")
ok(set(rules) == {("", "services"), ("discovery.k8s.io", "endpointslices")} and
   not any(x.get("nonResourceURLs") or x.get("resourceNames") for x in role.get("rules", [])),
   "RBAC: nothing more (got %s)" % sorted(rules))
ok(not any(k == "Role" for k, _ in docs), "RBAC: no other Role")
crb = get("ClusterRoleBinding", "kvsplice")
sa = get("ServiceAccount", "kvsplice")
ok(bool(crb and sa) and crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                            "kind": "ClusterRole", "name": "kvsplice"} and
   crb["subjects"] == [{"kind": "ServiceAccount", "name": "kvsplice",
                        "namespace": sa["metadata"]["namespace"]}],
   "RBAC: the ClusterRole bound to the ServiceAccount, and to nothing else")
ok(("Namespace", (sa or {}).get("metadata", {}).get("namespace")) in docs,
   "the ServiceAccount's namespace is created")

# --- the DaemonSet ------------------------------------------------------------------------------
ds, ds_path = docs.get(("DaemonSet", "kvsplice"), (None, None))
if ok(ds is not None, "a DaemonSet kvsplice"):
    spec = ds["spec"]["template"]["spec"]
    c = [x for x in spec["containers"] if x["name"] == "kvsplice"][0]
    sc = c.get("securityContext", {})
    ok(spec.get("hostNetwork") is True, "DaemonSet: hostNetwork")
    ok(spec.get("serviceAccountName") == "kvsplice", "DaemonSet: runs as ServiceAccount kvsplice")
    caps = set(sc.get("capabilities", {}).get("add", []))
    src = open(ds_path).read()
    justified = re.search(r"SYS_ADMIN[^\n]*(needed|needs|required) (by|for) [a-z_]+\(", src)
    ok(caps == {"BPF", "NET_ADMIN"} or (caps == {"BPF", "NET_ADMIN", "SYS_ADMIN"} and justified),
       "DaemonSet: capabilities BPF and NET_ADMIN only (got %s)" % sorted(caps))
    ok(sc.get("capabilities", {}).get("drop") == ["ALL"], "DaemonSet: drop ALL")
    ok(sc.get("privileged") is not True, "DaemonSet: not privileged")
    ok(sc.get("allowPrivilegeEscalation") is False, "DaemonSet: allowPrivilegeEscalation false")
    ok(sc.get("readOnlyRootFilesystem") is True, "DaemonSet: read-only root filesystem")
    seccomp = (sc.get("seccompProfile") or spec.get("securityContext", {}).get("seccompProfile")
               or {}).get("type")
    ok(seccomp == "RuntimeDefault", "DaemonSet: seccomp RuntimeDefault")
    ok(not spec.get("initContainers"),
       "DaemonSet: no init container (kvsplice --node-address sets the node up and undoes it)")
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    host = {}
    for ctr in spec["containers"] + spec.get("initContainers", []):
        for m in ctr.get("volumeMounts", []):
            hp = vols.get(m["name"], {}).get("hostPath")
            if hp:
                host[hp["path"]] = (m["mountPath"], bool(m.get("readOnly")))
    ok(set(host) == {"/sys/fs/bpf/kvsplice", "/sys/fs/cgroup", "/var/lib/kvsplice/tokenizers"},
       "DaemonSet: host mounts only the bpffs pin directory, the cgroup2 root and the tokenizer "
       "root (got %s)" % sorted(host))
    args = c.get("args", [])
    argd = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    ok(host.get("/sys/fs/bpf/kvsplice", ("", True))[1] is False and
       host["/sys/fs/bpf/kvsplice"][0] == argd.get("pin-dir"),
       "DaemonSet: the pin directory mounted read-write where --pin-dir points")
    ok(host.get("/var/lib/kvsplice/tokenizers", ("", False))[1] is True and
       host["/var/lib/kvsplice/tokenizers"][0] == argd.get("tokenizer-root"),
       "DaemonSet: the tokenizer root mounted read-only where --tokenizer-root points")
    ok(host.get("/sys/fs/cgroup", ("", False))[1] is True and
       host["/sys/fs/cgroup"][0] == argd.get("cgroup"),
       "DaemonSet: the cgroup2 root mounted read-only where --cgroup points")
    ok(argd.get("node-address", "").split("/")[0] == argd.get("listen", "").rsplit(":", 1)[0]
       and "--keep-on-exit" not in args,
       "DaemonSet: --node-address is the --listen address, no --keep-on-exit (uninstall leaves "
       "nothing behind)")
    admin_port = int(argd.get("admin", ":0").rsplit(":", 1)[1])
    probe = lambda p: (c.get(p, {}).get("httpGet", {}).get("path"),
                       c.get(p, {}).get("httpGet", {}).get("port"))
    ok(probe("livenessProbe") == ("/healthz", admin_port) and
       probe("readinessProbe") == ("/readyz", admin_port),
       "DaemonSet: liveness /healthz and readiness /readyz on the admin port %d" % admin_port)
    ok(bool(c.get("lifecycle", {}).get("preStop")), "DaemonSet: a preStop hook (drain)")
    res = c.get("resources", {})
    units = {"Mi": 2 ** 20, "Gi": 2 ** 30}
    mem = lambda s: int(s[:-2]) * units[s[-2:]] if s and s[-2:] in units else None
    rq, lim = mem(res.get("requests", {}).get("memory")), mem(res.get("limits", {}).get("memory"))
    ok(rq and lim and rq <= lim, "DaemonSet: memory request and limit, request <= limit")
    ok(any(t.get("key") == "nvidia.com/gpu" and t.get("operator") == "Exists"
           for t in spec.get("tolerations", [])), "DaemonSet: tolerates nvidia.com/gpu")
    us = ds["spec"].get("updateStrategy", {})
    ok(us.get("type") == "RollingUpdate" and
       us.get("rollingUpdate", {}).get("maxUnavailable") == 1,
       "DaemonSet: rolling update, maxUnavailable 1")
    dt = int(get("ConfigMap", "kvsplice")["data"].get("drain-timeout", "0"))
    ok(spec.get("terminationGracePeriodSeconds", 30) > dt,
       "DaemonSet: the grace period outlasts the drain timeout")

    # flags: $(VAR) from ConfigMap keys that exist; substituted for the parse check
    env = {e["name"]: e for e in c.get("env", [])}
    values, bad = {}, []
    for a in args:
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a):
            ref = env.get(var, {}).get("valueFrom", {}).get("configMapKeyRef", {})
            cm = get("ConfigMap", ref.get("name", ""))
            if not cm or ref.get("key") not in cm.get("data", {}):
                bad.append(var)
            else:
                values[var] = cm["data"][ref["key"]]
    ok(not bad, "DaemonSet: every $(VAR) of the args is a key of the ConfigMap (missing: %s)" % bad)
    final = [re.sub(r"\$\(([A-Za-z_0-9]+)\)", lambda m: values.get(m.group(1), ""), a)
             for a in args]
    with open(os.path.join(os.environ["KVS_TMP"], "args"), "w") as fh:
        fh.write("\n".join(final))
    with open(os.path.join(os.environ["KVS_TMP"], "router"), "w") as fh:
        fh.write(argd.get("router", "") and values.get("KVSPLICE_ROUTER", ""))

# --- the example --------------------------------------------------------------------------------
dep, svc = get("Deployment", "qwen"), get("Service", "qwen")
if ok(dep is not None and svc is not None, "example: a Deployment and a Service qwen"):
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    words = (ctr.get("command") or []) + (ctr.get("args") or [])
    kvc = [w.split("=", 1)[1] for w in words if w.startswith("--kv-events-config=")]
    cfg = json.loads(kvc[0]) if kvc else {}
    ok(cfg.get("enable_kv_cache_events") is True and cfg.get("publisher") == "zmq" and
       cfg.get("endpoint", "").startswith("tcp://*:") and
       cfg.get("replay_endpoint", "").startswith("tcp://*:"),
       "example: --kv-events-config with a ZMQ endpoint and a replay endpoint")
    ok("--enable-prompt-tokens-details" in words and "--enable-prefix-caching" in words and
       "Qwen/Qwen3-0.6B" in words,
       "example: Qwen3-0.6B, --enable-prefix-caching, --enable-prompt-tokens-details")
    ann = svc["metadata"].get("annotations", {})
    help_text = open(os.environ["KVS_HELP"]).read()
    ok(ann.get("kvsplice.io/route") in ("kv", "dynamo", "round-robin", "random", "approx"),
       "example: the Service opts in with a known policy")
    ok(ann.get("kvsplice.io/events-port") == cfg.get("endpoint", "").rsplit(":", 1)[-1] and
       ann.get("kvsplice.io/replay-port") == cfg.get("replay_endpoint", "").rsplit(":", 1)[-1],
       "example: the Service's events / replay ports are vLLM's")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    cports = {p.get("name"): p["containerPort"] for p in ctr.get("ports", [])}
    ok(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()) and
       all(p["targetPort"] in cports or p["targetPort"] in cports.values()
           for p in svc["spec"]["ports"]),
       "example: the Service selects the pods and targets their ports")
PY
)
echo "$out"
grep -q '^not ok' <<<"$out" && TAP_FAILED=1

if [ -z "$help" ]; then
	skip "DaemonSet flags against kvsplice --help" "$build/kvsplice is not built yet"
else
	missing=$(while read -r a; do
		f=${a%%=*}
		grep -q -- "  ${f}[ ,]" "$tmp/help" || echo "$f"
	done <"$tmp/args")
	expect_eq "every DaemonSet flag is one $build/kvsplice --help lists" "" "$(echo $missing)"
	mapfile -t dsargs <"$tmp/args"
	out=$("$build/kvsplice" "${dsargs[@]}" --help 2>&1 >/dev/null | head -n 1)
	expect_eq "kvsplice parses the DaemonSet's args with the ConfigMap's values" "" "$out"
	router=$(cat "$tmp/router")
	grep -qE -- "(^|[ (,])${router}([ ,)]|\$)" "$tmp/help"
	ok $? "the ConfigMap's router ($router) is a policy kvsplice --help names"
fi
bad=""
for src in $(awk '/^COPY [^-]/ { print $2 }' deploy/Dockerfile); do
	[ -e "$src" ] || [ "$src" = "models/qwen3/" ] || bad+=" $src"
done
expect_eq "the Dockerfile copies paths that exist in the repository" "" "$bad"
grep -q 'make build/kvsplice' deploy/Dockerfile
ok $? "the Dockerfile builds build/kvsplice with the Makefile"
# the package of each library kvsplice links (the Makefile's LDLIBS), as dpkg knows it here: in
# tools/deps.sh and in the image's build stage
libs=$(sed -n 's/^LDLIBS *:= *//p' Makefile | grep -oE '\-l[a-z0-9_]+' | sed 's/^-l//' | grep -vxE 'pthread|m')
lack_deps="" lack_img=""
for l in $libs; do
	p=$(dpkg -S "/usr/lib/$(gcc -dumpmachine)/lib$l.so" 2>/dev/null | cut -d: -f1)
	[ -n "$p" ] || p="(lib$l.so: no package)"
	grep -qw -- "$p" tools/deps.sh || lack_deps+=" $p"
	grep -qw -- "$p" deploy/Dockerfile || lack_img+=" $p"
done
expect_eq "every library kvsplice links comes from a package tools/deps.sh installs" "" "$lack_deps"
expect_eq "... and the Dockerfile's build stage installs ($(echo $libs))" "" "$lack_img"
grep -q '^FROM debian:bookworm' deploy/Dockerfile
ok $? "the Dockerfile builds on Debian bookworm"
tap_done
