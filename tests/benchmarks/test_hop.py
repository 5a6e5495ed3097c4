"""support/hop.py: what a hop between two processes costs, printed next to router_overhead.py's table."""

from __future__ import annotations

import math
import os

import pytest

from tests.conftest import REPO


@pytest.fixture
def hop(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from support import hop

    return hop


def _children() -> set[int]:
    from support.cpus import descendants  # on the path through the fixture

    return set(descendants(os.getpid())) - {os.getpid()}


def test_round_trips_are_timed_and_leave_no_process_and_no_mask_behind(hop):
    mine, before = os.sched_getaffinity(0), _children()
    figures = hop.hop_figures(n=200)
    assert all(math.isfinite(v) and v > 0 for v in figures.values())
    if len(mine) >= 2:
        assert set(figures) == {"placed", "one_cpu", "two_cpus"}
        line = hop.describe(figures)
        assert "on one CPU" in line and "across two" in line
    else:
        assert set(figures) == {"placed"}
    assert os.sched_getaffinity(0) == mine  # the pinned runs gave the bench its CPUs back
    assert _children() <= before  # every echo process was reaped


def test_a_pinned_run_puts_the_mask_back_when_it_fails(hop, monkeypatch):
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("pinning one CPU of one changes no mask")
    cpu = {min(mine)}

    def broken(*a, **k):
        raise OSError("no route")

    monkeypatch.setattr(hop.socket, "create_connection", broken)
    with pytest.raises(OSError, match="no route"):
        hop.round_trip_us(10, mine=cpu, theirs=cpu)
    assert os.sched_getaffinity(0) == mine


def test_bad_arguments_name_what_would_be_valid(hop):
    mine = os.sched_getaffinity(0)
    with pytest.raises(ValueError, match="n must be at least 1"):
        hop.round_trip_us(0)
    with pytest.raises(ValueError, match="mine must be a non-empty subset"):
        hop.round_trip_us(10, mine={max(mine) + 1})
    with pytest.raises(ValueError, match="theirs must be a non-empty subset"):
        hop.round_trip_us(10, theirs=set())
    assert os.sched_getaffinity(0) == mine


def test_an_echo_process_that_does_not_start_is_named(hop, monkeypatch):
    before = _children()
    monkeypatch.setattr(hop, "_ECHO", "raise SystemExit(3)")
    with pytest.raises(RuntimeError, match="echo process did not start.*exit code 3"):
        hop.round_trip_us(10)
    assert _children() <= before
