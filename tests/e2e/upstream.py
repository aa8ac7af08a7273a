#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A small HTTP/1.1 upstream for the proxy tests (stands in for a vLLM worker; kvsim replaces it
# where the OpenAI API matters). Binds 127.0.0.1:0 and prints its port on stdout.
#   GET  /who            -> "NAME\n" (X-Upstream: NAME); HEAD /who: the same head, no body
#   POST /echo           -> JSON {name, method, path, body_len, body, headers}
#   GET  /sse?n=N&ms=M   -> text/event-stream, chunked, N events M ms apart
#   GET  /big?bytes=N    -> N bytes, Content-Length
#   GET  /bigchunked?bytes=N -> N bytes, chunked
#   GET  /close          -> a response then the connection closes
#   GET  /eof            -> a body delimited by close (no length)
#   GET  /slow?ms=M      -> answers after M ms
#   GET  /rst            -> a head announcing 1 GiB, bytes until the proxy stops reading for
#                           0.5 s, then a reset (SO_LINGER 0)
#   HEAD /stray?ms=M     -> a head with Content-Length: 6, then M ms later a stray response on
#                           the same connection (a worker out of step with its framing)
#   POST /die?key=K      -> reads the body, counts it under K, closes without a response
#   GET  /count?key=K    -> how many /die requests K saw
#   GET  /metrics        -> with --metrics-bytes N: vLLM metrics (a KV cache of 777 blocks), padded
#                           with comment lines to N bytes; without it, 404. With --metrics-delay MS
#                           answered after MS ms; with --metrics-head-bytes N its head is padded
#                           (an X-Pad header) to N bytes
# Raw mode (--echo-raw): a TCP echo server that prefixes "NAME:" once (pass-through tests), with
# two special openings:
#   "\x00finrst"         -> "NAME:", then FIN, then 0.3 s later a reset
#   "GET /ws..." + "Upgrade" -> waits 0.3 s, answers 101 and "early=N\n" (N: bytes that came after
#                           the request head before the 101), then echoes
import json
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

NAME = sys.argv[1] if len(sys.argv) > 1 else "up"


def opt(name):
    """The integer value of option name, or None when absent."""
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else None


METRICS_BYTES = opt("--metrics-bytes")
METRICS_DELAY_MS = opt("--metrics-delay") or 0
METRICS_HEAD_BYTES = opt("--metrics-head-bytes")
COUNTS = {}
COUNTS_LOCK = threading.Lock()


def metrics_body(n):
    """A vLLM /metrics page of n bytes (at least its series): the series, then comment lines."""
    body = (b'vllm:num_requests_running{model_name="m"} 0\n'
            b'vllm:num_requests_waiting{model_name="m"} 0\n'
            b'vllm:kv_cache_usage_perc{model_name="m"} 0\n'
            b'vllm:cache_config_info{block_size="16",num_gpu_blocks="777"} 1\n')
    pad = []
    left = n - len(body)
    while left > 0:
        k = min(left, 4096)
        pad.append(b"#" + b"p" * (k - 2) + b"\n" if k >= 2 else b"\n")
        left -= k
    return body + b"".join(pad)


def reset(sock):
    """Closes sock with a reset instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def q(self, k, d):
        return int(parse_qs(urlparse(self.path).query).get(k, [d])[0])

    def send(self, code, body, ctype="text/plain", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Upstream", NAME)
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        if urlparse(self.path).path == "/stray":
            self.send(200, b"x" * 6)
            conn, ms = self.connection, self.q("ms", 300)

            def stray():
                time.sleep(ms / 1000.0)
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSTRAY\n")
                except OSError:
                    pass
            threading.Thread(target=stray, daemon=True).start()
            return
        self.do_GET()

    def do_GET(self):
        p = urlparse(self.path).path
        if p == "/who":
            self.send(200, (NAME + "\n").encode())
        elif p == "/sse":
            n, ms = self.q("n", 5), self.q("ms", 100)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("X-Upstream", NAME)
            self.end_headers()
            for i in range(n):
                ev = ("data: {\"i\": %d, \"t\": %.6f}\n\n" % (i, time.time())).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
                time.sleep(ms / 1000.0)
            self.wfile.write(b"0\r\n\r\n")
        elif p == "/big":
            n = self.q("bytes", 1 << 20)
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.send_header("X-Upstream", NAME)
            self.end_headers()
            blk = b"x" * 65536
            while n > 0:
                k = min(n, len(blk))
                self.wfile.write(blk[:k])
                n -= k
        elif p == "/bigchunked":
            n = self.q("bytes", 1 << 20)
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            blk = b"y" * 65536
            while n > 0:
                k = min(n, len(blk))
                self.wfile.write(b"%x\r\n%s\r\n" % (k, blk[:k]))
                n -= k
            self.wfile.write(b"0\r\n\r\n")
        elif p == "/close":
            self.send(200, b"bye\n", extra=[("Connection", "close")])
            self.close_connection = True
        elif p == "/eof":
            self.send_response(200)
            self.send_header("X-Upstream", NAME)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until-close\n")
            self.close_connection = True
        elif p == "/slow":
            time.sleep(self.q("ms", 500) / 1000.0)
            self.send(200, (NAME + "\n").encode())
        elif p == "/rst":
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            self.wfile.flush()
            self.connection.settimeout(0.5)
            blk = b"r" * 65536
            try:
                while True:
                    self.connection.sendall(blk)
            except OSError:
                pass
            reset(self.connection)
            self.close_connection = True
        elif p == "/metrics" and METRICS_BYTES is not None:
            time.sleep(METRICS_DELAY_MS / 1000.0)
            body = metrics_body(METRICS_BYTES)
            if METRICS_HEAD_BYTES is None:
                self.send(200, body, "text/plain; version=0.0.4")
                return
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    b"Content-Length: %d\r\nX-Pad: " % len(body))
            pad = METRICS_HEAD_BYTES - len(head) - 4
            self.wfile.write(head + b"p" * max(pad, 0) + b"\r\n\r\n" + body)
        elif p == "/count":
            key = parse_qs(urlparse(self.path).query).get("key", [""])[0]
            with COUNTS_LOCK:
                n = COUNTS.get(key, 0)
            self.send(200, b"%d\n" % n)
        else:
            self.send(404, b"not found\n")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n) if n else b""
        if urlparse(self.path).path == "/die":
            key = parse_qs(urlparse(self.path).query).get("key", [""])[0]
            with COUNTS_LOCK:
                COUNTS[key] = COUNTS.get(key, 0) + 1
            self.close_connection = True
            return
        out = json.dumps({"name": NAME, "method": self.command, "path": self.path,
                          "body_len": len(body), "body": body.decode("latin-1")[:4096],
                          "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send(200, out, "application/json")


def echo_raw():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    print(s.getsockname()[1], flush=True)

    def upgrade(c, got):
        while b"\r\n\r\n" not in got:
            d = c.recv(65536)
            if not d:
                return
            got += d
        time.sleep(0.3)
        early = len(got.split(b"\r\n\r\n", 1)[1])
        try:
            early += len(c.recv(65536, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except BlockingIOError:
            pass
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\n\r\nearly=%d\n" % early)
        rest = got.split(b"\r\n\r\n", 1)[1]
        if rest:
            c.sendall(rest)
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
        c.close()

    def serve(c):
        first = c.recv(65536, socket.MSG_PEEK)
        if first.startswith(b"GET /ws"):
            upgrade(c, b"")
            return
        c.sendall((NAME + ":").encode())
        if first.startswith(b"\x00finrst"):
            c.recv(65536)
            c.shutdown(socket.SHUT_WR)
            time.sleep(0.3)
            reset(c)
            return
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
        c.close()

    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    if "--echo-raw" in sys.argv:
        echo_raw()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
