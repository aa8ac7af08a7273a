#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Resets many streaming connections to a kvsim at the same instant, as a crashed proxy in front
# of it does (the kernel resets every connection the dead process held), ROUNDS times.
#   reset_storm.py URL PID [STREAMS] [ROUNDS]
# Each round opens STREAMS streamed completions, waits until every one has its first token, stops
# kvsim (PID, SIGSTOP) until its engine step is due, closes them all with SO_LINGER 0 (a RST
# each) and lets it go on (SIGCONT): so its next wake-up sees the engine's timer first and the
# resets after it, the order in which a token written to a reset connection closes it while
# that connection's own event is still to be handled. Prints "ok N" when kvsim answers /health
# after the last round, else "dead" (exit 1).
import os
import signal
import socket
import struct
import sys
import time
from urllib.parse import urlparse

url = urlparse(sys.argv[1])
pid = int(sys.argv[2])
streams = int(sys.argv[3]) if len(sys.argv) > 3 else 32
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 4
body = b'{"prompt": "reset storm %d", "max_tokens": 400, "stream": true}'


def request(i):
    s = socket.create_connection((url.hostname, url.port), timeout=10)
    b = body % i
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\n\r\n%s" % (len(b), b))
    return s


def health():
    try:
        s = socket.create_connection((url.hostname, url.port), timeout=5)
        s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


for r in range(rounds):
    socks = [request(r * streams + i) for i in range(streams)]
    for s in socks:
        got = b""
        while b"data: " not in got:  # its first token: the engine is streaming to it
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.1)  # its step timer expires meanwhile
    for s in socks:
        s.close()
    time.sleep(0.02)
    os.kill(pid, signal.SIGCONT)
    time.sleep(0.05)
time.sleep(0.3)
if health():
    print("ok %d" % (streams * rounds))
    sys.exit(0)
print("dead")
sys.exit(1)
