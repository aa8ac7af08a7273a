#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Round trip against kvsim: 4 simulated vLLM workers (build/kvsim, each with its own engine
hash seed, event encoding and hash encoding, a small cache so that blocks get evicted) serve a
run of requests with shared prefixes; `kvevents watch` (the C events module + index) follows
their KV events. Then, per worker, the index's blocks must equal kvsim's own cache contents
(GET /debug/cache): the same engine hashes, and for every block the own hash that an independent
Python computation (python3-xxhash) gives from kvsim's token ids. A prefix query for each prompt
must give, per worker, the number of leading blocks kvsim holds. Also: kvevents joins after the
first requests (initial replay from seq 0), a prefix-cache reset (AllBlocksCleared), a kvsim
restart on the same endpoints (seq back to 0) and a removed worker.
Usage: events_kvsim.py BUILD_DIR TOKENIZER_JSON. Prints TAP lines."""
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "golden"))
sys.path.insert(0, os.path.dirname(__file__))
import kv_events_golden as g  # noqa: E402
from events_live import Kvevents, tap  # noqa: E402
from lowport import low_port  # noqa: E402
import events_live  # noqa: E402

BUILD, TOKENIZER = sys.argv[1], sys.argv[2]
CONFIGS = [  # name, format, int hashes, hash seed
    ("w0", "array", "1", "11"),
    ("w1", "map", "0", "22"),
    ("w2", "array", "0", "33"),
    ("w3", "map", "1", None),
]
PROCS = []


def start_kvsim(name, fmt, inth, seed, pub=None, rep=None, port=0):
    args = [os.path.join(BUILD, "kvsim"), "--host", "127.0.0.1", "--port", str(port),
            "--worker-id", name, "--tokenizer", TOKENIZER, "--num-blocks", "96", "--max-model-len", "1024",
            "--time-scale", "50", "--events-endpoint", pub or "tcp://127.0.0.1:*",
            "--replay-endpoint", rep or "tcp://127.0.0.1:*", "--topic", "kv",
            "--events-format", fmt, "--int-block-hashes", inth, "--log-level", "warn"]
    if seed:
        args += ["--hash-seed", seed]
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    PROCS.append(p)
    line = p.stderr.readline()
    m = re.search(r"listening on [0-9.]+:(\d+),.* events (\S+), replay (\S+)$", line.strip())
    if not m:
        raise RuntimeError("kvsim did not start: " + line)
    threading.Thread(target=lambda: p.stderr.read(), daemon=True).start()
    return p, "http://127.0.0.1:%s" % m.group(1), m.group(2), m.group(3)


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def own_map(cache):
    """engine hash (u64) -> own hash, from kvsim's blocks (token ids and parent links)."""
    blocks = {int(b["hash"]): b for b in cache["blocks"]}
    own = {}

    def of(h, depth=0):
        if h in own:
            return own[h]
        b = blocks.get(h)
        if b is None or depth > 10000:
            return None
        if b["parent"] is None:
            p = 0
        else:
            p = of(int(b["parent"]), depth + 1)
            if p is None:
                return None
        own[h] = g.own_block(p, b["token_ids"])
        return own[h]

    for h in blocks:
        of(h)
    return blocks, own


def settle(kv, urls_ids, timeout=20.0):
    """Waits until kvevents has applied every batch each kvsim published."""
    t = time.time() + timeout
    while time.time() < t:
        d = kv.cmd("dump")
        nxt = {w["id"]: w["next_seq"] for w in d["workers"]}
        if all(nxt.get(i) == get(u + "/debug/cache")["events_next_seq"] for u, i in urls_ids):
            return True
        time.sleep(0.1)
    return False


def compare(kv, url, wid, label):
    cache = get(url + "/debug/cache")
    blocks, own = own_map(cache)
    held, _ = kv.held(wid)
    got = {e: (o, t) for e, o, t in held}
    same_keys = set(got) == set(blocks)
    computable = [h for h in blocks if own.get(h) is not None]
    same_own = all(got.get(h, (None,))[0] == own[h] for h in computable)
    tap(same_keys and same_own and len(blocks) > 0,
        "%s: index = kvsim cache (%d blocks, %d own hashes recomputed from kvsim's tokens)"
        % (label, len(blocks), len(computable)) +
        ("" if same_keys else " (index %d, kvsim %d, missing %d, extra %d)" %
         (len(got), len(blocks), len(set(blocks) - set(got)), len(set(got) - set(blocks)))))
    return blocks, own


def main():
    rng = random.Random(7)
    g.SEED = 4242
    workers = []
    for name, fmt, inth, seed in CONFIGS:
        port, pub, rep = low_port(), "tcp://127.0.0.1:%d" % low_port(), \
            "tcp://127.0.0.1:%d" % low_port()
        p, url, pub, rep = start_kvsim(name, fmt, inth, seed, pub, rep, port)
        workers.append({"name": name, "p": p, "url": url, "pub": pub, "rep": rep,
                        "cfg": (name, fmt, inth, seed), "port": port})
    families = [[rng.randrange(1, 150000) for _ in range(rng.randrange(200, 500))]
                for _ in range(8)]
    prompts = []

    def run_requests(n, which):
        def one(i):
            w = which[i % len(which)]
            fam = families[rng.randrange(len(families))]
            prompt = fam + [rng.randrange(1, 150000) for _ in range(rng.randrange(20, 200))]
            prompts.append(prompt)
            post(w["url"] + "/v1/completions",
                 {"model": "Qwen/Qwen3-0.6B", "prompt": prompt, "max_tokens": 8})
        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    # requests before kvevents exists: it must catch up by replaying from seq 0
    run_requests(16, workers)
    kv = Kvevents(os.path.join(BUILD, "kvevents"),
                  ["%s=%s,%s" % (w["name"], w["pub"], w["rep"]) for w in workers])
    time.sleep(0.5)
    run_requests(80, workers)
    ids = [(w["url"], i) for i, w in enumerate(workers)]
    tap(settle(kv, ids), "kvevents applied every batch of the 4 workers")
    reps = [kv.metric("kvsplice_kv_replays_total", ['worker="%s"' % w["name"], 'result="ok"'])
            for w in workers]
    tap(all(r and r >= 1 for r in reps), "joined late: each worker replayed from seq 0 "
        "(replays %s)" % reps)
    for i, w in enumerate(workers):
        compare(kv, w["url"], i, "%s (%s form, %s hashes, hash seed %s)" %
                (w["name"], w["cfg"][1], "int" if w["cfg"][2] == "1" else "32-byte",
                 w["cfg"][3] or "random"))
    # prefix queries: depth per worker = leading blocks kvsim holds, by own hash
    owns = []
    for w in workers:
        blocks, own = own_map(get(w["url"] + "/debug/cache"))
        owns.append(set(own.values()))
    good, checked, nonzero = 0, 0, 0
    for prompt in prompts[-30:]:
        chain, p = [], 0
        for k in range(len(prompt) // g.BS):
            p = g.own_block(p, prompt[k * g.BS:(k + 1) * g.BS])
            chain.append(p)
        want = []
        for s in owns:
            d = 0
            while d < len(chain) and chain[d] in s:
                d += 1
            want.append(d)
        got = kv.cmd("query " + ",".join(map(str, prompt)))["depth"][:len(workers)]
        checked += 1
        good += got == want
        nonzero += sum(1 for d in want if d > 0)
    tap(good == checked and nonzero > 0, "prefix queries of %d prompts: per-worker depth = "
        "kvsim's cached prefix (%d/%d equal, %d non-zero depths)" % (checked, good, checked,
                                                                    nonzero))
    evicted = kv.metric("kvsplice_kv_events_total", ['worker="w0"', 'type="BlockRemoved"'])
    tap(evicted and evicted > 0, "evictions happened and were applied (w0: %s BlockRemoved)"
        % evicted)

    # prefix-cache reset on w1: AllBlocksCleared
    req = urllib.request.Request(workers[1]["url"] + "/reset_prefix_cache", data=b"",
                                 method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    settle(kv, ids)
    held, _ = kv.held(1)
    tap(held == [] and get(workers[1]["url"] + "/debug/cache")["cached_blocks"] == 0,
        "w1 prefix-cache reset: index holds nothing for w1")

    # restart w0 on the same endpoints: seq back to 0, old blocks dropped
    w0 = workers[0]
    w0["p"].terminate()
    w0["p"].wait()
    name, fmt, inth, seed = w0["cfg"]
    p, url, _, _ = start_kvsim(name, fmt, inth, seed, w0["pub"], w0["rep"], w0["port"])
    w0["p"], w0["url"] = p, url
    time.sleep(0.5)  # SUB reconnects
    run_requests(12, [w0])
    tap(settle(kv, ids), "after w0's restart kvevents follows the new process")
    compare(kv, w0["url"], 0, "w0 after restart (old blocks dropped, new ones applied)")
    rs = kv.metric("kvsplice_kv_restarts_total", ['worker="w0"'])
    tap(rs is not None and rs >= 1, "restart detected (restarts counted: %s)" % rs)

    # remove w3
    r = kv.cmd("remove w3")
    held, _ = kv.held(3)
    tap(r.get("remove") == 0 and held is None, "removed worker w3: gone")
    kv.close()
    return 1 if events_live.FAILS else 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.terminate()
                p.wait()
    sys.exit(rc)
