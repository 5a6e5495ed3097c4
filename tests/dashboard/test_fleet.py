"""Fleet live refresh: the fleet state is a fragment the browser re-runs every few seconds while Live is on;
the script itself never sleeps, so a run with Live on finishes like any other."""

from __future__ import annotations

from datetime import UTC

import pytest
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

from dashboard.pages import fleet
from tests.dashboard.conftest import page


@pytest.fixture
def auto_reruns(monkeypatch) -> list[float]:
    """Intervals of the auto-rerun messages the page sends (what tells the browser to re-run a fragment)."""
    seen: list[float] = []
    enqueue = ForwardMsgQueue.enqueue

    def spy(self, msg):
        if msg.WhichOneof("type") == "auto_rerun":
            seen.append(msg.auto_rerun.interval)
        return enqueue(self, msg)

    monkeypatch.setattr(ForwardMsgQueue, "enqueue", spy)
    return seen


def test_live_on_renders_the_fleet_state_as_a_refreshing_fragment(stack, auto_reruns):
    at = page("fleet", "olivia", "operator")
    assert not at.exception
    assert auto_reruns == []  # Live off: nothing refreshes on its own
    assert at.toggle(key="fleet_live").value is False
    at.toggle(key="fleet_live").set_value(True)
    at.run(timeout=30)  # the former sleep-then-rerun loop never finished a run with Live on
    assert not at.exception, at.exception
    assert auto_reruns == [fleet.LIVE_EVERY_S]
    assert at.toggle(key="fleet_live").value is True
    assert [h.value for h in at.subheader][:2] == ["Nodes", "Per tier, last 15 min"]
    assert "live node state unavailable" in at.warning[0].value  # no router configured in this stack
    assert len(at.get("vega_lite_chart")) >= 3  # requests/s, tokens/s, error rate from the request log
    next(s for s in at.selectbox if s.label == "Window").set_value("1 h").run(timeout=30)
    assert not at.exception
    assert "Per tier, last 1 h" in [h.value for h in at.subheader]
    assert auto_reruns == [fleet.LIVE_EVERY_S] * 2  # still live after another control changed
    at.toggle(key="fleet_live").set_value(False).run(timeout=30)
    assert auto_reruns == [fleet.LIVE_EVERY_S] * 2  # off again: no further refresh requested


def test_only_a_new_generation_shows_a_quiescence_deadline():
    from datetime import datetime

    from dashboard.pages.fleet import nodes_frame

    now = datetime.now(UTC).isoformat()
    node = {"key": "n", "deployment": "d", "tier": "int4", "hardware": "a100-80g", "healthy": True,
            "inflight": 0, "waiting": 0, "kv_usage": 0.1, "generation_started": now}
    df = nodes_frame([{**node, "generation": 1}, {**node, "key": "m", "generation": 2}], quiescence_s=60)
    until = dict(zip(df["node"], df["quiescent until"]))
    assert until["n"] == "" and until["m"] != ""
