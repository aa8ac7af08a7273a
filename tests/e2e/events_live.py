#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Live KV-event test: Python plays vLLM workers (XPUB publisher + ROUTER replay endpoint,
written from vLLM's format with python3-zmq and python3-msgpack) against `kvevents watch` (the C
events module and index on real ZMQ sockets over 127.0.0.1). Checks, against an independent
model of what each worker holds: in-order ingest in both encodings and every hash encoding, a
dropped batch recovered through replay (with and without a delimiter frame in the answers), a
restart (seq back to 0) clearing the worker, a replay that cannot fill the gap and a worker
without replay endpoint both dropping the worker's blocks, malformed input counted and skipped,
a removed worker disappearing. Then the sync on joining: an idle worker's buffered batches loaded
with no live batch, a replay endpoint that listens only after the join or never (deadline, then
the live stream), and a resync after a restart that publishes nothing. Last the size bounds: a
message above EVENTS_DEFAULT_MAX_PAYLOAD from the publisher and from the replay endpoint (libzmq
cuts the connection: kvevents survives, counts it, reconnects, goes on), and big batches arriving
during a replay (the live queue's byte bound gives the replay up, counted; the queued bytes never
pass the bound). Prints TAP lines.
Usage: events_live.py PATH_TO_KVEVENTS
"""
import json
import os
import random
import subprocess
import sys
import threading
import time

import msgpack
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "golden"))
from lowport import LOW_MAX, LOW_MIN, low_port  # noqa: E402
import kv_events_golden as g  # noqa: E402  (the independent encoder and model)

FAILS = 0


def tap(ok, what):
    global FAILS
    print(("ok - " if ok else "not ok - ") + what, flush=True)
    FAILS += 0 if ok else 1


class Worker:
    """One simulated vLLM worker: XPUB (so we know when kvevents has subscribed) + ROUTER."""

    def __init__(self, ctx, name, replay=True, delimiter=True, listen=True):
        """listen=False: the replay port is chosen but nothing listens on it until listen()."""
        self.name, self.ctx, self.delimiter = name, ctx, delimiter
        self.pub = ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub_port = self.pub.bind_to_random_port("tcp://127.0.0.1", LOW_MIN, LOW_MAX)
        self.buffer = {}  # seq -> payload, what the replay endpoint can serve
        self.replay_from = 0  # oldest seq the replay buffer still holds
        self.seq = 0
        self.model = g.Model()
        self.stop = False
        self.replays = []
        self.rep_port = None
        self.thread = None
        if replay:
            if listen:
                self.router = ctx.socket(zmq.ROUTER)
                self.router.setsockopt(zmq.LINGER, 0)
                self.rep_port = self.router.bind_to_random_port("tcp://127.0.0.1", LOW_MIN, LOW_MAX)
                self.thread = threading.Thread(target=self.serve, daemon=True)
                self.thread.start()
            else:
                self.rep_port = low_port()  # free, nothing listens there yet

    def listen(self):
        """Binds the replay ROUTER on rep_port (retrying while a closed one still holds it)."""
        self.router = bind_retry(self.ctx, zmq.ROUTER, self.rep_port)
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def reopen(self):
        """A new worker process on the same ports: new sockets, seq 0, empty replay buffer."""
        self.stop = True
        if self.thread:
            self.thread.join()
            self.router.close()
        self.pub.close()
        self.pub = bind_retry(self.ctx, zmq.XPUB, self.pub_port)
        self.restart()
        self.replays = []
        self.listen()

    def spec(self):
        s = "%s=tcp://127.0.0.1:%d" % (self.name, self.pub_port)
        return s + (",tcp://127.0.0.1:%d" % self.rep_port if self.rep_port else "")

    def wait_subscribed(self, timeout=15.0):
        if self.pub.poll(int(timeout * 1000)):
            self.pub.recv()  # b"\x01" + topic
            return True
        return False

    def serve(self):
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        while not self.stop:
            if not poller.poll(100):
                continue
            frames = self.router.recv_multipart()
            ident, start = frames[0], int.from_bytes(frames[-1], "big")
            self.replays.append(start)
            pre = [ident, b""] if self.delimiter else [ident]
            for s in sorted(self.buffer):
                if s >= start and s >= self.replay_from:
                    self.router.send_multipart(pre + [s.to_bytes(8, "big"), self.buffer[s]])
            self.router.send_multipart(pre + [b"\xff" * 8, b""])

    def publish(self, payload, send=True, seq=None):
        s = self.seq if seq is None else seq
        self.buffer[s] = payload
        if send:
            self.pub.send_multipart([b"kv", s.to_bytes(8, "big"), payload])
        self.seq = s + 1

    def restart(self):
        self.seq = 0
        self.buffer = {}
        self.replay_from = 0
        self.model = g.Model()

    def close(self):
        self.stop = True
        self.pub.close()
        if self.thread:
            self.thread.join()
            self.router.close()


def bind_retry(ctx, kind, port, timeout=5.0):
    """A socket of kind bound on 127.0.0.1:port; libzmq releases a closed socket's port
    asynchronously, so EADDRINUSE is retried for a while."""
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    t = time.time() + timeout
    while True:
        try:
            s.bind("tcp://127.0.0.1:%d" % port)
            return s
        except zmq.ZMQError as e:
            if e.errno != zmq.EADDRINUSE or time.time() > t:
                s.close()
                raise
            time.sleep(0.02)


class Chains:
    """Sequences of blocks a worker stores, in random encodings; keeps the worker's model."""

    def __init__(self, w, rng):
        self.w, self.rng, self.next_hash = w, rng, rng.randrange(1 << 40)

    def stored_batch(self, nblocks, parent=None, lora=None, medium="GPU"):
        form = self.rng.choice(["array", "map"])
        how = self.rng.choice(["uint", "sint", "bytes16", "bytes32"])
        shape = self.rng.choice(["array", "array-norank", "map"])
        hs = []
        for _ in range(nblocks):
            self.next_hash += 1
            # spread over the whole 64-bit range, values >= 2^63 included
            hs.append((self.next_hash * 0x9E3779B97F4A7C15) & g.MASK)
        toks = [self.rng.randrange(151643) for _ in range(nblocks * g.BS)]
        ev = g.ev_stored(form, how, hs, parent, toks, medium=medium, lora_name=lora)
        self.w.model.stored(hs, parent, toks, lora_name=lora, tier=1 if medium == "GPU" else 2)
        return g.batch([ev], shape), hs

    def removed_batch(self, hashes):
        form = self.rng.choice(["array", "map"])
        how = self.rng.choice(["uint", "sint", "bytes16", "bytes32"])
        self.w.model.removed(hashes)
        return g.batch([g.ev_removed(form, how, hashes)], "array")


class Kvevents:
    def __init__(self, path, specs, replay_timeout_ms=3000, extra=()):
        self.p = subprocess.Popen([path, "watch", "--seed", str(g.SEED), "--topic", "kv",
                                   "--replay-timeout-ms", str(replay_timeout_ms), "--log-level",
                                   os.environ.get("KVEVENTS_LOG", "warn")] + list(extra) + specs,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def cmd(self, c):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        if c == "metrics":
            out = []
            for line in self.p.stdout:
                if line.startswith("# END"):
                    return "".join(out)
                out.append(line)
        return json.loads(self.p.stdout.readline())

    def held(self, wid):
        d = self.cmd("dump")
        for w in d["workers"]:
            if w["id"] == wid:
                return sorted(map(tuple, w["blocks"])), w["next_seq"]
        return None, None

    def wait_seq(self, wid, seq, timeout=15.0):
        t = time.time() + timeout
        while time.time() < t:
            blocks, nxt = self.held(wid)
            if nxt == seq:
                return True
            time.sleep(0.02)
        return False

    def wait_blocks(self, wid, want, timeout):
        """Polls the index until worker wid holds exactly want; returns (ok, seconds taken)."""
        t0 = time.time()
        while True:
            blocks, _ = self.held(wid)
            if blocks == want:
                return True, time.time() - t0
            if time.time() - t0 > timeout:
                return False, time.time() - t0
            time.sleep(0.01)

    def worker(self, name):
        """The worker's /debug/index object, or None."""
        for w in self.cmd("debug")["workers"]:
            if w["name"] == name:
                return w
        return None

    def metric(self, name, labels):
        m = self.cmd("metrics")
        for line in m.splitlines():
            if line.startswith(name + "{") and all(l in line for l in labels):
                return int(line.rsplit(" ", 1)[1])
        return None

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(timeout=5)
        except Exception:
            self.p.kill()
            self.p.wait()


def model_blocks(w):
    return sorted((e, o, t) for e, (o, t) in w.model.held.items())


def main():
    kvevents = sys.argv[1]
    rng = random.Random(20261129)
    ctx = zmq.Context()
    w1 = Worker(ctx, "w1", delimiter=True)
    w2 = Worker(ctx, "w2", replay=False)
    w3 = Worker(ctx, "w3", delimiter=False)
    kv = Kvevents(kvevents, [w1.spec(), w2.spec(), w3.spec()])
    try:
        tap(all(w.wait_subscribed() for w in (w1, w2, w3)), "kvevents subscribed to 3 workers")
        c1, c2, c3 = Chains(w1, rng), Chains(w2, rng), Chains(w3, rng)

        # 1. in-order ingest, mixed encodings, chains continued across batches, removals
        last = None
        for i in range(30):
            p, hs = c1.stored_batch(rng.randint(1, 4), parent=last if i % 5 else None,
                                    lora=None if i % 7 else "lora-a",
                                    medium="CPU" if i % 11 == 3 else "GPU")
            w1.publish(p)
            last = hs[-1]
            if i % 6 == 5:
                w1.publish(c1.removed_batch([hs[0]]))
        ok = kv.wait_seq(0, w1.seq)
        blocks, _ = kv.held(0)
        tap(ok and blocks == model_blocks(w1),
            "in-order ingest: %d batches, index equals the model (%d blocks)"
            % (w1.seq, len(model_blocks(w1))))

        # 2. gap: two batches lost on the way; the replay endpoint serves them
        # (the initial sync at the join already counted one replay: compare from here)
        ok_before = kv.metric("kvsplice_kv_replays_total", ['worker="w1"', 'result="ok"'])
        for lost in (True, True, False, False):
            p, hs = c1.stored_batch(2, parent=last)
            last = hs[-1]
            w1.publish(p, send=not lost)
        ok = kv.wait_seq(0, w1.seq)
        blocks, _ = kv.held(0)
        tap(ok and blocks == model_blocks(w1), "dropped batches recovered by replay (replay "
            "asked from seq %s): index equals the model" % w1.replays[-1:])
        tap(kv.metric("kvsplice_kv_seq_gaps_total", ['worker="w1"']) == 1 and
            kv.metric("kvsplice_kv_replays_total", ['worker="w1"', 'result="ok"']) ==
            ok_before + 1, "gap and successful replay counted")

        # same on w3, whose ROUTER answers without a delimiter frame
        last3 = None
        for i in range(6):
            p, hs = c3.stored_batch(1, parent=last3)
            last3 = hs[-1]
            w3.publish(p, send=i not in (2, 3))
        ok = kv.wait_seq(2, w3.seq)
        blocks, _ = kv.held(2)
        tap(ok and blocks == model_blocks(w3),
            "replay answers without a delimiter frame also recover the gap")

        # 3. replay that cannot fill the gap (buffer trimmed past it): blocks dropped
        p, hs = c1.stored_batch(1, parent=last)
        w1.publish(p, send=False)
        w1.replay_from = w1.seq  # the lost batch is no longer buffered
        model_before = len(model_blocks(w1))
        p, hs = c1.stored_batch(1, parent=None)
        w1.publish(p)
        w1.model = g.Model()  # the model restarts at step 4; here only the count is checked
        ok = kv.wait_seq(0, w1.seq)
        blocks, _ = kv.held(0)
        tap(ok and len(blocks) == 1 and
            kv.metric("kvsplice_kv_replays_total", ['worker="w1"', 'result="failed"']) == 1,
            "replay unable to fill the gap: the %d old blocks dropped, only the new batch kept"
            % model_before)

        # 4. restart: seq back to 0 clears the worker, then ingest goes on from 0
        w1.restart()
        c1 = Chains(w1, rng)
        last = None
        for i in range(5):
            p, hs = c1.stored_batch(2, parent=last)
            last = hs[-1]
            w1.publish(p)
        ok = kv.wait_seq(0, w1.seq)
        blocks, _ = kv.held(0)
        tap(ok and blocks == model_blocks(w1) and
            kv.metric("kvsplice_kv_restarts_total", ['worker="w1"']) == 1,
            "restart (seq back to 0): old blocks dropped, new ones equal the model")

        # 5. no replay endpoint: a gap drops the worker's blocks
        last2 = None
        for i in range(5):
            p, hs = c2.stored_batch(1, parent=last2)
            last2 = hs[-1]
            w2.publish(p)
        kv.wait_seq(1, w2.seq)
        before = len(kv.held(1)[0])
        p, hs = c2.stored_batch(1, parent=last2)
        w2.publish(p, send=False)
        p, hs = c2.stored_batch(1, parent=hs[-1])  # its parent was in the lost batch
        w2.publish(p)
        ok = kv.wait_seq(1, w2.seq)
        blocks, _ = kv.held(1)
        tap(ok and before == 5 and blocks == [],
            "gap without replay endpoint: the worker's blocks dropped, the orphan not trusted")

        # 6. malformed input: counted, skipped, the stream goes on
        w1.pub.send_multipart([b"kv", b"\x00\x01", b"x"])  # seq frame of 2 bytes
        w1.pub.send_multipart([b"kv"])  # one frame only
        w1.pub.send_multipart([b"kv", w1.seq.to_bytes(8, "big"), b"\xc1not msgpack"])
        w1.seq += 1
        w1.pub.send_multipart([b"kv", w1.seq.to_bytes(8, "big"),
                               msgpack.packb([0.0, [["BlockStored", "bad"], 7], 0])])
        w1.seq += 1
        p, hs = c1.stored_batch(1, parent=last)
        w1.publish(p)
        ok = kv.wait_seq(0, w1.seq)
        blocks, _ = kv.held(0)
        tap(ok and blocks == model_blocks(w1), "after malformed input the stream is applied")
        fr = kv.metric("kvsplice_kv_decode_errors_total", ['worker="w1"', 'what="frames"'])
        ba = kv.metric("kvsplice_kv_decode_errors_total", ['worker="w1"', 'what="batch"'])
        evs = kv.metric("kvsplice_kv_decode_errors_total", ['worker="w1"', 'what="event"'])
        tap((fr, ba, evs) == (2, 1, 2),
            "malformed input counted: frames %s, batch %s, events %s" % (fr, ba, evs))

        # 7. removed worker: its blocks disappear, its socket is closed
        r = kv.cmd("remove w3")
        d = kv.cmd("dump")
        gone = all(w["id"] != 2 for w in d["workers"])
        m = kv.cmd("metrics")
        tap(r.get("remove") == 0 and gone and 'worker="w3"' not in m,
            "removed worker: gone from the index and the metrics")
        dbg = kv.cmd("debug")
        tap(len(dbg["workers"]) == 2 and dbg["index"]["entries"] ==
            len(model_blocks(w1)) + 0, "debug JSON: 2 workers, entries = w1's blocks")
    finally:
        kv.close()
        for w in (w1, w2, w3):
            w.close()
    try:
        join_sync_tests(kvevents, ctx, rng)
        size_bound_tests(kvevents, ctx, rng)
    finally:
        ctx.term()
    return 1 if FAILS else 0


def buffer_batches(w, c, n, rng):
    """n batches (chains, one removal) into w's replay buffer only: published before anyone
    subscribed, so no live batch reaches a later subscriber."""
    last = None
    for i in range(n):
        p, hs = c.stored_batch(rng.randint(1, 3), parent=last if i % 4 else None)
        last = hs[-1]
        w.publish(p, send=False)
        if i == n // 2:
            w.publish(c.removed_batch([hs[0]]), send=False)


def join_sync_tests(kvevents, ctx, rng):
    """The sync from seq 0 on joining and on events_worker_resync (kvevents "add" / "resync")."""
    timeout_ms = 1500
    wa = Worker(ctx, "wa")
    wb = Worker(ctx, "wb", listen=False)
    wc = Worker(ctx, "wc", listen=False)
    kv = Kvevents(kvevents, [], replay_timeout_ms=timeout_ms)
    try:
        # a. an idle worker: N batches buffered, nothing published after the join
        buffer_batches(wa, Chains(wa, rng), 12, rng)
        r = kv.cmd("add " + wa.spec())
        ok, took = kv.wait_blocks(0, model_blocks(wa), 3.0)
        # the last batch's blocks land before the end marker that follows it makes the worker
        # live; under load the stand-in's thread may send that marker a moment later
        wait_until(lambda: kv.worker("wa")["state"] == "live", 1.0)
        w = kv.worker("wa")
        tap(r.get("add") == 0 and ok and took < 1.0 and wa.replays == [0] and
            w["next_seq"] == wa.seq and w["state"] == "live",
            "idle worker joined: its %d buffered batches (%d blocks) in the index after %.2f s, "
            "no live batch" % (wa.seq, len(model_blocks(wa)), took))

        # b. the replay endpoint listens only after the join, within the deadline
        buffer_batches(wb, Chains(wb, rng), 8, rng)
        r = kv.cmd("add " + wb.spec())
        time.sleep(0.5)
        w = kv.worker("wb")
        blocks, _ = kv.held(1)
        tap(r.get("add") == 0 and w["state"] == "syncing" and blocks == [],
            "replay endpoint not listening yet: the worker shows as syncing, no blocks")
        wb.listen()
        ok, took = kv.wait_blocks(1, model_blocks(wb), 3.0)
        wait_until(lambda: kv.worker("wb")["state"] == "live", 1.0)  # as in a.
        state = kv.worker("wb")["state"]
        tap(ok and took < 1.0 and wb.replays == [0] and state == "live",
            "replay endpoint listening 0.5 s after the join: the request queued at the join "
            "served, %d blocks after %.2f s more (replays asked from %s, state %s)"
            % (len(model_blocks(wb)), took, wb.replays, state))

        # b'. a replay endpoint that never listens: the deadline passes, the live stream is
        # taken; what arrived meanwhile was queued, and nothing is dropped
        buffer_batches(wc, Chains(wc, rng), 5, rng)  # unreachable
        wc.model = g.Model()  # kvevents can only know the live batches
        t0 = time.time()
        r = kv.cmd("add " + wc.spec())
        subscribed = wc.wait_subscribed()
        cc = Chains(wc, rng)
        for _ in range(2):
            p, hs = cc.stored_batch(2)  # chain roots: kept although 0..4 are unknown
            wc.publish(p)
        time.sleep(0.3)
        w = kv.worker("wc")
        early = (w["state"], w["pending"], w["blocks_gpu"] + w["blocks_cpu"])
        ok, took = kv.wait_blocks(2, model_blocks(wc), timeout_ms / 1000.0 + 2.0)
        took = time.time() - t0
        w = kv.worker("wc")
        tap(r.get("add") == 0 and subscribed and early == ("syncing", 2, 0),
            "replay endpoint never listening: live batches queued during the sync (%s, %s "
            "queued, %s blocks)" % early)
        tap(ok and timeout_ms / 1000.0 - 0.1 < took < timeout_ms / 1000.0 + 1.0 and
            w["state"] == "live" and w["next_seq"] == wc.seq and w["replays_failed"] == 1 and
            w["drops"] == 0, "after the %d ms deadline (%.2f s) the live stream is taken: %d "
            "blocks, nothing dropped" % (timeout_ms, took, len(model_blocks(wc))))

        # c. resync: wa restarts (new process, seq 0, a new replay buffer) and publishes nothing
        old = len(model_blocks(wa))
        wa.reopen()
        buffer_batches(wa, Chains(wa, rng), 6, rng)
        r = kv.cmd("resync wa")
        ok, took = kv.wait_blocks(0, model_blocks(wa), 3.0)
        w = kv.worker("wa")
        tap(r.get("resync") == 0 and ok and took < 1.0 and wa.replays == [0] and
            w["next_seq"] == wa.seq, "resync after a silent restart: the %d old blocks dropped, "
            "the new buffer's %d loaded after %.2f s" % (old, len(model_blocks(wa)), took))

        # c'. the same with an empty new buffer, then the new process's first live batch
        wa.reopen()
        r = kv.cmd("resync wa")
        ok, took = kv.wait_blocks(0, [], 3.0)
        deadline = time.time() + 3.0
        while kv.worker("wa")["state"] != "waiting" and time.time() < deadline:
            time.sleep(0.01)
        w = kv.worker("wa")
        tap(r.get("resync") == 0 and ok and wa.replays == [0] and w["state"] == "waiting",
            "resync to an empty buffer: no blocks, waiting for the first batch")
        subscribed = wa.wait_subscribed()
        p, hs = Chains(wa, rng).stored_batch(2)
        wa.publish(p)
        ok, _ = kv.wait_blocks(0, model_blocks(wa), 3.0)
        tap(subscribed and ok and kv.worker("wa")["next_seq"] == 1,
            "then its first live batch (seq 0) is applied")
        tap(kv.cmd("resync nosuch").get("resync") == -2, "resync of an unknown worker: ENOENT")
    finally:
        kv.close()
        for w in (wa, wb, wc):
            w.close()


MAX_PAYLOAD = 64 << 20  # EVENTS_DEFAULT_MAX_PAYLOAD


def wait_until(f, timeout):
    t = time.time() + timeout
    while time.time() < t:
        v = f()
        if v:
            return v
        time.sleep(0.02)
    return f()


def size_bound_tests(kvevents, ctx, rng):
    """Messages above EVENTS_DEFAULT_MAX_PAYLOAD; the live queue's byte bound during a replay."""
    # four batches of ~400 KB for the queue: the bound holds three of them, not four
    wq = Worker(ctx, "wq", listen=False)  # its replay endpoint never listens: a long sync
    cq = Chains(wq, rng)
    big = [cq.stored_batch(6000) for _ in range(4)]
    sizes = [len(p) for p, _ in big]
    bound = sum(sizes[:3]) + 1000
    wq.model = g.Model()  # rebuilt below with what kvevents can hold
    wo = Worker(ctx, "wo")
    kv = Kvevents(kvevents, [wo.spec()], replay_timeout_ms=5000,
                  extra=["--max-pending-bytes", str(bound)])
    try:
        # a. a publisher message one byte above the bound
        co = Chains(wo, rng)
        ok = wo.wait_subscribed()
        for _ in range(3):
            wo.publish(co.stored_batch(2)[0])
        ok = ok and kv.wait_seq(0, 3)
        wo.publish(b"\0" * (MAX_PAYLOAD + 1))  # kept in the replay buffer as seq 3 too
        resub = wo.wait_subscribed(timeout=5.0)
        over = wait_until(lambda: kv.metric("kvsplice_kv_dropped_total",
                                            ['worker="wo"', 'what="oversized"']) == 1, 3.0)
        w = kv.worker("wo")
        tap(ok and kv.p.poll() is None and over and w["next_seq"] == 3 and
            w["bad_batches"] == 0 and resub,
            "publisher message of EVENTS_DEFAULT_MAX_PAYLOAD + 1 bytes: not read, kvevents alive, "
            "counted as oversized, the SUB reconnected and subscribed again")

        # b. the next batch shows the gap; the replay answer holds the big message again
        wo.model = g.Model()  # the replay will fail: only batches 4 and 5 can be held
        t0 = time.time()
        wo.publish(co.stored_batch(2)[0])
        ok = wait_until(lambda: kv.worker("wo")["replays_failed"] == 1, 4.0)
        took = time.time() - t0
        w = kv.worker("wo")
        tap(ok and took < 2.0 and w.get("oversized") == 2 and w["drops"] == 1 and
            w["next_seq"] == 5 and wo.replays[-1:] == [3],
            "replay answer above the bound: counted, the replay failed after %.2f s (deadline "
            "5 s), the worker's blocks dropped, batch 4 taken live" % took)
        wo.publish(co.stored_batch(2)[0])
        ok = kv.wait_seq(0, wo.seq)
        blocks, _ = kv.held(0)
        tap(ok and blocks == model_blocks(wo),
            "the stream goes on: batches 4 and 5 in the index, equal to the model")

        # c. big batches while a sync waits: three fit the byte bound, the fourth does not
        r = kv.cmd("add " + wq.spec())
        subscribed = wq.wait_subscribed()
        peak = 0
        for i, (p, _) in enumerate(big[:3]):
            wq.publish(p)
            n = sum(sizes[:i + 1])
            ok = wait_until(lambda: kv.worker("wq").get("pending_bytes") == n, 3.0)
            peak = max(peak, kv.worker("wq").get("pending_bytes") or 0)
        w = kv.worker("wq")
        tap(r.get("add") == 0 and subscribed and ok and w["state"] == "syncing" and
            w["pending"] == 3 and w.get("pending_bytes") == sum(sizes[:3]) <= bound,
            "3 batches (%d bytes) queued during the sync, within the %d-byte bound"
            % (sum(sizes[:3]), bound))
        hs4 = big[3][1]
        wq.publish(big[3][0])
        ok = wait_until(lambda: kv.worker("wq")["state"] == "live", 3.0)
        w = kv.worker("wq")
        peak = max(peak, w.get("pending_bytes") or 0)
        blocks, _ = kv.held(1)
        held = set(b[0] for b in blocks)
        tap(ok and w.get("queue_overflows") == 1 and w.get("dropped_queued") == 3 and
            w.get("pending_bytes") == 0 and w["next_seq"] == 4 and w["drops"] == 0 and
            held == set(h & g.MASK for h in hs4) and peak <= bound,
            "the 4th (%d bytes) overflows the bound: sync given up, 3 queued batches dropped "
            "and counted, the live stream taken from it (%d blocks); queued bytes peaked at "
            "%d <= %d" % (sizes[3], len(blocks), peak, bound))
        tap(kv.metric("kvsplice_kv_queue_overflows_total",
                      ['worker="wq"', 'bound="worker_bytes"']) == 1 and
            kv.metric("kvsplice_kv_dropped_total", ['worker="wq"', 'what="queued"']) == 3 and
            kv.metric("kvsplice_kv_queued_bytes", ['worker="wq"']) == 0,
            "metrics: the overflow by bound, the dropped batches, the queued bytes")
    finally:
        kv.close()
        for w in (wo, wq):
            w.close()


if __name__ == "__main__":
    sys.exit(main())
