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
# Raw mode (--echo-raw): a TCP echo server that prefixes "NAME:" once (pass-through tests).
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

NAME = sys.argv[1] if len(sys.argv) > 1 else "up"


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
        else:
            self.send(404, b"not found\n")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n) if n else b""
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

    def serve(c):
        c.sendall((NAME + ":").encode())
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
