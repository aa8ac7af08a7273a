#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kvsplice image (`make image`, tools/image.sh) run as deploy/daemonset.yaml runs it, in the
# netns node testbed: podman runs the image's entrypoint in the node's network namespace
# (--network ns:/run/netns/kvs-node-img) with the container's securityContext read from the
# manifest (capabilities: drop ALL, add only the manifest's; no_new_privs for
# allowPrivilegeEscalation: false; --read-only; uid 0; seccomp: the runtime's default), the
# manifest's hostPath volumes bound at its mountPaths (the pin directory, the cgroup2 root
# read-only, the tokenizer root) and the manifest's args, the ConfigMap's values substituted,
# with two testbed changes: --services (the testbed's services.json) for --kubernetes, and
# --cgroup the testbed's client cgroup under the mounted cgroup2 root (the manifest attaches at
# the root, which on this machine would take every process's connects). Checks:
#  1. the container's PID 1 has exactly those capabilities, no_new_privs, a seccomp filter and a
#     read-only root; it puts the proxy address on the node and registers its listener;
#  2. a client pod's request to the ClusterIP is served through the containerised kvsplice (BPF
#     rewrote the connect, its /metrics counts the connection, getpeername shows the ClusterIP);
#  3. `podman kill -s KILL` (the whole container, keeper included): interception off, every
#     request still answered the kube-proxy way; `podman start`: routed again, the pinned links
#     taken over in place;
#  4. uninstall as the DaemonSet's preStop hook does it (run with podman exec): the container
#     exits, no program left attached at the cgroup (the ids it had are gone from the kernel),
#     the pin directory empty, the proxy address removed, the Service still served.
# When this podman's default seccomp profile allows bpf(2) only with CAP_SYS_ADMIN (containers-
# common < 0.60, Debian 12's podman 4.3), it also shows that kvsplice stays out of the way there
# (not ready, /readyz says why, the Service served), then runs with that profile plus the rule
# containers-common 0.60 and containerd add (bpf allowed with CAP_BPF), nothing else changed.
# Skipped without root, podman or the image (make image), or the testbed's helpers (make tests).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
export KVS_TESTBED_ID=${KVS_TESTBED_ID:+$KVS_TESTBED_ID-}img
source tests/node/lib.sh

if [ "$(id -u)" -ne 0 ] || ! command -v podman >/dev/null; then
	skip "the kvsplice image in the node testbed" "needs root and podman (make image installs it)"
	exit 0
fi
if [ ! -x "$KVS_ROOT/build/tests/node/kvstub" ]; then
	skip "the kvsplice image in the node testbed" "build/tests/node/kvstub is not built (make tests)"
	exit 0
fi
# podman with the options `make image` used (runtime, cgroup manager, storage driver), probed once.
mapfile -t pm_opts < <(tools/image.sh opts 2>/dev/null)
pm() { podman "${pm_opts[@]}" "$@"; }
image=$(tools/image.sh name)
if ! pm image exists "$image"; then
	skip "the kvsplice image in the node testbed" "no image $image (make image)"
	exit 0
fi
ctr=kvsplice$KVS_SFX
tmp=$(mktemp -d /tmp/kvs-image.XXXXXX)
trap 'pm rm -f -t 0 "$ctr" >/dev/null 2>&1; tests/node/down.sh >/dev/null 2>&1; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
pm rm -f -t 0 "$ctr" >/dev/null 2>&1

# --- the container as the manifest describes it ---------------------------------------------------
# spec.json: caps, args (ConfigMap values substituted), mounts {hostPath: [mountPath, readOnly]},
# the preStop command, the user.
python3 - >"$tmp/spec.json" <<'PY'
import json, re, yaml
docs = [d for f in ("deploy/daemonset.yaml", "deploy/configmap.yaml")
        for d in yaml.safe_load_all(open(f)) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
cm = [d for d in docs if d["kind"] == "ConfigMap"][0]["data"]
spec = ds["spec"]["template"]["spec"]
c = [x for x in spec["containers"] if x["name"] == "kvsplice"][0]
sc = c["securityContext"]
env = {e["name"]: cm[e["valueFrom"]["configMapKeyRef"]["key"]] for e in c.get("env", [])}
args = [re.sub(r"\$\((\w+)\)", lambda m: str(env[m.group(1)]), a) for a in c["args"]]
vols = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
mounts = {vols[m["name"]]: [m["mountPath"], bool(m.get("readOnly"))] for m in c["volumeMounts"]}
seccomp = (sc.get("seccompProfile") or spec.get("securityContext", {}).get("seccompProfile") or {})
print(json.dumps({
    "caps": sc["capabilities"]["add"], "drop": sc["capabilities"]["drop"],
    "user": sc.get("runAsUser"), "ro": sc.get("readOnlyRootFilesystem") is True,
    "nnp": sc.get("allowPrivilegeEscalation") is False, "seccomp": seccomp.get("type"),
    "args": args, "mounts": mounts, "prestop": c["lifecycle"]["preStop"]["exec"]["command"]}))
PY
ok $? "read the kvsplice container of deploy/daemonset.yaml" || exit 1
spec() { python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]
print("\n".join(map(str, v)) if isinstance(v, list) else v)' "$tmp/spec.json" "$1"; }
arg() { spec args | sed -n "s/^--$1=//p"; }
caps=$(spec caps | xargs)
admin=$(arg admin)
cg_mount=$(arg cgroup)
expect_eq "the manifest: drop ALL, uid 0, no privilege escalation, read-only root, RuntimeDefault" \
	"ALL 0 True True RuntimeDefault" "$(spec drop) $(spec user) $(spec nnp) $(spec ro) $(spec seccomp)"

export KVS_TIME_SCALE=${KVS_TIME_SCALE:-10}
check "testbed up: 2 workers, no kvsplice" tests/node/up.sh --workers 2 --no-kvsplice || exit 1
# kvsplice puts the proxy address on the node itself (--node-address), as on a real node.
ip -n "$NS_NODE" addr del "$PROXY_IP/32" dev lo
proxy_addr() { ip -n "$NS_NODE" -o addr show | grep -c " $PROXY_IP/"; }
mkdir -p "$PIN_DIR" "$tmp/tokenizers"

# The hostPath of each volume on this machine: the testbed's pin directory, the cgroup2 mount,
# an empty tokenizer root.
declare -A host_of=([/sys/fs/bpf/kvsplice]=$PIN_DIR [/sys/fs/cgroup]=$CG2_ROOT
	[/var/lib/kvsplice/tokenizers]=$tmp/tokenizers)
run_opts=(--name "$ctr" --network "ns:/run/netns/$NS_NODE" --cap-drop all)
for c in $caps; do run_opts+=(--cap-add "$c"); done
run_opts+=(--user "$(spec user)" --read-only --security-opt no-new-privileges)
while read -r hp mp ro; do
	[ -n "${host_of[$hp]:-}" ] || { ok 1 "a host path for the manifest's volume $hp"; exit 1; }
	run_opts+=(-v "${host_of[$hp]}:$mp$([ "$ro" = True ] && echo :ro)")
done < <(python3 -c 'import json, sys
for h, (m, r) in json.load(open(sys.argv[1]))["mounts"].items(): print(h, m, r)' "$tmp/spec.json")
# Not in the manifest: the testbed's services.json, read-only.
run_opts+=(-v "$RUN_DIR/services.json:/run/kvsplice/testbed/services.json:ro")
# Rlimits: podman sets RLIMIT_NOFILE 1048576 and RLIMIT_NPROC by default (a kubelet sets none);
# raising them above what conmon has needs CAP_SYS_RESOURCE, which this machine does not give
# root. 20000 files is this machine's hard limit, 32768 processes conmon's.
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
run_opts+=(--ulimit nofile=20000:20000 --ulimit "nproc=$nproc:$nproc")
kvs_args=()
while read -r a; do
	case $a in
	--kubernetes) a=--services=/run/kvsplice/testbed/services.json ;;
	--cgroup=*) a=--cgroup=$cg_mount${CG_CLIENTS#"$CG2_ROOT"} ;;
	esac
	kvs_args+=("$a")
done < <(spec args)
echo "# podman run ${run_opts[*]} $image ${kvs_args[*]}"

wait_intercepting() { # [seconds]: until the listener is registered in the pinned sockmap
	local i
	for i in $(seq $((${1:-20} * 10))); do
		kvs_intercepting && return 0
		sleep 0.1
	done
	return 1
}
ctr_state() { pm inspect --format '{{.State.Status}}' "$ctr" 2>/dev/null; }
wait_exited() { # [seconds]
	local i
	for i in $(seq $((${1:-20} * 10))); do
		[ "$(ctr_state)" != running ] && return 0
		sleep 0.1
	done
	return 1
}
admin_get() { kvs_in "$NS_NODE" curl -s -m 5 "http://$admin$1"; }
metric() { admin_get /metrics | awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'; }
svc_get() { # PATH: the HTTP status of a client pod's request to the ClusterIP
	tests/node/client.sh curl -s -m 10 -o /dev/null -w '%{http_code}' "http://$SVC_IP:$SVC_PORT$1"
}
logs() { pm logs "$ctr" 2>&1 | tail -n "${1:-20}" | sed 's/^/#   /'; }

# --- the runtime's default seccomp profile --------------------------------------------------------
profile=/usr/share/containers/seccomp.json
seccomp_opts=()
if python3 - "$profile" "$tmp/seccomp.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
caps = lambda s, k: (s.get(k) or {}).get("caps", [])
if any("bpf" in s["names"] and s["action"] == "SCMP_ACT_ALLOW" and "CAP_BPF" in caps(s, "includes")
       for s in d["syscalls"]):
    sys.exit(1)  # bpf(2) allowed with CAP_BPF: the default as it is
# containers-common 0.60's change ("seccomp: allow bpf() if CAP_BPF"), nothing else
for s in d["syscalls"]:
    if ("bpf" in s["names"] and s["action"] == "SCMP_ACT_ERRNO" and
            "CAP_SYS_ADMIN" in caps(s, "excludes")):
        s["names"].remove("bpf")
d["syscalls"] += [
    {"names": ["bpf"], "action": "SCMP_ACT_ERRNO", "args": [], "comment": "", "includes": {},
     "excludes": {"caps": ["CAP_SYS_ADMIN", "CAP_BPF"]}, "errnoRet": 1},
    {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "args": [], "comment": "",
     "includes": {"caps": ["CAP_BPF"]}, "excludes": {}}]
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
	echo "# $profile (podman $(podman --version | awk '{print $3}')):" \
		"bpf(2) allowed only with CAP_SYS_ADMIN"
	pm run -d "${run_opts[@]}" "$image" "${kvs_args[@]}" >/dev/null
	ready=""
	for _ in $(seq 100); do
		ready=$(admin_get /readyz) && [ -n "$ready" ] && break
		sleep 0.1
	done
	kvs_intercepting
	icp=$?
	what="with that default profile the containerised kvsplice stays out of the way: running,"
	what+=" not intercepting, /readyz names the seccomp profile, the Service served"
	ok $([ "$icp" -ne 0 ] && [[ $ready == "not ready: bpf(2) refused"*seccomp* ]] &&
		[ "$(ctr_state)" = running ] && [ "$(svc_get /v1/models)" = 200 ] && echo 0 || echo 1) "$what"
	echo "# /readyz: $ready"
	pm rm -f -t 0 "$ctr" >/dev/null
	expect_eq "... and leaves nothing on the node (no address, no pins)" "0 0" \
		"$(proxy_addr) $(find "$PIN_DIR" -mindepth 1 | wc -l)"
	seccomp_opts=(--security-opt "seccomp=$tmp/seccomp.json")
	echo "# from here on: that profile plus containers-common 0.60's rule, bpf(2) allowed with CAP_BPF"
fi

# --- 1. started with the manifest's securityContext -----------------------------------------------
pm run -d "${run_opts[@]}" "${seccomp_opts[@]}" "$image" "${kvs_args[@]}" >/dev/null
wait_intercepting 30
ok $? "the image's kvsplice (podman, caps: $caps) registered its listener" || { logs 30; exit 1; }
pid=$(pm inspect --format '{{.State.Pid}}' "$ctr")
want_eff=$(setpriv --bounding-set=-all$(printf ',+%s' ${caps,,}) --inh-caps=-all -- \
	grep CapEff /proc/self/status | awk '{print $2}')
expect_eq "its PID 1 has exactly those capabilities" "$want_eff" \
	"$(awk '/^CapEff/ { print $2 }' "/proc/$pid/status")"
expect_eq "... no_new_privs and a seccomp filter" "1 2" \
	"$(awk '/^NoNewPrivs/ { n = $2 } /^Seccomp:/ { s = $2 } END { print n, s }' "/proc/$pid/status")"
expect_eq "... a read-only root filesystem" ro \
	"$(awk '$5 == "/" { split($6, o, ","); print o[1] }' "/proc/$pid/mountinfo" | tail -n 1)"
expect_eq "it put the proxy address on the node" 1 "$(proxy_addr)"
expect_eq "/readyz" ready "$(admin_get /readyz)"

# --- 2. a client pod's request served through it --------------------------------------------------
r0=$(kvs_bpf_stat rewritten) a0=$(metric kvsplice_connections_accepted_total)
q0=$(metric kvsplice_requests_total)
out=$(tests/node/client.sh curl -s -m 10 -o /dev/null -w '%{http_code} %{remote_ip}:%{remote_port}' \
	-H 'Content-Type: application/json' -d '{"model": "Qwen/Qwen3-0.6B", "prompt": "The image runs", "max_tokens": 4}' \
	"http://$SVC_IP:$SVC_PORT/v1/completions")
expect_eq "POST /v1/completions to the ClusterIP from the client pod: 200, peer the ClusterIP" \
	"200 $SVC_IP:$SVC_PORT" "$out"
expect_eq "BPF rewrote that connect to the containerised kvsplice" $((r0 + 1)) "$(kvs_bpf_stat rewritten)"
expect_eq "the container's kvsplice accepted it (/metrics)" $((a0 + 1)) "$(metric kvsplice_connections_accepted_total)"
expect_eq "... and proxied the request" $((q0 + 1)) "$(metric kvsplice_requests_total)"
link=$(kvs_link_id link_connect4)
cg_progs() { # FIELD: that field of each kvs_* program attached at the client cgroup
	bpftool -j cgroup show "$CG_CLIENTS" 2>/dev/null | python3 -c 'import json, sys
try:
    progs = json.load(sys.stdin)
except ValueError:  # nothing attached: bpftool prints nothing
    progs = []
print(" ".join(str(p[sys.argv[1]]) for p in progs if p.get("name", "").startswith("kvs_")))' "$1"
}
prog_ids=$(cg_progs id)
ok $([ -n "$prog_ids" ] && echo 0 || echo 1) "its programs are attached at the client cgroup (ids $prog_ids)"

# --- 3. podman kill -s KILL: fail-open; podman start: routed again --------------------------------
p0=$(kvs_bpf_stat proxy_absent)
pm kill -s KILL "$ctr" >/dev/null
wait_exited 10
ok $? "podman kill -s KILL: the container is gone ($(ctr_state))"
kvs_intercepting
ok $((! $?)) "its listener left the sockmap with it: interception is off"
codes=""
for i in 1 2 3 4 5; do codes+="$(svc_get /v1/models) "; done
expect_eq "5 requests to the ClusterIP meanwhile: all answered" "200 200 200 200 200 " "$codes"
ok $(($(kvs_bpf_stat proxy_absent) >= p0 + 5 ? 0 : 1)) \
	"... the kube-proxy way (BPF proxy_absent $p0 -> $(kvs_bpf_stat proxy_absent))"
ok $([ -n "$(kvs_link_id link_connect4)" ] && echo 0 || echo 1) "the pinned links stay meanwhile (inert)"
pm start "$ctr" >/dev/null
wait_intercepting 30
ok $? "podman start: the listener is registered again" || logs
r0=$(kvs_bpf_stat rewritten) a0=$(metric kvsplice_connections_accepted_total)
expect_eq "a request to the ClusterIP" 200 "$(svc_get /v1/models)"
ok $([ "$(kvs_bpf_stat rewritten)" -gt "$r0" ] &&
	[ "$(metric kvsplice_connections_accepted_total)" -gt "$a0" ] && echo 0 || echo 1) \
	"... is routed through the restarted container again"
expect_eq "the restart took the pinned connect4 link over in place" "$link" "$(kvs_link_id link_connect4)"

# --- 4. uninstall: the preStop hook, then the container is removed --------------------------------
mapfile -t prestop < <(spec prestop)
pm exec "$ctr" "${prestop[@]}"
rc=$?
# The hook waits for PID 1 to exit; when it does, the kernel kills what is left in the
# container's PID namespace, the hook included (137), as it does to a kubelet's exec hook.
ok $([ "$rc" = 0 ] || [ "$rc" = 137 ] && echo 0 || echo 1) \
	"the DaemonSet's preStop hook ran in the container until its PID 1 exited (status $rc): ${prestop[*]:2}"
wait_exited 45
ok $? "the container exited ($(ctr_state), status $(pm inspect --format '{{.State.ExitCode}}' "$ctr"))"
grep -q 'unpinned' <(pm logs "$ctr" 2>&1)
ok $? "its log says the BPF state was detached and unpinned"
pm rm -f -t 0 "$ctr" >/dev/null
expect_eq "no program is attached at the client cgroup any more" "" \
	"$(bpftool cgroup show "$CG_CLIENTS" 2>/dev/null | awk 'NR > 1 { print $NF }' | xargs)"
alive=""
for id in $prog_ids; do bpftool prog show id "$id" >/dev/null 2>&1 && alive+=" $id"; done
expect_eq "the programs it had (ids $prog_ids) are gone from the kernel" "" "$alive"
expect_eq "the pin directory is empty" "" "$(ls -A "$PIN_DIR")"
expect_eq "the proxy address is off the node" 0 "$(proxy_addr)"
kvs_intercepting
ok $((! $?)) "nothing intercepts"
expect_eq "and the Service is still served (the kube-proxy way)" 200 "$(svc_get /v1/models)"
tap_done
