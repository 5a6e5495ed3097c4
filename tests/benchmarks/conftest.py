"""The benchmarks' support modules import as `support.*`, as when a benchmark script runs from benchmarks/."""

import sys

from tests.conftest import REPO

if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))
