"""A free loopback port, for servers that tests, benchmarks and the demo start on 127.0.0.1."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nobody listens on right now. Another process may take it before the caller binds it; callers
    that cannot tolerate that bind port 0 themselves (as the simulator does)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
