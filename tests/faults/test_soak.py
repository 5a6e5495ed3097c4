"""A short run of benchmarks/soak.py (the real script, as a process): mixed and hostile traffic with faults on a
schedule against a router process; nothing lost from the log, nothing left in flight, no 500."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO


def test_short_soak_loses_nothing():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "soak.py"), "--seconds", "6", "--fault-every",
                          "2", "--concurrency", "2", "--json"], capture_output=True, text=True, timeout=240, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    f = json.loads(out.stdout.strip().splitlines()[-1])
    assert f["sent"] > 0 and f["faults"]
    assert f["rows_logged"] == f["sent"] - f["not_json"]
    assert f["inflight_at_end"] == 0 and f["task_restarts"] == 0
    assert not [c for c in f["causes"] if "FAIL" in c or c in ("status_500", "hostile_500")], f["causes"]
    assert all(v == 0 for v in f["log_dropped"].values())
