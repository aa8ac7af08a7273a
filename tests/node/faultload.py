#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Closed-loop OpenAI completions load that records how every request ended, for the fault tests
# (tests/node/test_faults.sh) and bench/faults.sh. A strict client: no retry of any kind, a
# keep-alive connection is reused as long as the server does not say "Connection: close" (so a
# proxy that closes one without saying so shows up as a failure), a hang is a failure after
# --timeout.
#   faultload.py --url http://10.96.0.50:8000 [--concurrency 6] [--keepalive 3] [--seconds 20 |
#                --stop-file F] [--stream] [--max-tokens 32] [--prefixes 6] [--timeout 20]
# --keepalive K: the first K clients keep their connection, the others open one per request.
# Prints one JSON object: totals by outcome, per worker (x-kvsim-worker), and every request as
# [start, end, outcome, worker, keepalive] (wall-clock seconds), and for a failed connect or send
# the exception's name, under "reqs".
#   faultload.py --summarize FILE --fault-at T [--worker W]
# reads such an output and prints, as one JSON object, what a fault at wall-clock time T did:
# requests, ok, failed; held (failed requests started before T and ended after it: the ones in
# flight at the fault), held_on_worker (those answered by worker W), after (failed requests that
# started at or after T), failed_outcomes (by outcome); without the per-request list. Outcomes:
#   ok           status 200 and the whole body (a stream up to "data: [DONE]")
#   cut          status 200, then the body ended early (the stream cut: a clean error)
#   http_NNN     another status
#   no_response  connected, then the connection closed or reset before any response byte
#   connect      the connect failed (refused, unreachable)
#   timeout      no byte for --timeout seconds (a hang)
import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time
from urllib.parse import urlparse

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an had they you were their one all we can her has there been if more "
         "when will would who so no time cache block model token worker prefix route node").split()


def prefix_text(i, n):
    rnd = random.Random(1000 + i)
    return "Prefix %d. " % i + " ".join(rnd.choice(WORDS) for _ in range(n))


def summarize(path, t, worker):
    d = json.load(open(path))
    failed = [r for r in d["reqs"] if r[2] != "ok"]
    held = [r for r in failed if r[0] < t <= r[1]]
    out = {"requests": d["requests"], "ok": d["ok"], "failed": d["failed"], "held": len(held),
           "held_on_worker": sum(1 for r in held if worker and r[3] == worker),
           "after": sum(1 for r in failed if r[0] >= t),
           "before": sum(1 for r in failed if r[1] < t),
           "failed_outcomes": {}}
    for r in failed:
        out["failed_outcomes"][r[2]] = out["failed_outcomes"].get(r[2], 0) + 1
    json.dump(out, sys.stdout)
    print()


def main():
    if "--summarize" in sys.argv:
        sp = argparse.ArgumentParser()
        sp.add_argument("--summarize", required=True)
        sp.add_argument("--fault-at", type=float, required=True)
        sp.add_argument("--worker")
        a = sp.parse_args()
        summarize(a.summarize, a.fault_at, a.worker)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--keepalive", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--stop-file")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prefixes", type=int, default=6)
    ap.add_argument("--prefix-words", type=int, default=160)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--model", default="Qwen/Qwen3-0.6B")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    u = urlparse(a.url)
    host, port = u.hostname, u.port or 80
    prefixes = [prefix_text(i, a.prefix_words) for i in range(a.prefixes)]
    t_end = time.time() + a.seconds
    lock = threading.Lock()
    reqs = []

    def stop():
        if a.stop_file:
            return os.path.exists(a.stop_file)
        return time.time() >= t_end

    def one(conn, rnd, keep, errs):
        body = json.dumps({"model": a.model, "max_tokens": a.max_tokens, "stream": a.stream,
                           "ignore_eos": True,
                           "prompt": rnd.choice(prefixes) + " Question %d?" % rnd.randrange(1 << 30)})
        worker, got_head = None, False
        try:
            conn.request("POST", "/v1/completions", body=body,
                         headers={"Content-Type": "application/json"})
        except (ConnectionRefusedError, OSError) as e:
            if isinstance(e, socket.timeout):
                return "timeout", None
            # the connect failed, or (keep-alive) the send hit a closed connection
            errs.append(type(e).__name__)
            return ("connect" if conn.sock is None or isinstance(e, ConnectionRefusedError)
                    else "no_response"), None
        try:
            r = conn.getresponse()
            got_head = True
            worker = r.getheader("x-kvsim-worker")
            if r.status != 200:
                r.read()
                return "http_%d" % r.status, worker
            data = b""
            while True:
                chunk = r.read(8192) if a.stream else r.read()
                if not chunk:
                    break
                data += chunk
                if not a.stream:
                    break
            if a.stream:
                return ("ok" if b"data: [DONE]" in data else "cut"), worker
            try:
                json.loads(data)
                return "ok", worker
            except ValueError:
                return "cut", worker
        except socket.timeout:
            return "timeout", worker
        except (http.client.IncompleteRead, http.client.RemoteDisconnected,
                ConnectionError, http.client.HTTPException, OSError):
            return ("cut" if got_head else "no_response"), worker

    def client(i):
        rnd = random.Random(a.seed * 7919 + i)
        keep = i < a.keepalive
        conn = None
        while not stop():
            if conn is None or not keep:
                conn = http.client.HTTPConnection(host, port, timeout=a.timeout)
            t0 = time.time()
            errs = []
            outcome, worker = one(conn, rnd, keep, errs)
            t1 = time.time()
            if outcome != "ok" or not keep:
                conn.close()
                conn = None
            with lock:
                reqs.append([round(t0, 3), round(t1, 3), outcome, worker, keep] + errs[:1])
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by, per = {}, {}
    for r in reqs:
        by[r[2]] = by.get(r[2], 0) + 1
        w = per.setdefault(r[3] or "-", {})
        w[r[2]] = w.get(r[2], 0) + 1
    out = {"requests": len(reqs), "ok": by.get("ok", 0), "failed": len(reqs) - by.get("ok", 0),
           "outcomes": by, "workers": per, "reqs": sorted(reqs)}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
