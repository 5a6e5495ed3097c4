"""benchmarks/tracing_overhead.py's `no tracing code` router: every listed hook is still where the list says in this
tree, and taking them out leaves a request path with no tracing that compiles and imports nothing of it."""

from __future__ import annotations

import pytest

from tests.conftest import REPO


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import tracing_overhead

    return tracing_overhead


def test_the_hooks_come_out_of_this_tree(bench):
    stripped = bench.strip_hooks(lambda name: (REPO / name).read_text())
    assert set(stripped) == {"quantroute/router/app.py", "quantroute/router/path/forward.py"}
    for name, text in stripped.items():
        assert "quantroute.tracing" not in text and "import trace\n" not in text, name
        assert len(text) < len((REPO / name).read_text())


def test_a_hook_reshaped_out_of_the_list_stops_the_bench(bench):
    def read(name: str) -> str:
        text = (REPO / name).read_text()
        return text.replace("tracing=self.tracing)", "tracing=self.tracing,)") if name.endswith("app.py") else text

    with pytest.raises(SystemExit, match="no tracing hook like"):
        bench.strip_hooks(read)
