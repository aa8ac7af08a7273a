#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A client that opens one connection after another to the Service for a while, sends one
HTTP request on each, and prints a JSON summary: how many connects were refused or timed out
(connect_failed: a connect aimed at nothing), how many connections were reset or got no complete
answer (lost: established, then the peer died; a reset can even surface from connect() itself
when the handshake completed but the client was not scheduled before the reset arrived), who
answered (header x-kvsim-worker, or the kvstub marker), and whether getpeername() always showed
the Service address. Run it inside the client pod
(tests/node/client.sh). It runs until --seconds have passed or the file --stop-file exists.

usage: connloop.py [--addr 10.96.0.50:8000] [--seconds 4] [--path /health] [--stop-file F]
"""
import argparse
import json
import os
import socket
import time


def one(addr, path, out):
    t = time.monotonic()
    try:
        s = socket.create_connection(addr, timeout=5)
    except ConnectionResetError as e:
        out["lost"] += 1
        out["errors"].append("%.3f connect: %s" % (t - out["t0"], e))
        return
    except OSError as e:
        out["connect_failed"] += 1
        out["errors"].append("%.3f connect: %s" % (t - out["t0"], e))
        return
    out["connects"] += 1
    try:
        if s.getpeername() != addr:
            out["peer_mismatch"] += 1
        s.sendall(("GET %s HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        if not lines[0].startswith("HTTP/1.1 200"):
            raise OSError("status %r" % lines[0][:40])
        hdr = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        n = int(hdr.get("content-length", "-1"))
        if n >= 0 and len(body) < n:
            raise OSError("short body %d < %d" % (len(body), n))
        who = hdr.get("x-kvsim-worker") or ("kvstub" if "x-kvs-stub-origdst" in hdr else "?")
        out["by"][who] = out["by"].get(who, 0) + 1
        out["ok"] += 1
    except OSError as e:
        out["lost"] += 1
        out["errors"].append("%.3f request: %s" % (t - out["t0"], e))
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="10.96.0.50:8000")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--path", default="/health")
    ap.add_argument("--stop-file")
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    addr = (host, int(port))
    out = {"connects": 0, "connect_failed": 0, "lost": 0, "ok": 0, "peer_mismatch": 0,
           "by": {}, "errors": [], "t0": time.monotonic()}
    end = out["t0"] + a.seconds
    while time.monotonic() < end and not (a.stop_file and os.path.exists(a.stop_file)):
        one(addr, a.path, out)
    out["seconds"] = round(time.monotonic() - out["t0"], 3)
    del out["t0"]
    out["errors"] = out["errors"][:20]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
