#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Client loads for bench/limits.sh and tests/e2e/test_limits_hostile.sh (loopback only).

  hostile  --target H:P --idle N --sources A,B,.. --slowloris S --interval X --state FILE
           Opens N idle connections (nothing sent; source addresses taken in turn from
           --sources, all in 127.0.0.0/8, so a per-address limit is not what is measured) and S
           slowloris connections that send a request head one byte every X seconds, never
           finishing it. Writes "ready" to FILE once every connection is up, then runs until
           SIGTERM/SIGINT (or --seconds after that) and prints JSON: idle connections up / failed
           / closed by the server (and after how long), and for each slowloris connection how long after its first byte the
           server cut it.
  normal   --target H:P --seconds T [--interval X] [--path P]
           Sequential requests, a new connection each (POST /v1/completions, max_tokens 1):
           prints JSON with the count, errors, status counts and latency p50/p99/max (ms).
  bigbody  --target H:P --mode length|chunked --size BYTES
           A POST announcing (length) or streaming (chunked) a body of BYTES, sent as fast as the
           server takes it while its answer is awaited: prints JSON with the status, the ms to
           the answer and the body bytes the server took before answering.
"""
import argparse
import errno
import json
import selectors
import signal
import socket
import sys
import time

REQ_BODY = b'{"model":"Qwen/Qwen3-0.6B","prompt":"Say hi","max_tokens":1}'
REQ = (b"POST /v1/completions HTTP/1.1\r\nHost: kvsplice\r\nContent-Type: application/json\r\n"
       b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(REQ_BODY)) + REQ_BODY
SLOW_HEAD = b"POST /v1/completions HTTP/1.1\r\nHost: kvsplice\r\nX-Slow: " + b"a" * 100000


def target(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def hostile(a):
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    sel = selectors.DefaultSelector()
    srcs = a.sources.split(",") if a.sources else [None]
    idle, slow = [], []
    failed = 0
    t_start = time.monotonic()

    def open_one(i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if srcs[i % len(srcs)]:
            s.bind((srcs[i % len(srcs)], 0))
        s.setblocking(False)
        rc = s.connect_ex(target(a.target))
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            return None
        return s

    pending = {}
    for i in range(a.idle + a.slowloris):
        s = open_one(i)
        if s is None:
            failed += 1
            continue
        kind = "idle" if i < a.idle else "slow"
        pending[s] = kind
        sel.register(s, selectors.EVENT_WRITE, kind)
        # keep the listener's accept queue from overflowing: settle every 512 connects
        if len(pending) >= 512:
            _settle(sel, pending, idle, slow, 10)
    _settle(sel, pending, idle, slow, 30)
    failed += len(pending)
    for s in pending:
        sel.unregister(s)
        s.close()
    # a server that accepted and refused (503) shows it as EOF right away
    ready = {"idle_up": len(idle), "slow_up": len(slow), "failed": failed,
             "connect_s": round(time.monotonic() - t_start, 2)}
    if a.state:
        with open(a.state, "w") as f:
            f.write("ready %s\n" % json.dumps(ready))
    closed_idle = []  # seconds each idle connection lasted before kvsplice closed it
    slow_state = {s: {"sent": 0, "t0": None, "cut_s": None} for s in slow}
    next_drip = time.monotonic()
    t_end = time.monotonic() + a.seconds if a.seconds else None
    while not stop[0] and (t_end is None or time.monotonic() < t_end):
        now = time.monotonic()
        if now >= next_drip:
            for s, st in slow_state.items():
                if st["cut_s"] is not None:
                    continue
                try:
                    s.send(SLOW_HEAD[st["sent"]:st["sent"] + 1])
                    if st["t0"] is None:
                        st["t0"] = now
                    st["sent"] += 1
                except OSError:
                    st["cut_s"] = now - (st["t0"] or now)
                    _drop(sel, s)
            next_drip = now + a.interval
        for key, _ in sel.select(timeout=max(0.0, min(0.2, next_drip - time.monotonic()))):
            s = key.fileobj
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            if d:
                continue  # an answer (408/431/503): the close follows
            if key.data == "idle":
                closed_idle.append(time.monotonic() - UP_AT[s])
            else:
                st = slow_state[s]
                st["cut_s"] = time.monotonic() - (st["t0"] or time.monotonic())
            _drop(sel, s)
    cuts = [st["cut_s"] for st in slow_state.values() if st["cut_s"] is not None]
    out = dict(ready, idle_closed_by_server=len(closed_idle),
               idle_closed_after_s_min=round(min(closed_idle), 2) if closed_idle else None,
               idle_closed_after_s_max=round(max(closed_idle), 2) if closed_idle else None,
               slow_cut=len(cuts), slow_open=len(slow) - len(cuts),
               slow_cut_s_min=round(min(cuts), 2) if cuts else None,
               slow_cut_s_median=round(pct(cuts, 0.5), 2) if cuts else None,
               slow_cut_s_max=round(max(cuts), 2) if cuts else None,
               slow_bytes_sent_max=max((st["sent"] for st in slow_state.values()), default=0))
    print(json.dumps(out))


UP_AT = {}  # socket -> when its connect completed


def _settle(sel, pending, idle, slow, secs):
    t_end = time.monotonic() + secs
    while pending and time.monotonic() < t_end:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            if s not in pending:
                continue
            kind = pending.pop(s)
            sel.unregister(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                s.close()
                continue
            (idle if kind == "idle" else slow).append(s)
            UP_AT[s] = time.monotonic()
            sel.register(s, selectors.EVENT_READ, kind)
        if len(pending) < 256:
            break


def _drop(sel, s):
    try:
        sel.unregister(s)
    except (KeyError, ValueError):
        pass
    s.close()


def request(t, timeout, path):
    t0 = time.monotonic()
    with socket.create_connection(t, timeout=timeout) as s:
        s.sendall(REQ.replace(b"/v1/completions", path.encode(), 1))
        got = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    ms = (time.monotonic() - t0) * 1000
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.") else 0
    return status, ms


def normal(a):
    t = target(a.target)
    lat, status, errors = [], {}, 0
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        try:
            st, ms = request(t, a.timeout, a.path)
        except OSError:
            st, ms = 0, None
        status[str(st)] = status.get(str(st), 0) + 1
        if st == 200:
            lat.append(ms)
        else:
            errors += 1
        if a.interval:
            time.sleep(a.interval)
    print(json.dumps({"requests": sum(status.values()), "errors": errors, "status": status,
                      "p50_ms": round(pct(lat, 0.5), 2) if lat else None,
                      "p99_ms": round(pct(lat, 0.99), 2) if lat else None,
                      "max_ms": round(max(lat), 2) if lat else None}))


def bigbody(a):
    t = target(a.target)
    s = socket.create_connection(t, timeout=10)
    if a.mode == "length":
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: kvsplice\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % a.size)
    else:
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: kvsplice\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
    t0 = time.monotonic()
    s.sendall(head)
    s.setblocking(False)
    chunk = b"x" * 65536
    if a.mode == "chunked":
        chunk = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    sent, got, t_ans = 0, b"", None
    sel = selectors.DefaultSelector()
    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    deadline = t0 + a.timeout
    while time.monotonic() < deadline:
        ev = sel.select(timeout=0.5)
        if not ev:
            continue
        mask = ev[0][1]
        if mask & selectors.EVENT_READ:
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            if d and t_ans is None:
                t_ans = time.monotonic()
            got += d
            if not d or b"\r\n\r\n" in got:
                break
        if mask & selectors.EVENT_WRITE and sent < a.size:
            try:
                n = s.send(chunk)
                sent += n
            except BlockingIOError:
                pass
            except OSError:  # refused and closed: the answer may still be readable
                sent = a.size
            if sent >= a.size:
                sel.modify(s, selectors.EVENT_READ)
    s.close()
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.") else 0
    print(json.dumps({"mode": a.mode, "size": a.size, "status": status,
                      "answer_ms": round((t_ans - t0) * 1000, 1) if t_ans else None,
                      "body_bytes_sent": sent}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hostile")
    h.add_argument("--target", required=True)
    h.add_argument("--idle", type=int, default=10000)
    h.add_argument("--sources", default="")
    h.add_argument("--slowloris", type=int, default=20)
    h.add_argument("--interval", type=float, default=1.0)
    h.add_argument("--seconds", type=float, default=0)
    h.add_argument("--state", default="")
    n = sub.add_parser("normal")
    n.add_argument("--target", required=True)
    n.add_argument("--seconds", type=float, default=20)
    n.add_argument("--interval", type=float, default=0)
    n.add_argument("--timeout", type=float, default=10)
    n.add_argument("--path", default="/v1/completions")
    b = sub.add_parser("bigbody")
    b.add_argument("--target", required=True)
    b.add_argument("--mode", choices=["length", "chunked"], default="length")
    b.add_argument("--size", type=int, default=1 << 30)
    b.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    {"hostile": hostile, "normal": normal, "bigbody": bigbody}[a.cmd](a)


if __name__ == "__main__":
    main()
