#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in worker pod for the netns node testbed, used until build/kvsim exists (up.sh picks
kvsim when it is built). Not a vLLM simulator: it only answers enough of the OpenAI HTTP API for
the interception tests, and says which worker answered in the header `x-kvsim-worker` (as kvsim
does).

  GET  /health, /v1/models         200 JSON
  GET  /sse?n=N&ms=M               text/event-stream, N events M ms apart, then [DONE]
  POST /v1/chat/completions        JSON, or SSE chunks when "stream": true
  POST /v1/completions             likewise
  anything else                    200 JSON echo of method, path, body length, worker

HTTP/1.1 with keep-alive; request bodies by Content-Length or chunked.

usage: testworker.py --port 8000 --worker-id w1 [--host 0.0.0.0]
"""
import argparse
import json
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

WORKER = "w?"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kvs-testworker/1"

    def log_message(self, fmt, *args):  # quiet: tests read stdout/stderr only on failure
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-kvsim-worker", WORKER)
        self.end_headers()
        self.wfile.write(body)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-kvsim-worker", WORKER)
        self.end_headers()

    def sse(self, data):
        chunk = ("data: %s\n\n" % data).encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.flush()

    def end_sse(self):
        self.sse("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self):
        u = urlparse(self.path)
        if u.path in ("/health", "/healthz"):
            return self.send_json(200, {"status": "ok", "worker": WORKER})
        if u.path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [
                {"id": "qwen", "object": "model", "owned_by": "kvs-testworker"}]})
        if u.path == "/sse":
            q = parse_qs(u.query)
            n, ms = int(q.get("n", ["5"])[0]), int(q.get("ms", ["20"])[0])
            self.start_sse()
            for i in range(n):
                self.sse(json.dumps({"i": i, "worker": WORKER}))
                time.sleep(ms / 1000.0)
            return self.end_sse()
        return self.send_json(200, {"method": "GET", "path": self.path, "worker": WORKER})

    def do_POST(self):
        body = self.read_body()
        u = urlparse(self.path)
        if u.path not in ("/v1/chat/completions", "/v1/completions"):
            return self.send_json(200, {"method": "POST", "path": self.path,
                                        "body_len": len(body), "worker": WORKER})
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send_json(400, {"error": {"message": "invalid JSON body",
                                                  "type": "BadRequestError", "code": 400}})
        chat = u.path == "/v1/chat/completions"
        words = ["hello", "from", WORKER, "via", "the", "testbed"]
        model = req.get("model", "qwen")
        rid = "cmpl-%s-%d" % (WORKER, int(time.time() * 1e6))
        if req.get("stream"):
            self.start_sse()
            for i, w in enumerate(words):
                text = (" " if i else "") + w
                if chat:
                    delta = {"content": text} if i else {"role": "assistant", "content": text}
                    choice = {"index": 0, "delta": delta, "finish_reason": None}
                    obj = "chat.completion.chunk"
                else:
                    choice = {"index": 0, "text": text, "finish_reason": None}
                    obj = "text_completion"
                self.sse(json.dumps({"id": rid, "object": obj, "created": int(time.time()),
                                     "model": model, "choices": [choice]}))
                time.sleep(0.005)
            last = {"index": 0, "finish_reason": "stop"}
            last.update({"delta": {}} if chat else {"text": ""})
            self.sse(json.dumps({"id": rid, "object": "chat.completion.chunk" if chat
                                 else "text_completion", "created": int(time.time()),
                                 "model": model, "choices": [last]}))
            return self.end_sse()
        text = " ".join(words)
        choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                   "finish_reason": "stop"} if chat else
                  {"index": 0, "text": text, "finish_reason": "stop"})
        return self.send_json(200, {"id": rid, "object": "chat.completion" if chat
                                    else "text_completion", "created": int(time.time()),
                                    "model": model, "choices": [choice],
                                    "usage": {"prompt_tokens": 1, "completion_tokens": 6,
                                              "total_tokens": 7}})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def main():
    global WORKER
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--worker-id", default="w1")
    a = ap.parse_args()
    WORKER = a.worker_id
    srv = Server((a.host, a.port), Handler)
    print("testworker %s listening on %s:%d" % (WORKER, a.host, a.port), file=sys.stderr,
          flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    socketserver.TCPServer.allow_reuse_address = True
    main()
