# SPDX-License-Identifier: Apache-2.0
"""An independent decoder of kvsim's KV events (Debian's python3-zmq and python3-msgpack), used by
test_kvsim.sh. Decodes both vLLM encodings (array and map) as a vLLM consumer would, and checks
them against the prompt that was sent and against kvsim's /debug/cache.

usage: kvevents_check.py sub ENDPOINT TOPIC FORMAT INTHASH URL PROMPT_IDS_JSON
       kvevents_check.py replay ENDPOINT START
       kvevents_check.py keys ENDPOINT FORMAT URL ADAPTER   (kvsim --lora-modules ADAPTER=...)
Prints TAP lines."""
import json
import sys
import time
import urllib.error
import urllib.request

import msgpack
import zmq

FAILED = 0


def ok(cond, what):
    global FAILED
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        FAILED += 1


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def decode_event(ev):
    """Either form to (type, fields dict)."""
    if isinstance(ev, dict):
        return ev["type"], ev
    names = {"BlockStored": ["block_hashes", "parent_block_hash", "token_ids", "block_size",
                             "lora_id", "medium", "lora_name"],
             "BlockRemoved": ["block_hashes", "medium"],
             "AllBlocksCleared": []}[ev[0]]
    return ev[0], dict(zip(names, ev[1:]))


def decode_batch(payload):
    b = msgpack.unpackb(payload, raw=False)
    if isinstance(b, dict):
        return b["ts"], b["events"], b.get("data_parallel_rank"), "map"
    return b[0], b[1], (b[2] if len(b) > 2 else None), "array"


def wire_hash(h, inthash):
    if inthash:
        return str(h)
    return h.hex()


def sub(endpoint, topic, fmt, inthash, url, prompt_ids):
    inthash = inthash == "1"
    ctx = zmq.Context()
    s = ctx.socket(zmq.SUB)
    s.setsockopt_string(zmq.SUBSCRIBE, topic)
    s.connect(endpoint)
    time.sleep(1.0)  # slow joiner: the subscription must reach the publisher first
    ids = json.loads(prompt_ids)
    resp = post(url + "/v1/completions", {"prompt": ids, "max_tokens": 4})
    ok(resp["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "first request: no hit")
    msgs = []
    deadline = time.time() + 5
    while time.time() < deadline:
        if s.poll(200):
            msgs.append(s.recv_multipart())
        elif msgs:
            break
    ok(len(msgs) >= 1, "events received on the PUB socket")
    ok(all(len(m) == 3 for m in msgs), "every message is [topic][seq][payload]")
    ok(all(m[0].decode() == topic for m in msgs), "topic frame is '%s'" % topic)
    seqs = [int.from_bytes(m[1], "big") for m in msgs]
    ok(seqs == list(range(seqs[0], seqs[0] + len(seqs))) and seqs[0] == 0,
       "seq is u64 big-endian, from 0, consecutive: %s" % seqs[:5])
    stored_hashes, stored_tokens, parents, forms = [], [], [], set()
    for m in msgs:
        ts, events, rank, form = decode_batch(m[2])
        forms.add(form)
        ok(isinstance(ts, float) and abs(ts - time.time()) < 60 and rank == 0,
           "batch [ts float, events, rank 0]")
        for ev in events:
            forms.add("map" if isinstance(ev, dict) else "array")
            typ, f = decode_event(ev)
            if typ == "BlockStored":
                stored_hashes += f["block_hashes"]
                stored_tokens += f["token_ids"]
                parents.append(f["parent_block_hash"])
                ok(f["block_size"] == 16 and f["medium"] == "GPU" and f["lora_id"] is None,
                   "BlockStored block_size 16, medium GPU, lora_id null")
                ok(len(f["token_ids"]) == 16 * len(f["block_hashes"]),
                   "token_ids hold len(block_hashes) * block_size tokens")
                if fmt == "map":
                    ok(f.get("group_idx") == 0 and f.get("kv_cache_spec_kind") == "full_attention"
                       and len(f.get("extra_keys", [])) == len(f["block_hashes"]),
                       "map form carries extra_keys, group_idx, kv_cache_spec_kind")
    ok(forms == {fmt}, "events in %s form (got %s)" % (fmt, sorted(forms)))
    full = len(ids) // 16
    ok(len(stored_hashes) == full, "%d full prompt blocks stored (got %d)" % (full, len(stored_hashes)))
    ok(stored_tokens == ids[:full * 16], "stored token_ids are the prompt's, in order")
    if inthash:
        ok(all(isinstance(h, int) and 0 <= h < 2**64 for h in stored_hashes),
           "int block hashes are unsigned 64-bit")
        ok(any(h >= 2**63 for h in stored_hashes) or len(stored_hashes) < 8,
           "values >= 2^63 occur (decoded as unsigned)")
    else:
        ok(all(isinstance(h, bytes) and len(h) == 32 for h in stored_hashes),
           "raw block hashes are 32 bytes")
    ok(parents[0] is None, "first BlockStored has no parent")
    dbg = get(url + "/debug/cache")
    by_hash = {b["hash"] if inthash else b["hash_hex"]: b for b in dbg["blocks"]}
    ok(all(wire_hash(h, inthash) in by_hash for h in stored_hashes),
       "every stored hash is in /debug/cache")
    ok(all(by_hash[wire_hash(h, inthash)]["token_ids"] == ids[i * 16:(i + 1) * 16]
           for i, h in enumerate(stored_hashes)), "/debug/cache token_ids match the events")
    chain_ok = True
    for i, h in enumerate(stored_hashes):
        par = by_hash[wire_hash(h, inthash)]["parent" if inthash else "parent_hex"]
        want = None if i == 0 else wire_hash(stored_hashes[i - 1], inthash)
        chain_ok &= par == want
    ok(chain_ok, "/debug/cache parents form the chain")
    resp = post(url + "/v1/completions", {"prompt": ids, "max_tokens": 4})
    ok(resp["usage"]["prompt_tokens_details"]["cached_tokens"] == ((len(ids) - 1) // 16) * 16,
       "repeat hits (len-1)//16 blocks: %d" % resp["usage"]["prompt_tokens_details"]["cached_tokens"])
    # Reset: AllBlocksCleared.
    req = urllib.request.Request(url + "/reset_prefix_cache", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        ok(r.status == 200, "POST /reset_prefix_cache")
    cleared = False
    deadline = time.time() + 5
    while time.time() < deadline and not cleared:
        if s.poll(200):
            m = s.recv_multipart()
            for ev in decode_batch(m[2])[1]:
                cleared |= decode_event(ev)[0] == "AllBlocksCleared"
    ok(cleared, "reset emits AllBlocksCleared")
    ok(get(url + "/debug/cache")["cached_blocks"] == 0, "nothing cached after the reset")
    s.close(0)
    ctx.term()


def replay(endpoint, start):
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    d.connect(endpoint)
    d.send_multipart([b"", int(start).to_bytes(8, "big")])
    got = []
    end = False
    deadline = time.time() + 5
    while time.time() < deadline:
        if not d.poll(500):
            break
        m = d.recv_multipart()
        ok(len(m) == 3 and m[0] == b"", "replay frame is [empty][seq][payload]") if not got else None
        seq = int.from_bytes(m[1], "big")
        if seq == 2**64 - 1:
            end = m[2] == b""
            break
        got.append(seq)
        decode_batch(m[2])
    ok(end, "replay ends with the 0xFF..FF terminator and an empty payload")
    ok(len(got) > 0 and got[0] == int(start) and got == list(range(got[0], got[0] + len(got))),
       "replay sends every buffered batch from seq %s (got %s)" % (start, got[:5]))
    d.close(0)
    ctx.term()


def collect(s, quiet=0.3):
    """The BlockStored events received until quiet seconds pass without a message."""
    out = []
    deadline = time.time() + 5
    while time.time() < deadline:
        if not s.poll(int(quiet * 1000)):
            if out:
                break
            continue
        for ev in decode_batch(s.recv_multipart()[2])[1]:
            typ, f = decode_event(ev)
            if typ == "BlockStored":
                out.append(f)
    return out


def cached(resp):
    return resp["usage"]["prompt_tokens_details"]["cached_tokens"]


def keys(endpoint, fmt, url, adapter):
    """extra_keys, lora_name and lora_id as vLLM's block_pool publishes them, and the hits
    they predict: cache_salt keys block 0, an adapter's name keys every block."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.SUB)
    s.setsockopt_string(zmq.SUBSCRIBE, "")
    s.connect(endpoint)
    time.sleep(1.0)
    ids = list(range(2000, 2050))  # 50 tokens: 3 full blocks
    models = get(url + "/v1/models")["data"]
    base = models[0]["id"]
    card = [m for m in models if m["id"] == adapter]
    ok(len(card) == 1 and card[0]["parent"] == base and models[0]["parent"] is None and
       card[0]["root"] and card[0]["max_model_len"] is None,
       "/v1/models lists the adapter with the base model as parent")
    r = post(url + "/v1/completions", {"prompt": ids, "max_tokens": 2, "cache_salt": "tenant-a"})
    ev = collect(s)
    ok(cached(r) == 0 and ev and ev[0]["parent_block_hash"] is None and
       ev[0]["lora_name"] is None and ev[0]["lora_id"] is None, "salted request: blocks stored")
    if fmt == "map":
        ok(ev[0]["extra_keys"] == [["tenant-a"], None, None],
           "map form: block 0's extra_keys are [salt], the others null (got %s)" %
           ev[0]["extra_keys"])
    else:
        ok("extra_keys" not in ev[0], "array form: no extra_keys (older vLLM)")
    r = post(url + "/v1/completions", {"prompt": ids, "max_tokens": 2, "cache_salt": "tenant-a"})
    ok(cached(r) == 48, "the same salt hits (%d cached)" % cached(r))
    r = post(url + "/v1/completions", {"prompt": ids, "max_tokens": 2, "cache_salt": "tenant-b"})
    ok(cached(r) == 0, "another salt shares nothing")
    r = post(url + "/v1/completions", {"prompt": ids, "max_tokens": 2})
    ok(cached(r) == 0, "no salt shares nothing with the salted blocks")
    collect(s)
    r = post(url + "/v1/completions", {"model": adapter, "prompt": ids, "max_tokens": 2})
    ev = collect(s)
    ok(cached(r) == 0 and r["model"] == adapter, "adapter request: its own blocks, its name in the response")
    ok(ev and ev[0]["lora_name"] == adapter and ev[0]["lora_id"] == 1,
       "BlockStored carries lora_name and lora_id 1 (got %s, %s)" %
       (ev and ev[0]["lora_name"], ev and ev[0]["lora_id"]))
    if fmt == "map":
        ok(ev[0]["extra_keys"] == [[adapter]] * 3, "map form: every block keyed [lora_name]")
    r = post(url + "/v1/completions", {"model": adapter, "prompt": ids, "max_tokens": 2})
    ok(cached(r) == 48, "the adapter hits its own blocks (%d cached)" % cached(r))
    collect(s)
    r = post(url + "/v1/completions", {"model": adapter, "prompt": ids, "max_tokens": 2,
                                      "cache_salt": "tenant-a"})
    ev = collect(s)
    ok(cached(r) == 0, "adapter + salt shares nothing with the adapter alone")
    if fmt == "map":
        ok(ev and ev[0]["extra_keys"] == [[adapter, "tenant-a"], [adapter], [adapter]],
           "map form: block 0 keyed [lora_name, salt] (LoRA keys first, as vLLM)")
    try:
        post(url + "/v1/completions", {"model": "nope", "prompt": ids, "max_tokens": 2})
        ok(False, "an unknown model is refused")
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        ok(e.code == 404 and body["error"]["type"] == "NotFoundError" and
           body["error"]["message"] == "The model `nope` does not exist.",
           "an unknown model is vLLM's 404 NotFoundError")
    s.close(0)
    ctx.term()


if __name__ == "__main__":
    if sys.argv[1] == "sub":
        sub(*sys.argv[2:8])
    elif sys.argv[1] == "keys":
        keys(*sys.argv[2:6])
    else:
        replay(sys.argv[2], sys.argv[3])
    sys.exit(1 if FAILED else 0)
