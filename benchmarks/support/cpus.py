"""Put the PostgreSQL server on cores of its own for the length of a run: the topology of a deployment, whose
database is another machine, on one host.

With everything sharing a small host's cores, a claim written to the server before its caller blocks may come
back no sooner than one written when it blocks (where the kernel wakes the database's backend, and what a wake-up
across CPUs costs, see support/hop.py). So a change that sends work to the database earlier can gain nothing on
such a host although it gains where the database has cores of its own. `--db-cpus` shows both."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from support.bench_db import postgres_server_pid


def parse_cpus(spec: str) -> set[int]:
    """'1' or '1,3' or '2-3' -> the set of CPU numbers; ValueError naming what is wrong (a range that runs
    backwards too: it would name no CPU)."""
    cpus: set[int] = set()
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and (not hi.isdigit() or int(hi) < int(lo))):
            raise ValueError(f"{spec!r} is not a CPU list such as 1 or 1,3 or 2-3")
        cpus.update(range(int(lo), int(hi if sep else lo) + 1))
    return cpus


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, as /proc shows them now (a router's workers, PostgreSQL's backends);
    one that exits meanwhile is left out."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo.extend(int(c) for c in task.read_text().split())
    return out


@contextlib.contextmanager
def database_on_cpus(url: str, cpus: set[int]) -> Iterator[set[int]]:
    """The PostgreSQL server at `url` (it must run on this host) and its processes on `cpus`, this process and
    everything it starts afterwards on the others; every mask is put back at exit. Backends forked meanwhile
    inherit the server's mask and leave with their connections. Yields the CPUs left to this process."""
    pid = postgres_server_pid(url)
    if pid is None:
        raise SystemExit("--db-cpus: the PostgreSQL server does not run on this host")
    mine = os.sched_getaffinity(0)
    rest = mine - cpus
    if not cpus <= mine or not rest:
        raise SystemExit(f"--db-cpus: give CPUs among {sorted(mine)} and leave at least one, got {sorted(cpus)}")
    saved: dict[int, set[int]] = {}
    try:
        for p in descendants(pid):
            with contextlib.suppress(ProcessLookupError):
                saved[p] = os.sched_getaffinity(p)
                os.sched_setaffinity(p, cpus)
        os.sched_setaffinity(0, rest)
        yield rest
    finally:
        os.sched_setaffinity(0, mine)
        for p, mask in saved.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(p, mask)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process and its descendants (a router's workers), every thread included."""
    if pid is None:
        return 0.0
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for p in descendants(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError):  # gone meanwhile
            continue
    return total


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants (a router's workers), in MB."""
    total = 0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:  # gone meanwhile
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024
