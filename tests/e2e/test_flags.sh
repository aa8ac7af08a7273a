#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The daemon's flags against what it runs with. kvsplice --help prints each default from the
# option table's defaults function (daemon/config.c) and --print-config the configuration the
# flags make; this checks that every default --help prints is the value --print-config shows,
# that --print-config's output parses back to itself, and then, on a running kvsplice (no BPF,
# loopback), that /debug/daemon shows that configuration and that the limits the modules report
# on /metrics (admin, scrape, KV events, Services) are the ones --help prints: first with every
# default, then with every one of those flags set to another value.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
PY=/usr/bin/python3
bin=${KVS:-build/kvsplice}
dir=$(mktemp -d /tmp/kvs-flags.XXXXXX)
kvs_pid=""
cleanup() {
	[ -n "$kvs_pid" ] && kill "$kvs_pid" 2>/dev/null && wait "$kvs_pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

"$bin" --help >"$dir/help" 2>&1
ok $? "kvsplice --help exits 0" || exit 1
"$bin" --print-config >"$dir/config"
ok $? "kvsplice --print-config exits 0" || exit 1

# every "(default X)" of --help is the value --print-config shows for that flag
$PY - "$dir/help" "$dir/config" <<'EOF'
import re, shlex, sys
help_text, config = open(sys.argv[1]).read(), open(sys.argv[2]).read()
opts, cur = {}, None
for line in help_text.splitlines():
    m = re.match(r"^  --([a-z0-9-]+)(?: (\S+))?\s*(.*)$", line)
    if m:
        cur = m.group(1)
        opts[cur] = m.group(3)
    elif cur and line.startswith(" " * 30):
        opts[cur] += " " + line.strip()
    else:
        cur = None
shown = {}
for line in config.splitlines():
    w = shlex.split(line)
    shown.setdefault(w[0][2:], []).append(w[1] if len(w) > 1 else None)
bad, n = [], 0
for name, text in opts.items():
    m = re.search(r"\(default ([^:)][^)]*|\(\)|\"\")\)$", text)
    if not m:
        continue
    n += 1
    want = m.group(1).replace('""', "")
    got = ",".join(shown.get(name, ["<absent>"]))
    if got != want:
        bad.append("--%s: --help says %r, --print-config %r" % (name, want, got))
print("\n".join("# " + b for b in bad))
print("# %d defaults compared" % n)
sys.exit(1 if bad or n < 40 else 0)
EOF
ok $? "every default --help prints is the value the parsed configuration holds"

# --print-config parses back to itself (the same flags, the same values)
eval "args=($(tr '\n' ' ' <"$dir/config"))"
"$bin" "${args[@]}" --print-config >"$dir/config2" 2>&1
cmp -s "$dir/config" "$dir/config2"
ok $? "--print-config's output, given back as flags, prints the same configuration"
"$bin" --max-head 0 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "bad value for --max-head: 0 (≥ 1)" "$dir/err" && echo 0 || echo 1) \
	"a value out of range: exit 2, the message names the flag and its range"
"$bin" --no-such-flag >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "unknown option --no-such-flag" "$dir/err" && echo 0 || echo 1) \
	"an unknown flag: exit 2, named"

echo '{"services":[{"name":"qwen","cluster_ip":"10.96.0.50","port":8000,"endpoints":[{"name":"w0","ip":"127.0.0.1","port":9}]}]}' >"$dir/services.json"

# start ARGS...: kvsplice on loopback with ARGS; sets lport/aport
start() {
	rm -f "$dir/ports"
	"$bin" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
		--port-file "$dir/ports" --log-level warn "$@" 2>"$dir/kvsplice.log" &
	kvs_pid=$!
	for _ in $(seq 100); do [ -s "$dir/ports" ] && break; sleep 0.05; done
	read -r lport aport <"$dir/ports" 2>/dev/null
	[ -n "${aport:-}" ]
}
stop() {
	kill "$kvs_pid" 2>/dev/null && wait "$kvs_pid" 2>/dev/null
	kvs_pid=""
}

# check_live WHAT ARGS...: the running daemon's /debug/daemon config is --print-config's for the
# same flags, and each module's limit gauge on /metrics is the flag's value in that config
check_live() {
	local what=$1
	shift
	"$bin" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
		--port-file "$dir/ports" --log-level warn "$@" --print-config >"$dir/want"
	start "$@"
	ok $? "$what: kvsplice started (admin port ${aport:-?})" || return 1
	$PY - "$aport" "$dir/want" <<'EOF'
import json, re, shlex, sys, urllib.request
aport, want = sys.argv[1], open(sys.argv[2]).read().splitlines()
get = lambda p: urllib.request.urlopen("http://127.0.0.1:%s%s" % (aport, p), timeout=10).read()
dbg = json.loads(get("/debug/daemon"))
bad = []
if dbg["config"] != want:
    bad.append("/debug/daemon config differs from --print-config: %s" %
               sorted(set(dbg["config"]) ^ set(want)))
if dbg["phase"] != "serving":
    bad.append("phase %s" % dbg["phase"])
flags = {}
for line in want:
    w = shlex.split(line)
    flags[w[0][2:]] = w[1] if len(w) > 1 else ""
def size(s):
    m = re.fullmatch(r"([0-9]+)([KMG]?)", s)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]
def secs(s):
    return float(s[:-2]) / 1000 if s.endswith("ms") else float(s.rstrip("s"))
metrics = {}
for line in get("/metrics").decode().splitlines():
    if line and not line.startswith("#"):
        k, v = line.rsplit(" ", 1)
        metrics[k] = float(v)
pairs = [
    ("kvsplice_admin_limit_connections", "admin-max-conns", int),
    ("kvsplice_admin_limit_head_bytes", "admin-max-head", size),
    ("kvsplice_admin_limit_timeout_seconds", "admin-timeout", secs),
    ("kvsplice_scrape_limit_body_bytes", "scrape-max-body", size),
    ("kvsplice_scrape_limit_head_bytes", "scrape-max-head", size),
    ("kvsplice_scrape_limit_timeout_seconds", "scrape-timeout", secs),
    ("kvsplice_services_limit_bytes", "services-max-bytes", size),
    ('kvsplice_kv_queue_limit_bytes{scope="worker"}', "kv-queue-bytes", size),
    ('kvsplice_kv_queue_limit_bytes{scope="total"}', "kv-queue-total-bytes", size),
    ('kvsplice_kv_queue_limit_batches{scope="worker"}', "kv-queue-batches", int),
    ("kvsplice_kv_event_limit_bytes", "kv-event-max-bytes", size),
    ("kvsplice_kv_event_queue_limit_messages", "kv-event-queue", int),
    ("kvsplice_kv_replay_limit_timeout_seconds", "kv-replay-timeout", secs),
    ("kvsplice_approx_limit_entries", "approx-max-entries", int),
]
for series, flag, conv in pairs:
    if series not in metrics:
        bad.append("%s not served" % series)
    elif abs(metrics[series] - conv(flags[flag])) > 1e-9:
        bad.append("%s = %g, --%s %s" % (series, metrics[series], flag, flags[flag]))
print("\n".join("# " + b for b in bad))
sys.exit(1 if bad else 0)
EOF
	ok $? "$what: /debug/daemon shows the configuration, /metrics the limits it sets"
	stop
}

check_live "defaults"
check_live "every limit set" --admin-max-conns 7 --admin-max-head 3K --admin-timeout 2.5 \
	--scrape-max-body 1M --scrape-max-head 2K --scrape-timeout 750ms --services-max-bytes 1M \
	--kv-queue-bytes 5M --kv-queue-total-bytes 9M --kv-queue-batches 17 \
	--kv-event-max-bytes 2M --kv-event-queue 33 --kv-replay-timeout 4s \
	--approx-max-entries 1000
tap_done
