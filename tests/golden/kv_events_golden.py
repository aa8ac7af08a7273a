#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Independent golden vectors for kvsplice's KV-event decoder and own block hash.

Written from vLLM's KV event wire format (as tools/kvsim/kvevents.h states it) and the own-hash
definition in userspace/kv/blockhash.h, with Debian's python3-msgpack and python3-xxhash; it does not
read or reuse kvsplice's C code. Usage:
  kv_events_golden.py gen DIR        writes DIR/NNN_*.msgpack payloads and DIR/expected.json
  kv_events_golden.py check DIR PRE  reads `kvevents decode` output of every payload on stdin and
                                     of the payloads before the AllBlocksCleared one in file PRE;
                                     prints TAP lines
"""
import json
import os
import struct
import sys

import msgpack
import xxhash

SEED = 4242
BS = 16
MASK = (1 << 64) - 1


# ---- own hash (blockhash.h) -----------------------------------------------------------------
def own_block(parent, toks, extra=b""):
    data = struct.pack("<Q", parent) + struct.pack("<%dI" % len(toks), *toks) + extra
    return xxhash.xxh3_64_intdigest(data, seed=SEED) or 1


def root_of(lora_name, lora_id):
    if lora_name:
        return xxhash.xxh3_64_intdigest(b"lora-name:" + lora_name.encode(), seed=SEED) or 1
    if lora_id is not None:
        return xxhash.xxh3_64_intdigest(b"lora-id:%d" % lora_id, seed=SEED) or 1
    return 0


# ---- wire encodings ---------------------------------------------------------------------------
def enc_hash(v, how):
    """v: the engine's 64-bit value. uint: as is; sint: as a signed int (old engines);
    bytes16/bytes32: a raw digest whose last 8 bytes, big-endian, are v."""
    if how == "uint":
        return v
    if how == "sint":
        return v - (1 << 64) if v >= 1 << 63 else v
    n = 16 if how == "bytes16" else 32
    return bytes((i * 37 + 11) & 0xFF for i in range(n - 8)) + v.to_bytes(8, "big")


STORED_FIELDS = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                 "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
                 "kv_cache_spec_sliding_window"]


def ev_stored(form, how, hashes, parent, toks, medium="GPU", lora_name=None, lora_id=None,
              extra_keys=None, trailing=None, unknown=None, group_idx=None, kind=None):
    vals = {"block_hashes": [enc_hash(h, how) for h in hashes],
            "parent_block_hash": None if parent is None else enc_hash(parent, how),
            "token_ids": toks, "block_size": BS, "lora_id": lora_id, "medium": medium,
            "lora_name": lora_name, "extra_keys": extra_keys, "group_idx": group_idx,
            "kv_cache_spec_kind": kind, "kv_cache_spec_sliding_window": None}
    if form == "array":
        # older vLLM: ["BlockStored", fields in order...]; trailing defaulted fields omitted
        n = trailing if trailing is not None else 7
        if unknown is not None:
            n = len(STORED_FIELDS)  # an unknown element can only follow every known one
        arr = ["BlockStored"] + [vals[f] for f in STORED_FIELDS[:n]]
        if unknown is not None:
            arr += [unknown]
        return arr
    m = {"type": "BlockStored"}
    for f in STORED_FIELDS[:(trailing if trailing is not None else 11)]:
        m[f] = vals[f]
    if unknown is not None:
        m["some_future_field"] = unknown
    return m


def ev_removed(form, how, hashes, medium="GPU"):
    if form == "array":
        return ["BlockRemoved", [enc_hash(h, how) for h in hashes], medium]
    return {"type": "BlockRemoved", "block_hashes": [enc_hash(h, how) for h in hashes],
            "medium": medium, "group_idx": 0}


def ev_cleared(form):
    return ["AllBlocksCleared"] if form == "array" else {"type": "AllBlocksCleared"}


def batch(events, shape, ts=1764000000.25):
    if shape == "array":
        return msgpack.packb([ts, events, 0], use_bin_type=True)
    if shape == "array-norank":
        return msgpack.packb([ts, events], use_bin_type=True)
    return msgpack.packb({"ts": ts, "events": events, "data_parallel_rank": None},
                         use_bin_type=True)


def tokens(seed, nblocks):
    return [(seed * 7919 + i * 104729) % 151643 for i in range(nblocks * BS)]


# ---- the scenario: one worker's stream, with the state it must leave ------------------------
class Model:
    """What a faithful consumer must hold: engine hash -> (own hash, tiers)."""

    def __init__(self):
        self.held = {}

    def stored(self, hashes, parent, toks, lora_name=None, lora_id=None, tier=1, extras=None):
        if parent is not None:
            if parent not in self.held:
                return  # orphan: dropped
            p = self.held[parent][0]
        else:
            p = root_of(lora_name, lora_id)
        for i, h in enumerate(hashes):
            ex = b""
            if extras and extras[i] is not None:
                keep = [k for k in extras[i] if k != lora_name]
                if keep:
                    ex = msgpack.packb(keep, use_bin_type=True)
            p = own_block(p, toks[i * BS:(i + 1) * BS], ex)
            if h in self.held and self.held[h][0] == p:
                self.held[h] = (p, self.held[h][1] | tier)
            else:
                self.held[h] = (p, tier)

    def removed(self, hashes, tier=1):
        for h in hashes:
            if h in self.held and self.held[h][1] & tier:
                own, t = self.held[h]
                t &= ~tier
                if t:
                    self.held[h] = (own, t)
                else:
                    del self.held[h]

    def cleared(self):
        self.held.clear()


def gen(outdir):
    os.makedirs(outdir, exist_ok=True)
    files, expected = [], []
    m = Model()
    n = [0]

    def emit(name, payload, exp_events):
        path = os.path.join(outdir, "%03d_%s.msgpack" % (n[0], name))
        n[0] += 1
        with open(path, "wb") as f:
            f.write(payload)
        files.append(path)
        expected.append(exp_events)

    def exp_stored(hashes, parent, toks, medium="gpu", lora_name=None, lora_id=None,
                   extra_blocks=0):
        return {"type": "BlockStored", "hashes": [h & MASK for h in hashes],
                "parent": None if parent is None else parent & MASK, "token_ids": toks,
                "block_size": BS, "lora_name": lora_name, "lora_id": lora_id, "medium": medium,
                "extra_blocks": extra_blocks}

    big = (1 << 64) - 12345  # >= 2^63: must decode as unsigned
    for form in ("array", "map"):
        for how in ("uint", "sint", "bytes16", "bytes32"):
            for shape in ("array", "array-norank", "map"):
                base = (len(files) * 2654435761 & 0xFFFF) << 32
                hs = [base + 1, big - base, base + 3]
                t = tokens(len(files) + 1, 3)
                # block 0..1 in one event, block 2 chained by parent in the next batch
                emit("%s_%s_%s_a" % (form, how, shape),
                     batch([ev_stored(form, how, hs[:2], None, t[:2 * BS])], shape),
                     [exp_stored(hs[:2], None, t[:2 * BS])])
                m.stored(hs[:2], None, t[:2 * BS])
                emit("%s_%s_%s_b" % (form, how, shape),
                     batch([ev_stored(form, how, hs[2:], hs[1], t[2 * BS:], medium="CPU"),
                            ev_stored(form, how, hs[2:], hs[1], t[2 * BS:])], shape),
                     [exp_stored(hs[2:], hs[1], t[2 * BS:], medium="cpu"),
                      exp_stored(hs[2:], hs[1], t[2 * BS:])])
                m.stored(hs[2:], hs[1], t[2 * BS:], tier=2)
                m.stored(hs[2:], hs[1], t[2 * BS:], tier=1)
        # trailing fields omitted (block_hashes..block_size only), unknown trailing/extra
        # fields, LoRA by name and by deprecated id, extra keys, other event types
        t = tokens(900 + len(files), 2)
        h1 = [0x1111000000000000 + len(files), 0x2222000000000000 + len(files)]
        emit(form + "_minimal", batch([ev_stored(form, "uint", h1, None, t, trailing=4)],
                                      "array"), [exp_stored(h1, None, t)])
        m.stored(h1, None, t)
        h2 = [h + 7 for h in h1]
        emit(form + "_lora_unknown", batch([ev_stored(form, "uint", h2, None, t,
                                                      lora_name="sql-lora", lora_id=3,
                                                      unknown={"x": [1, 2]}),
                                            {"type": "KVCacheMoved", "x": 1}
                                            if form == "map" else ["KVCacheMoved", 1]],
                                           "map"),
             [exp_stored(h2, None, t, lora_name="sql-lora", lora_id=3)])
        m.stored(h2, None, t, lora_name="sql-lora", lora_id=3)
        h3 = [h + 9 for h in h1]
        emit(form + "_lora_id_only", batch([ev_stored(form, "uint", h3, None, t, lora_id=5)],
                                           "array"),
             [exp_stored(h3, None, t, lora_id=5)])
        m.stored(h3, None, t, lora_id=5)
        h4 = [h + 11 for h in h1]
        extras = [["sql-lora", "mm-aa55", 7], None]
        emit(form + "_extra_keys",
             batch([ev_stored(form, "uint", h4, None, t, lora_name="sql-lora",
                              extra_keys=extras, trailing=11, group_idx=0,
                              kind="full_attention")], "array"),
             [exp_stored(h4, None, t, lora_name="sql-lora", extra_blocks=1)])
        m.stored(h4, None, t, lora_name="sql-lora", extras=extras)
        h5 = [h + 13 for h in h1]
        emit(form + "_lora_in_extra_only",
             batch([ev_stored(form, "uint", h5, None, t, lora_name="sql-lora",
                              extra_keys=[["sql-lora"], ["sql-lora"]], trailing=8)], "array"),
             [exp_stored(h5, None, t, lora_name="sql-lora", extra_blocks=0)])
        m.stored(h5, None, t, lora_name="sql-lora", extras=[["sql-lora"], ["sql-lora"]])
        # removal of one block, in the other encoding than it was stored with
        emit(form + "_removed", batch([ev_removed(form, "bytes32", [h1[1]])], "array"),
             [{"type": "BlockRemoved", "hashes": [h1[1]], "medium": "gpu"}])
        m.removed([h1[1]])
        # orphan: parent never stored
        h6 = [0x3333000000000000 + len(files)]
        emit(form + "_orphan", batch([ev_stored(form, "uint", h6, 0x4444, tokens(5, 1))],
                                     "array"), [exp_stored(h6, 0x4444, tokens(5, 1))])
        m.stored(h6, 0x4444, tokens(5, 1))
    # malformed payloads: skipped, counted, nothing else disturbed
    emit("bad_not_msgpack", b"\xc1\xc1\xc1", "error")
    emit("bad_truncated", batch([ev_cleared("array")], "array")[:-3], "error")
    emit("bad_events_not_array", msgpack.packb([1.0, 5, 0]), "error")
    emit("bad_huge_array_header", b"\x93\xcb" + b"\0" * 8 + b"\xdd\xff\xff\xff\xff", "error")
    emit("bad_event_inside", batch([["BlockStored", [1], None, [1, 2], 16], 42,
                                    ["BlockRemoved", [1.5]]], "array"), [])
    before_clear = sorted([[e, o, t] for e, (o, t) in m.held.items()])
    n_before_clear = len(files)
    # a second stream section: AllBlocksCleared then a fresh block
    t = tokens(777, 1)
    emit("cleared", batch([ev_cleared("map"), ev_stored("map", "uint", [77], None, t)], "map"),
         [{"type": "AllBlocksCleared", "hashes": []}, exp_stored([77], None, t)])
    m.cleared()
    m.stored([77], None, t)
    # ... and more after, in the array form, chained to 77
    t2 = tokens(778, 2)
    emit("after_clear", batch([ev_stored("array", "sint", [78, big], 77, t2)], "array"),
         [exp_stored([78, big], 77, t2)])
    m.stored([78, big], 77, t2)
    exp = {"seed": SEED, "files": files, "events": expected, "before_clear": before_clear,
           "n_before_clear": n_before_clear,
           "index": sorted([[e, o, t] for e, (o, t) in m.held.items()])}
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(exp, f)
    print("\n".join(files))


def check(outdir, prefix_out):
    exp = json.load(open(os.path.join(outdir, "expected.json")))
    pre = [json.loads(l) for l in open(prefix_out) if l.strip()][-1]
    lines = [json.loads(l) for l in sys.stdin if l.strip()]
    final = lines[-1]
    by_file = {}
    for l in lines[:-1]:
        by_file.setdefault(l["file"], []).append(l)
    fails = 0

    def tap(ok, what):
        nonlocal fails
        print(("ok - " if ok else "not ok - ") + what)
        fails += 0 if ok else 1

    for path, want in zip(exp["files"], exp["events"]):
        got = by_file.get(path, [])
        name = os.path.basename(path)
        if want == "error":
            tap(len(got) == 1 and got[0].get("error") == "bad batch",
                "%s: refused as a bad batch" % name)
            continue
        keys = ("type", "hashes", "parent", "token_ids", "block_size", "lora_name", "lora_id",
                "medium", "extra_blocks")
        g2 = [{k: e[k] for k in keys if k in e} for e in got]
        w2 = [{k: e[k] for k in keys if k in e} for e in want]
        tap(g2 == w2, "%s: decodes to the expected %d event(s)" % (name, len(want)) +
            ("" if g2 == w2 else " (got %s, want %s)" % (json.dumps(g2)[:400],
                                                          json.dumps(w2)[:400])))
    gi = sorted(final["index"])
    tap(gi == exp["index"], "index after the stream: %d blocks, engine hash -> own hash and "
        "tiers equal the independent model" % len(exp["index"]) +
        ("" if gi == exp["index"] else " (got %s, want %s)" % (gi[:5], exp["index"][:5])))
    pi = sorted(pre["index"])
    tap(pi == exp["before_clear"], "index before AllBlocksCleared: %d blocks (both forms, every "
        "hash encoding, tiers, LoRA, extra keys) equal the independent model"
        % len(exp["before_clear"]) +
        ("" if pi == exp["before_clear"] else " (got %d: %s, want %d: %s)" %
         (len(pi), pi[:3], len(exp["before_clear"]), exp["before_clear"][:3])))
    c = final["counts"]
    tap(c["bad_batches"] == 4, "4 bad batches counted (got %d)" % c["bad_batches"])
    tap(c["bad_events"] == 3, "3 bad events counted (got %d)" % c["bad_events"])
    tap(c["unknown_events"] == 2, "2 unknown event types counted (got %d)" % c["unknown_events"])
    tap(final["stats"]["orphans"] == 2, "2 orphan blocks counted (got %d)"
        % final["stats"]["orphans"])
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
