"""What one hop between two processes costs on this host: a TCP round trip over loopback, p50.

A router adds hops to every request (client -> router -> backend and back), and a first turn on PostgreSQL one
more (the claim). At c=1 each hop's wake-up is on the critical path, and what a wake-up costs depends on where
the woken process runs: on a guest whose kernel halts an idle vCPU at once (`haltpoll.guest_halt_poll_ns=0`),
waking a process on the other vCPU waits for that vCPU to come back, several times a same-CPU round trip. So a
c=1 figure says as much about the host as about the router; `router_overhead.py` prints this next to its table so
that runs on different hosts can be told apart.

    python benchmarks/support/hop.py            # as placed, on one CPU, across two
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time

# The child: accept one connection and echo every message until it closes. Started as its own interpreter (not
# forked): the bench may hold threads and sockets a fork would copy.
_ECHO = """
import socket, sys
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
print(ls.getsockname()[1], flush=True)
c, _ = ls.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while (d := c.recv(64)):
    c.sendall(d)
"""


def round_trip_us(n: int = 2000, *, mine: set[int] | None = None, theirs: set[int] | None = None,
                  warmup: int = 200) -> float:
    """p50 microseconds of `n` one-byte TCP round trips between this process and a child echoing them. `mine` /
    `theirs`: the CPUs each side may run on for the measurement (default: as the kernel places them); this
    process's own mask is put back afterwards."""
    if n < 1:
        raise ValueError(f"n must be at least 1 round trip, got {n}")
    allowed = os.sched_getaffinity(0)
    for name, cpus in (("mine", mine), ("theirs", theirs)):
        if cpus is not None and (not cpus or not cpus <= allowed):
            raise ValueError(f"{name} must be a non-empty subset of this process's CPUs {sorted(allowed)}, "
                             f"got {sorted(cpus)}")
    child = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None  # piped above
        line = child.stdout.readline()
        if not line.strip().isdigit():  # it died before listening (its error went to our stderr)
            try:
                code: int | str = child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = "none (still running)"
            raise RuntimeError(f"the echo process did not start: it printed {line!r}, exit code {code}")
        port = int(line)
        if theirs is not None:
            os.sched_setaffinity(child.pid, theirs)
        if mine is not None:
            os.sched_setaffinity(0, mine)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            took = []
            for i in range(warmup + n):
                t0 = time.perf_counter()
                s.sendall(b"x")
                if s.recv(64) != b"x":
                    raise RuntimeError("the echo process answered something else")
                if i >= warmup:
                    took.append(time.perf_counter() - t0)
        return statistics.median(took) * 1e6
    finally:
        os.sched_setaffinity(0, allowed)
        child.kill()
        child.wait()


def hop_figures(n: int = 2000) -> dict[str, float]:
    """Round trips as placed, and (with two CPUs or more) on one CPU and across two: microseconds, p50."""
    out = {"placed": round_trip_us(n)}
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        a, b = {cpus[0]}, {cpus[1]}
        out["one_cpu"] = round_trip_us(n, mine=a, theirs=a)
        out["two_cpus"] = round_trip_us(n, mine=a, theirs=b)
    return out


def describe(h: dict[str, float]) -> str:
    """One line for a report."""
    text = f"a TCP round trip between two processes takes {h['placed']:.0f} us (p50) as the kernel places them"
    if "one_cpu" in h:
        text += f", {h['one_cpu']:.0f} on one CPU, {h['two_cpus']:.0f} across two"
    return text


if __name__ == "__main__":
    print(describe(hop_figures()))
