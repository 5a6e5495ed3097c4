"""pin_refresh.py: a small run on SQLite and PostgreSQL prints each arm's figures, and on PostgreSQL the shipped
table refreshes pins with heap-only updates where the indexed one cannot."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import PG_URL, REPO


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "pin_refresh.py"), "--fill", "2000",
                           "--batches", "10", "--batch", "20", "--rounds", "1", *args],
                          capture_output=True, text=True, timeout=240)


def test_sqlite_arms_report_cpu_per_pin_and_their_ratio():
    out = run("--db", "sqlite")
    assert out.returncode == 0, out.stderr[-2000:]
    for arm in ("indexed", "unindexed"):
        assert re.search(rf"^sqlite\s+{arm}\s+CPU [\d.]+ \([\d.]+-[\d.]+\) us a pin$", out.stdout, re.M), out.stdout
    assert re.search(r"^sqlite\s+unindexed / indexed, paired by round \(CPU\): [\d.]+", out.stdout, re.M)


@pytest.mark.postgres
def test_on_postgresql_only_the_shipped_table_refreshes_with_heap_only_updates():
    if not PG_URL:
        pytest.skip("QUANTROUTE_TEST_POSTGRES not set")
    out = run("--db", PG_URL)
    assert out.returncode == 0, out.stderr[-2000:]
    hot = dict(re.findall(r"^postgres\s+(\w+)\s+WAL \d+ .* heap-only updates (\d+) ", out.stdout, re.M))
    assert hot.keys() == {"indexed", "unindexed"}, out.stdout
    assert hot["indexed"] == "0" and int(hot["unindexed"]) >= 95, out.stdout


def test_a_batch_larger_than_the_table_is_refused_with_what_would_be_valid():
    out = run("--db", "sqlite", "--batch", "5000")
    assert out.returncode == 2 and "--batch (5000) must not exceed --fill (2000)" in out.stderr
