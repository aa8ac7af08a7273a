# SPDX-License-Identifier: Apache-2.0
"""A vLLM worker's KV event publisher, stood in for by tests that drive kvsplice's event bounds
(tests/e2e/test_proxy_limits.sh): an XPUB bound on a port below the ephemeral range, and a replay
port reserved there too but never listened on, so kvsplice's sync on joining waits for its
deadline while live batches queue. The test sends the batches itself (pub.send_multipart)."""
import os
import time

import zmq

from lowport import LOW_MAX, LOW_MIN, low_port


def until(f, t):
    """Polls f every 20 ms until it is true or t seconds have passed; returns its last value."""
    end = time.time() + t
    while time.time() < end and not f():
        time.sleep(0.02)
    return f()


def publisher(ports_file):
    """Binds the XPUB and writes "EVENTS_PORT REPLAY_PORT" to ports_file (whole, by rename)."""
    pub = zmq.Context().socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1", LOW_MIN, LOW_MAX)
    with open(ports_file + ".tmp", "w") as f:
        f.write("%d %d\n" % (port, low_port()))
    os.rename(ports_file + ".tmp", ports_file)
    return pub


def admin_port(kvs_ports_file, t=10):
    """kvsplice's admin port, from its --port-file, once it has written it."""
    assert until(lambda: os.path.exists(kvs_ports_file), t), "kvsplice did not start"
    return int(open(kvs_ports_file).read().split()[1])
