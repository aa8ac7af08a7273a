#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Models per Service through the real daemon (no BPF, loopback): one Service whose endpoints are
# two kvsim groups serving different models (a0, a1: Qwen/Qwen3-0.6B, a0 also the LoRA adapter
# sql-lora; b0: other/model-b), their KV events in map form. kvsplice reads each worker's
# /v1/models, and then: salted requests hit the worker holding their salted blocks (a different
# salt shares nothing), adapter requests go only to a0 and hit, each model's requests stay on its
# own workers, and a model no worker serves is counted under the fallback "model" (the worker
# answers vLLM's 404); adapters loaded and unloaded at run time are followed.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
dir=$(mktemp -d /tmp/kvs-models.XXXXXX)
kvs_pid=""
cleanup() {
	[ -n "$kvs_pid" ] && kill "$kvs_pid" 2>/dev/null && wait "$kvs_pid" 2>/dev/null
	kvsim_stop
	rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$dir/a" "$dir/b" "$dir/c"
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True # vLLM's /v1/load_lora_adapter, unload
common=(--num-blocks 256 --max-model-len 1024 --time-scale 50 --events-format map)
KVSIM_LOGDIR=$dir/a KVSIM_WITH_EVENTS=1 kvsim_start 1 "${common[@]}" --worker-id a0 \
	--enable-lora --lora-modules sql-lora=/adapters/sql || { echo "not ok - kvsim a0"; exit 1; }

KVSIM_LOGDIR=$dir/b KVSIM_WITH_EVENTS=1 kvsim_start 1 "${common[@]}" --worker-id a1 ||
	{ echo "not ok - kvsim a1"; exit 1; }
KVSIM_LOGDIR=$dir/c KVSIM_WITH_EVENTS=1 kvsim_start 1 "${common[@]}" --worker-id b0 \
	--model other/model-b || { echo "not ok - kvsim b0"; exit 1; }
IFS=, read -r -a urls <<<"$KVSIM_URLS"
IFS=, read -r -a evs <<<"$KVSIM_EVENTS"
IFS=, read -r -a reps <<<"$KVSIM_REPLAYS"
eps=""
for i in 0 1 2; do
	name=$([ $i = 2 ] && echo b0 || echo a$i)
	eps+="${eps:+,}{\"name\":\"$name\",\"ip\":\"127.0.0.1\",\"port\":${urls[$i]##*:},\"events_port\":${evs[$i]##*:},\"replay_port\":${reps[$i]##*:}}"
done
# model-b's tokenizer named by the Service (as kvsplice.io/model-tokenizers does in Kubernetes),
# under --tokenizer-root; a second entry reaching outside the root is refused
tokz="other/model-b=qwen3,evil=../../etc"
echo "{\"services\":[{\"name\":\"mix\",\"cluster_ip\":\"10.96.0.60\",\"port\":8000,\"model\":\"Qwen/Qwen3-0.6B\",\"model_tokenizers\":\"$tokz\",\"endpoints\":[$eps]}]}" \
	>"$dir/services.json"
"${KVS:-build/kvsplice}" --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 \
	--admin 127.0.0.1:0 --port-file "$dir/ports" --events --models-interval 0.2 \
	--tokenizer-root models --log-level info \
	2>"$dir/kvsplice.log" &
kvs_pid=$!
for _ in $(seq 100); do [ -s "$dir/ports" ] && break; sleep 0.05; done
read -r lport aport <"$dir/ports" 2>/dev/null
[ -n "${aport:-}" ]
ok $? "kvsplice started (admin port ${aport:-?})" || exit 1

timeout 60 $PY - "$lport" "$aport" "${urls[@]}" <<'PYEOF'
import json, sys, time, urllib.error, urllib.request

lport, aport = sys.argv[1], sys.argv[2]
wurl = dict(zip(("a0", "a1", "b0"), sys.argv[3:6]))
failed = 0


def ok(cond, what):
    global failed
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    failed += not cond


def get(path):
    return json.loads(urllib.request.urlopen("http://127.0.0.1:%s%s" % (aport, path),
                                             timeout=10).read())


def post(body):
    """(status, worker, cached_tokens) of a completion through the proxy."""
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % lport,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            j = json.loads(r.read())
            return r.status, r.headers["x-kvsim-worker"], \
                j["usage"]["prompt_tokens_details"]["cached_tokens"]
    except urllib.error.HTTPError as e:
        e.read()
        return e.code, e.headers["x-kvsim-worker"], -1


def last_route():
    return get("/debug/route")["routes"][0]


def settle():
    """Until every block the workers stored is in the index (events are asynchronous)."""
    time.sleep(0.3)


# what each worker serves, read from its /v1/models
for _ in range(100):
    ws = {w["name"]: w["models"] for w in get("/debug/workers")["workers"]}
    if all(ws.get(n) is not None for n in ("mix/a0", "mix/a1", "mix/b0")):
        break
    time.sleep(0.1)
ok(sorted(m["id"] for m in ws["mix/a0"]) == ["Qwen/Qwen3-0.6B", "sql-lora"] and
   [m["parent"] for m in ws["mix/a0"] if m["id"] == "sql-lora"] == ["Qwen/Qwen3-0.6B"] and
   [m["id"] for m in ws["mix/b0"]] == ["other/model-b"],
   "/debug/workers: the models each worker serves (its /v1/models): %s" % ws)

A, B = "Qwen/Qwen3-0.6B", "other/model-b"


def metric(name):
    m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % aport, timeout=10).read().decode()
    v = [l.split()[-1] for l in m.splitlines() if l.startswith(name + " ")]
    return float(v[0]) if v else -1


for _ in range(100):
    if metric('kvsplice_tokenizer_loads_total{result="ok"}') == 1:
        break
    time.sleep(0.1)
ok(metric('kvsplice_tokenizer_loads_total{result="ok"}') == 1 and
   metric('kvsplice_tokenizer_loads_total{result="refused"}') == 1,
   "the Service's model tokenizer loaded off the loop (ok 1), the one outside the root refused")
st, w, c = post({"model": B, "prompt": "a text prompt read with model-b's own tokenizer",
                 "max_tokens": 2})
r = last_route()
ok(st == 200 and w == "b0" and r["fallback"] is None and r["prompt_tokens"] > 0,
   "model-b's text prompt: tokenized exactly with its loaded tokenizer (fallback %s)" %
   r["fallback"])
ids = list(range(5000, 5200))  # 200 tokens: 12 full blocks

# cache_salt: exact; the second salted request goes where the first one's blocks are, and hits
s1, w1, c1 = post({"model": A, "prompt": ids, "max_tokens": 2, "cache_salt": "tenant-a"})
settle()
s2, w2, c2 = post({"model": A, "prompt": ids, "max_tokens": 2, "cache_salt": "tenant-a"})
r = last_route()
ok(s1 == s2 == 200 and w1 == w2 and w1 in ("a0", "a1") and c1 == 0 and c2 == 192,
   "salted: the second request goes to the same worker (%s, %s) and hits %d tokens" %
   (w1, w2, c2))
ok(r["fallback"] is None and r["view"] == "events" and r["predicted_cached_tokens"] == 192,
   "salted: routed exactly, 192 cached tokens predicted (fallback %s, predicted %s)" %
   (r["fallback"], r["predicted_cached_tokens"]))
s3, w3, c3 = post({"model": A, "prompt": ids, "max_tokens": 2, "cache_salt": "tenant-b"})
r = last_route()
ok(s3 == 200 and c3 == 0 and r["predicted_cached_tokens"] == 0 and w3 != "b0",
   "another salt shares nothing: none predicted, none cached (%s, %d)" % (w3, c3))

# LoRA: only a0 serves sql-lora; on the chain rooted at its name
lora = [post({"model": "sql-lora", "prompt": ids[:100] + [7, i], "max_tokens": 2})
        for i in range(4)]
settle()
again = post({"model": "sql-lora", "prompt": ids[:100] + [7, 0], "max_tokens": 2})
ok(all(x[0] == 200 and x[1] == "a0" for x in lora + [again]),
   "sql-lora: every request on a0, the worker serving it: %s" % [x[1] for x in lora + [again]])
ok(again[2] == 96 and last_route()["predicted_cached_tokens"] == 96,
   "sql-lora: a repeat hits its adapter's blocks (96 cached, %s predicted)" %
   last_route()["predicted_cached_tokens"])

# two models behind one Service: each on its own workers
wa = [post({"model": A, "prompt": [9000 + 50 * i + j for j in range(40)], "max_tokens": 2})[1]
      for i in range(12)]
wb = [post({"model": B, "prompt": [9000 + 50 * i + j for j in range(40)], "max_tokens": 2})[1]
      for i in range(6)]
ok(set(wa) <= {"a0", "a1"} and len(set(wa)) == 2 and set(wb) == {"b0"},
   "two models, one Service: %s only on a0/a1 %s, %s only on b0 %s" % (A, wa, B, wb))

# a model no worker serves: routed as fallbacks are, counted under "model"
st, w, _ = post({"model": "nope/none", "prompt": ids[:20], "max_tokens": 2})
r = last_route()
m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % aport, timeout=10).read().decode()
n = [l for l in m.splitlines() if l.startswith('kvsplice_route_fallbacks_total{cause="model"}')]
ok(st == 404 and r["fallback"] == "model" and n and float(n[0].split()[-1]) == 1,
   "unknown model: the worker's 404, fallback 'model' counted once (%s, %s)" % (st, n))
ok(all(('kvsplice_worker_models{worker="mix/%s"} %d' % (k, v)) in m
       for k, v in (("a0", 2), ("a1", 1), ("b0", 1))),
   "kvsplice_worker_models per worker: 2, 1, 1")


# adapters loaded and unloaded at run time: seen at the next /v1/models read (--models-interval)
def lora_update(w, what, body):
    req = urllib.request.Request(wurl[w] + "/v1/%s_lora_adapter" % what,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=10).status


def listed(w, model):
    ms = {x["name"]: x["models"] for x in get("/debug/workers")["workers"]}["mix/" + w] or []
    return any(x["id"] == model for x in ms)


t0 = time.time()
ok(lora_update("a1", "load", {"lora_name": "new-lora", "lora_path": "/adapters/new"}) == 200,
   "a1: new-lora loaded at run time (vLLM's /v1/load_lora_adapter)")
while not listed("a1", "new-lora") and time.time() - t0 < 5:
    time.sleep(0.02)
seen_ms = (time.time() - t0) * 1000
print("# new-lora in kvsplice's view of a1 after %.0f ms (--models-interval 0.2)" % seen_ms)
nl = [post({"model": "new-lora", "prompt": [11000 + 40 * i + j for j in range(40)],
            "max_tokens": 2}) for i in range(4)]
ok(listed("a1", "new-lora") and all(x[0] == 200 and x[1] == "a1" for x in nl),
   "new-lora: seen within %.0f ms, its requests all on a1: %s" % (seen_ms, [x[1] for x in nl]))
ok(lora_update("a0", "unload", {"lora_name": "sql-lora"}) == 200, "a0: sql-lora unloaded")
t0 = time.time()
while listed("a0", "sql-lora") and time.time() - t0 < 5:
    time.sleep(0.02)
st, w, _ = post({"model": "sql-lora", "prompt": ids[:40], "max_tokens": 2})
m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % aport, timeout=10).read().decode()
n = [l for l in m.splitlines() if l.startswith('kvsplice_route_fallbacks_total{cause="model"}')]
ok(st == 404 and last_route()["fallback"] == "model" and float(n[0].split()[-1]) == 2,
   "sql-lora served nowhere any more: fallback 'model' (%s, %s)" % (st, n))
sys.exit(1 if failed else 0)
PYEOF
ok $? "the model checks ran to the end"
kill "$kvs_pid" && wait "$kvs_pid"
ok $? "kvsplice exits cleanly"
kvs_pid=""
tap_done
