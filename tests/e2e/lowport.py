# SPDX-License-Identifier: Apache-2.0
"""Loopback ports below the kernel's ephemeral range (32768-60999 by default), for e2e tests that
close an endpoint and bind it again while a client keeps reconnecting to it: on an ephemeral port
a reconnect can pick that very port as its source and connect to itself (TCP simultaneous open),
or another process's connect can take it, and the rebind fails with EADDRINUSE."""
import random
import socket

LOW_MIN, LOW_MAX = 20000, 32000
_GIVEN = set()  # handed out by this process: a test takes several before binding any


def low_port():
    """A loopback port below the ephemeral range that nothing holds now and that this process has
    not handed out before."""
    for _ in range(1000):
        port = random.randrange(LOW_MIN, LOW_MAX)
        if port in _GIVEN:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            _GIVEN.add(port)
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port below the ephemeral range")
