#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""STAND-IN: a local Kubernetes API server for tests. This is the one stand-in of the project: no
real API server (nor etcd, nor a cluster) can run on the development machines, so kvsplice's
Kubernetes discovery (userspace/discovery/k8s.c) is tested against this file instead. It speaks
only what that source uses, the way kube-apiserver does:

  GET /api/v1[/namespaces/NS]/services                      list: ServiceList, limit/continue
  GET /apis/discovery.k8s.io/v1[/namespaces/NS]/endpointslices        EndpointSliceList
  the same with ?watch=1&resourceVersion=RV[&allowWatchBookmarks=true][&timeoutSeconds=N]:
      HTTP/1.1 200, chunked, one JSON watch event per line: ADDED / MODIFIED / DELETED / BOOKMARK,
      ERROR with a Status 410 "Expired" for a resourceVersion older than the history kept
  Authorization: Bearer TOKEN checked on every request (401 Status otherwise)
  HTTPS only, with certificates made at start with the openssl CLI in --dir (a CA, a server
  certificate for IP 127.0.0.1, and one for the name wrong.invalid that a client must refuse).

Objects look like the API server's (uid, resourceVersion, creationTimestamp, labels, ownerReferences,
ipFamilies, endpoint conditions, targetRef, nodeName, zone; list items without kind/apiVersion;
an empty endpoint list written as null). Each watch event is written in two chunks a few ms apart,
so clients see lines split across reads.

Control channel (plain HTTP on 127.0.0.1, no auth, JSON bodies), for the test to change state:
  POST /service  {"namespace","name","cluster_ip","ports":[{"name","port","protocol"}],
                  "annotations":{...}, "type", "silent"}          create or replace a Service
  POST /slice    {"namespace","name","service","ports":[{"name","port"}],
                  "endpoints":[{"ip","pod","ready","serving","terminating","node"}], "silent"}
  POST /delete   {"kind":"Service"|"EndpointSlice","namespace","name","silent"}
  POST /config   {"token","delay","watch_expire","page_size","cut"}  (delay s before every
                  response and every watch event; watch_expire s after which a watch ends; cut:
                  end watches by closing the socket without the last chunk)
  POST /bookmark      the resourceVersion moves (other objects changed) and every watch that asked
                      for bookmarks gets a BOOKMARK with it
  POST /expire        every open watch ends now (as at its timeout)
  POST /gone          the history is compacted: open watches get ERROR 410 and end, and a watch
                      from any older resourceVersion gets it too
  GET  /log           every API request: {"path","query":{...},"status","watch","t"}, and
                      tls_errors: connections that ended in the handshake without a request
  GET  /state         the objects and the current resourceVersion
"silent": true changes the state without any watch event and compacts the history (as if the
event had been lost to compaction), so only a relist can see it.

usage: k8s_api.py --dir DIR --token TOKEN [--cert good|wrong] [--port-file FILE]
The port file gets "API_PORT CONTROL_PORT" once both listen.
"""
import argparse
import base64
import json
import os
import queue
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOCK = threading.Lock()
STATE = {
    "rv": 100,
    "compacted": 0,  # a watch from a resourceVersion below this gets 410
    "objs": {"Service": {}, "EndpointSlice": {}},
    "history": [],  # (rv, kind, type, object)
    "watchers": [],  # (kind, namespace or None, queue, bookmarks)
    "log": [],
    "tls_errors": 0,
}
CONFIG = {"token": "", "delay": 0.0, "watch_expire": 0.0, "page_size": 0, "cut": False}
CREATED = "2026-11-30T10:00:00Z"


def make_certs(d):
    """A CA, a server certificate for IP 127.0.0.1 (good) and one for wrong.invalid (wrong)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "2", "-subj", "/CN=kvsplice-test-ca")
    for name, san in (("good", "IP:127.0.0.1"), ("wrong", "DNS:wrong.invalid")):
        key, csr = os.path.join(d, name + ".key"), os.path.join(d, name + ".csr")
        ext = os.path.join(d, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % san)
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=kube-apiserver")
        run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", os.path.join(d, name + ".crt"), "-days", "2", "-extfile", ext)


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def service_obj(req):
    ns, name = req.get("namespace", "default"), req["name"]
    ports = [{"name": p.get("name", ""), "protocol": p.get("protocol", "TCP"), "port": p["port"],
              "targetPort": p.get("target", p["port"])} for p in req.get("ports", [])]
    for p in ports:
        if not p["name"]:
            del p["name"]
    o = {"kind": "Service", "apiVersion": "v1",
         "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()),
                      "creationTimestamp": CREATED, "labels": {"app": name}},
         "spec": {"ports": ports, "selector": {"app": name}, "type": req.get("type", "ClusterIP"),
                  "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"},
         "status": {"loadBalancer": {}}}
    if req.get("annotations"):
        o["metadata"]["annotations"] = req["annotations"]
    cip = req.get("cluster_ip")
    if o["spec"]["type"] == "ExternalName":
        o["spec"]["externalName"] = req.get("external_name", "example.com")
    elif cip:
        o["spec"]["clusterIP"] = cip
        o["spec"]["clusterIPs"] = req.get("cluster_ips", [cip])
        o["spec"]["ipFamilies"] = ["IPv6" if ":" in cip else "IPv4"]
        o["spec"]["ipFamilyPolicy"] = "SingleStack"
    return o


def slice_obj(req):
    ns, name, svc = req.get("namespace", "default"), req["name"], req["service"]
    eps = []
    for e in req.get("endpoints", []):
        ready = e.get("ready", True)
        cond = {"ready": ready, "serving": e.get("serving", ready),
                "terminating": e.get("terminating", False)}
        ep = {"addresses": [e["ip"]], "conditions": cond, "nodeName": e.get("node", "node-1"),
              "zone": "zone-a"}
        if e.get("pod"):
            ep["targetRef"] = {"kind": "Pod", "namespace": ns, "name": e["pod"],
                               "uid": str(uuid.uuid4())}
        eps.append(ep)
    return {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": name, "generateName": svc + "-", "namespace": ns,
                         "uid": str(uuid.uuid4()), "creationTimestamp": CREATED, "generation": 1,
                         "labels": {"endpointslice.kubernetes.io/managed-by":
                                    "endpointslice-controller.k8s.io",
                                    "kubernetes.io/service-name": svc, "app": svc},
                         "annotations": {"endpoints.kubernetes.io/last-change-trigger-time":
                                         CREATED},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": svc,
                                              "uid": str(uuid.uuid4()), "controller": True,
                                              "blockOwnerDeletion": True}]},
            "addressType": req.get("address_type", "IPv4"),
            "endpoints": eps or None,
            "ports": [{"name": p.get("name", ""), "protocol": p.get("protocol", "TCP"),
                       "port": p["port"]} for p in req.get("ports", [])] or None}


def change(kind, obj, deleted=False, silent=False):
    """Stores (or deletes) obj under a new resourceVersion and tells the watches (LOCK held)."""
    STATE["rv"] += 1
    rv = STATE["rv"]
    md = obj["metadata"]
    key = (md["namespace"], md["name"])
    objs = STATE["objs"][kind]
    if deleted:
        old = objs.pop(key, None)
        if old is None:
            return
        obj = json.loads(json.dumps(old))
        obj["metadata"]["resourceVersion"] = str(rv)
        typ = "DELETED"
    else:
        typ = "MODIFIED" if key in objs else "ADDED"
        if key in objs:
            md["uid"] = objs[key]["metadata"]["uid"]
        md["resourceVersion"] = str(rv)
        objs[key] = obj
    if silent:  # the event is lost to compaction: only a relist sees the change
        STATE["compacted"] = rv + 1
        STATE["history"] = []
        return
    STATE["history"].append((rv, kind, typ, obj))
    for wk, wns, q, _ in STATE["watchers"]:
        if wk == kind and (wns is None or wns == md["namespace"]):
            q.put({"type": typ, "object": obj})


def route(path):
    """(kind, namespace or None) of an API path, or None."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest, kind = parts[2:], "Service"
        res = "services"
    elif parts[:3] == ["apis", "discovery.k8s.io", "v1"]:
        rest, kind = parts[3:], "EndpointSlice"
        res = "endpointslices"
    else:
        return None
    if rest == [res]:
        return kind, None
    if len(rest) == 3 and rest[0] == "namespaces" and rest[2] == res:
        return kind, rest[1]
    return None


class API(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle(self):
        """Counts a connection that ends in or right after the TLS handshake without a request
        as a TLS error: with TLS 1.3 the server's side of the handshake completes before the
        client checks the certificate, so a refusal shows as an alert or a close after it."""
        self.requests = 0
        try:
            self.connection.do_handshake()
            super().handle()
        except (ssl.SSLError, ConnectionError, BrokenPipeError, OSError):
            pass
        if not self.requests:
            with LOCK:
                STATE["tls_errors"] += 1

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.requests += 1
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        watch = q.get("watch") in ("1", "true")
        entry = {"path": u.path, "query": q, "watch": watch, "t": time.time(), "status": 0}
        with LOCK:
            STATE["log"].append(entry)
            delay, token = CONFIG["delay"], CONFIG["token"]
        if delay:
            time.sleep(delay)
        r = route(u.path)
        if self.headers.get("Authorization") != "Bearer " + token:
            entry["status"] = 401
            return self.reply(401, status(401, "Unauthorized", "Unauthorized"))
        if r is None:
            entry["status"] = 404
            return self.reply(404, status(404, "NotFound", "the server could not find the "
                                          "requested resource"))
        kind, ns = r
        if watch:
            return self.watch(kind, ns, q, entry)
        with LOCK:
            items = [o for (ons, _), o in sorted(STATE["objs"][kind].items())
                     if ns is None or ons == ns]
            rv = STATE["rv"]
            page = CONFIG["page_size"]
        limit = int(q.get("limit", "0") or 0)
        if page and (not limit or page < limit):
            limit = page
        start = 0
        if q.get("continue"):
            c = json.loads(base64.b64decode(q["continue"]))
            start, rv = c["start"], c["rv"]
        meta = {"resourceVersion": str(rv)}
        if limit and start + limit < len(items):
            meta["continue"] = base64.b64encode(json.dumps(
                {"start": start + limit, "rv": rv}).encode()).decode()
            items = items[start:start + limit]
        else:
            items = items[start:]
        out = []
        for o in items:
            o = dict(o)
            o.pop("kind")
            o.pop("apiVersion")
            out.append(o)
        entry["status"] = 200
        self.reply(200, {"kind": kind + "List",
                         "apiVersion": "v1" if kind == "Service" else "discovery.k8s.io/v1",
                         "metadata": meta, "items": out})

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, ev):
        """One watch event as one line, written in two chunks a few ms apart."""
        line = json.dumps(ev).encode() + b"\n"
        half = len(line) // 2
        self.chunk(line[:half])
        time.sleep(0.005)
        self.chunk(line[half:])

    def watch(self, kind, ns, q, entry):
        rv0 = int(q.get("resourceVersion") or 0)
        bookmarks = q.get("allowWatchBookmarks") == "true"
        timeout = float(q.get("timeoutSeconds") or 1800)
        wq = queue.Queue()
        with LOCK:
            gone = rv0 < STATE["compacted"]
            backlog = [] if gone else [
                {"type": t, "object": o} for (rv, k, t, o) in STATE["history"]
                if k == kind and rv > rv0 and (ns is None or o["metadata"]["namespace"] == ns)]
            if not gone:
                STATE["watchers"].append((kind, ns, wq, bookmarks))
            expire = CONFIG["watch_expire"]
        entry["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        cut = False
        try:
            if gone:
                self.event({"type": "ERROR", "object": status(
                    410, "Expired", "too old resource version: %d (%d)" %
                    (rv0, STATE["compacted"]))})
                entry["gone"] = True
            else:
                for ev in backlog:
                    self.event(ev)
                end = time.time() + min(timeout, expire or timeout)
                while True:
                    left = end - time.time()
                    if left <= 0:
                        break
                    try:
                        ev = wq.get(timeout=min(left, 0.2))
                    except queue.Empty:
                        continue
                    if ev == "expire":
                        break
                    with LOCK:
                        delay = CONFIG["delay"]
                    if delay:
                        time.sleep(delay)
                    self.event(ev)
                    if ev["type"] == "ERROR":
                        entry["gone"] = True
                        break
            with LOCK:
                cut = CONFIG["cut"]
            if cut:  # the connection dies mid-stream: no final chunk
                self.connection.shutdown(socket.SHUT_RDWR)
            else:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            with LOCK:
                STATE["watchers"] = [w for w in STATE["watchers"] if w[2] is not wq]
            entry["ended"] = time.time()
        self.close_connection = True


class Control(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with LOCK:
            if self.path == "/log":
                return self.reply({"requests": STATE["log"], "tls_errors": STATE["tls_errors"]})
            if self.path == "/state":
                return self.reply({"rv": STATE["rv"], "compacted": STATE["compacted"],
                                   "watchers": len(STATE["watchers"]),
                                   "objects": {k: list(v.values())
                                               for k, v in STATE["objs"].items()}})
        self.reply({"error": "unknown"}, 404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        silent = bool(req.get("silent"))
        with LOCK:
            if self.path == "/service":
                change("Service", service_obj(req), silent=silent)
            elif self.path == "/slice":
                change("EndpointSlice", slice_obj(req), silent=silent)
            elif self.path == "/delete":
                change(req["kind"], {"metadata": {"namespace": req.get("namespace", "default"),
                                                  "name": req["name"]}},
                       deleted=True, silent=silent)
            elif self.path == "/config":
                for k in CONFIG:
                    if k in req:
                        CONFIG[k] = type(CONFIG[k])(req[k])
            elif self.path == "/bookmark":
                STATE["rv"] += 1
                for _, _, q, bm in STATE["watchers"]:
                    if bm:
                        q.put({"type": "BOOKMARK", "object": {
                            "kind": "Service", "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(STATE["rv"])}}})
            elif self.path == "/expire":
                for _, _, q, _ in STATE["watchers"]:
                    q.put("expire")
            elif self.path == "/gone":
                STATE["rv"] += 1
                STATE["compacted"] = STATE["rv"] + 1
                STATE["history"] = []
                for _, _, q, _ in STATE["watchers"]:
                    q.put({"type": "ERROR", "object": status(
                        410, "Expired", "too old resource version")})
            else:
                return self.reply({"error": "unknown"}, 404)
            rv = STATE["rv"]
        self.reply({"ok": True, "rv": rv})


class TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--cert", choices=("good", "wrong"), default="good")
    ap.add_argument("--port-file")
    a = ap.parse_args()
    CONFIG["token"] = a.token
    if not os.path.exists(os.path.join(a.dir, "ca.crt")):
        make_certs(a.dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(a.dir, a.cert + ".crt"), os.path.join(a.dir, a.cert + ".key"))
    api = TLSServer(("127.0.0.1", 0), API)
    api.socket = ctx.wrap_socket(api.socket, server_side=True, do_handshake_on_connect=False)
    ctl = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    ctl.daemon_threads = True
    threading.Thread(target=ctl.serve_forever, daemon=True).start()
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d %d\n" % (api.server_address[1], ctl.server_address[1]))
        os.rename(tmp, a.port_file)
    try:
        api.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
