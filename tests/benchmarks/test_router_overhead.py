"""router_overhead.py --steady: a short run on SQLite starts with the pin cache filled, then prints every slice and
the summary (real router, backend and wrk)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)")]


def steady(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "router_overhead.py"), "--steady", "new",
                           "--db", "sqlite", "--workers", "1", *args], capture_output=True, text=True, timeout=240)


def test_a_steady_run_fills_the_pin_cache_first_and_reports_each_slice():
    run = steady("--steady-seconds", "2", "--slice-seconds", "1", "--steady-fill", "300")
    assert run.returncode == 0, run.stderr[-2000:]
    filled = re.search(r"filled: (\d+) first turns in \d+ s before the slices \(pin cache bound 300\)", run.stdout)
    assert filled and int(filled[1]) >= 300, run.stdout
    slices = re.findall(r"^\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+0\s+0\s", run.stdout, re.M)
    assert len(slices) == 2, run.stdout  # one line a slice, no errors, no timeouts
    assert re.search(r"router RSS [\d.]+ MB after the first slice", run.stdout)


def test_a_negative_fill_is_refused_with_what_would_be_valid():
    run = steady("--steady-fill", "-1")
    assert run.returncode == 2 and "--steady-fill must be 0 or more first turns, got -1" in run.stderr
