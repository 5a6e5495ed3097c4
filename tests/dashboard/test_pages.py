"""Page logic through streamlit.testing.v1.AppTest (login + st.navigation through the entry script; each page
rendered alone with a logged-in user), role hiding, and the server-side role checks in the actions."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import actions, queries
from quantroute.auth import PermissionDenied
from quantroute.db.engine import session
from quantroute.db.user import update_user
from quantroute.policy.loader import policy_to_data, validate_data
from quantroute.policy.store import PolicyStore
from tests.dashboard.conftest import APP, PASSWORD, buttons, page


def test_login_then_navigation(stack):
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert [t.label for t in at.text_input] == ["User", "Password"]
    at.text_input[0].input("olivia")
    at.text_input[1].input("wrong")
    at.button[0].click().run()
    assert "unknown user or wrong password" in at.error[0].value
    at.text_input[1].input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception
    assert any("olivia" in m.value and "operator" in m.value for m in at.sidebar.markdown)
    assert at.title[0].value == "Fleet"


@pytest.mark.parametrize("module", ["fleet", "policy", "sessions", "evals", "rollouts", "capacity", "tenants", "audit"])
def test_every_page_renders_for_every_role(stack, module):
    for name, role in (("olivia", "operator"), ("rahul", "reviewer"), ("ana", "analyst")):
        at = page(module, name, role)
        assert not at.exception, (module, role, at.exception)


def test_role_hiding(stack):
    op = page("policy", "olivia", "operator")
    assert "Save draft as new version" in buttons(op)
    for name, role in (("rahul", "reviewer"), ("ana", "analyst")):
        assert "Save draft as new version" not in buttons(page("policy", name, role))
    assert "Unpin…" in buttons(page("sessions", "olivia", "operator"))
    assert "Unpin…" not in buttons(page("sessions", "ana", "analyst"))
    assert "Start rollout of llama3-8b-awq-w4a16-v2" in buttons(page("rollouts", "olivia", "operator"))
    assert "Start rollout of llama3-8b-awq-w4a16-v2" not in buttons(page("rollouts", "ana", "analyst"))


def test_actions_recheck_the_stored_role(stack):
    engine, policies = stack
    store = PolicyStore(policies, engine)
    draft = store.active()
    with pytest.raises(PermissionDenied, match="policy.new is not allowed for role analyst"):
        actions.save_policy(store=store, actor="ana", draft=draft, parent=1, message="x")
    v = actions.save_policy(store=store, actor="olivia", draft=draft, parent=1, message="same rules")
    with pytest.raises(PermissionDenied):
        actions.approve_policy(store=store, actor="olivia", version=v)  # an operator cannot approve
    with session(engine) as s:  # demoted after login: the next write is refused at once
        update_user(session=s, name="rahul", role="analyst")
    with pytest.raises(PermissionDenied, match="role analyst"):
        actions.approve_policy(store=store, actor="rahul", version=v)
    with pytest.raises(PermissionDenied, match="unknown or disabled user"):
        actions.unpin_session(engine=engine, router=None, actor="mallory", session_key="s-0010.demo")
    assert actions.unpin_session(engine=engine, router=None, actor="olivia", session_key="s-0010.demo")
    events = queries.audit_events(engine, action_prefix="session.unpin")
    assert events["actor"].tolist() == ["olivia", "mallory"]  # newest first; the refused attempt is audited
    assert "unknown or disabled user" in str(events["detail"].iloc[1])


def test_threshold_edit_shows_diff_and_saves(stack):
    engine, policies = stack
    at = page("policy", "olivia", "operator")
    box = next(n for n in at.number_input if n.label == "min score #1")
    box.set_value(box.value + 1).run()
    assert not at.error, [e.value for e in at.error]
    at.text_input(key="save_message").input("raise the first threshold")
    next(b for b in at.button if b.label == "Save draft as new version").click().run()
    assert PolicyStore(policies, engine).versions() == [1, 2]
    assert PolicyStore(policies, engine).load(2).author == "olivia"


def test_invalid_draft_shows_issue_with_path(stack):
    at = page("policy", "olivia", "operator")
    # thresholds must be monotone: give the first threshold a lower tier than a lower score requires
    tiers = [s for s in at.selectbox if s.label.startswith("tier #")]
    tiers[0].set_value("int4").run()
    text = " ".join(e.value for e in at.error)
    assert "thresholds[" in text and "monotone" in text


def test_what_if_replay_counts_changes_and_causes(stack):
    engine, policies = stack
    from dashboard.pages.policy import replay_summary

    active = PolicyStore(policies, engine).active()
    data = policy_to_data(active)
    data["rules"] = [dict(r, weight=0) if r["name"] == "greedy-structured" else r for r in data["rules"]]
    draft = validate_data(data)
    res = replay_summary(active, draft, queries.replay_rows(engine, limit=200))
    assert res["total"] == 200
    assert res["changed"] > 0
    assert res["causes"]["rule"].tolist() == ["greedy-structured"]
    same = replay_summary(active, active, queries.replay_rows(engine, limit=200))
    assert same["changed"] == 0


def test_fleet_queries_aggregate(stack):
    engine, _ = stack
    share = queries.tier_share(engine, window_s=3600)
    assert share["requests"].sum() == 200 and abs(share["share"].sum() - 1) < 1e-9
    ts = queries.tier_timeseries(engine, window_s=3600, bucket_s=60)
    assert ts["requests"].sum() == 200
    guard = queries.arm_guard_series(engine, model="llama3-8b", window_s=3600, bucket_s=3600)
    assert set(guard["arm"]) == {"baseline", "candidate"}
    assert (guard["p95_latency_ms"] > 0).all()


def test_composition_warning():
    import pandas as pd

    from dashboard.pages.fleet import composition_warning

    share = pd.DataFrame({"tier": ["fp16", "int4"], "share": [0.8, 0.2]})
    assert "fleet-composition" in composition_warning(share, "fp16", 0.7)
    assert composition_warning(share.assign(share=[0.5, 0.5]), "fp16", 0.7) is None


def test_applying_yaml_shows_each_issue_with_its_line(stack):
    at = page("policy", "olivia", "operator")
    area = next(t for t in at.text_area if t.label.startswith("Draft as YAML"))
    lines = area.value.splitlines()
    at_line = next(n for n, ln in enumerate(lines, 1) if ln.strip().startswith("max_wait_ms:"))
    lines[at_line - 1] = lines[at_line - 1].replace("max_wait_ms", "max_wait")  # a typo'd key
    area.input("\n".join(lines)).run()
    next(b for b in at.button if b.label == "Apply YAML").click().run()
    errors = [e.value for e in at.error]
    assert f"line {at_line}: sessions.max_wait: unknown key" in errors, errors


def test_an_unpin_that_misses_a_replica_is_audited_and_reported(stack):
    """Replica a drops the pin, replica b is down: the operator is told which, and the audit says what happened."""
    import httpx

    from quantroute.admin_client import RouterAdmin, RouterUnavailable

    engine, _ = stack
    deleted = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "b":
            raise httpx.ConnectError("connection refused", request=request)
        deleted.append(request.url.path)
        return httpx.Response(200, json={"session_key": "s-0010.demo", "unpinned": True})

    router = RouterAdmin(["http://a", "http://b"], "tok", transport=httpx.MockTransport(handler))
    with pytest.raises(RouterUnavailable, match="router at http://b unreachable"):
        actions.unpin_session(engine=engine, router=router, actor="olivia", session_key="s-0010.demo")
    assert deleted == ["/admin/sessions/s-0010.demo"]
    events = queries.audit_events(engine, action_prefix="session.unpin")
    assert events["actor"].tolist() == ["olivia"]
    assert "router at http://b unreachable" in str(events["detail"].iloc[0])  # JSON text on SQLite
