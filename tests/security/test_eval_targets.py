"""Eval targets: analysts pick registered deployments only; a free URL needs an operator and is recorded;
only runs against the registered candidate and baseline open a rollout's eval gate."""

from __future__ import annotations

import pytest

from quantroute.auth import PermissionDenied
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, upsert_node
from quantroute.evals.runner import EvalSetupError
from quantroute.evals.targets import registered_nodes, resolve_targets
from quantroute.policy.store import PolicyStore
from quantroute.rollout.service import RolloutService
from tests.conftest import add_users
from tests.rollout.conftest import (
    BASE,
    CAND,
    MODEL,
    PEOPLE,
    PERSON_ITEMS,
    policy_data,
    record_eval,
    record_staircase,
    write_v1,
)


@pytest.fixture
def registered(engine):
    add_users(engine, ann="analyst", olga="operator")
    with db_session(engine) as s:
        for key, dep in (("int4-a", BASE), ("int4-v2", CAND)):
            upsert_node(session=s, row=NodeRow(key=key, url=f"http://127.0.0.1:18000/{key}", model=MODEL,
                                               deployment=dep, tier="int4", format="int4"))
    return registered_nodes(engine)


def test_an_analyst_runs_only_against_registered_deployments(engine, registered):
    t = resolve_targets(engine, actor="ann", baseline=BASE, candidate=CAND, registered=registered)
    assert (t.baseline, t.candidate, t.source) == (f"http://127.0.0.1:18000/int4-a#{BASE}",
                                                   f"http://127.0.0.1:18000/int4-v2#{CAND}", "registered")
    with pytest.raises(PermissionDenied, match="eval.free_url is not allowed for role analyst"):
        resolve_targets(engine, actor="ann", baseline=BASE, candidate=f"http://attacker.example:9#{CAND}",
                        registered=registered)
    with pytest.raises(EvalSetupError, match="not a registered deployment"):
        resolve_targets(engine, actor="ann", baseline=BASE, candidate="made-up", registered=registered)


def test_an_operators_free_url_is_recorded_as_such(engine, registered):
    t = resolve_targets(engine, actor="olga", baseline=BASE, candidate=f"http://127.0.0.1:9#{CAND}",
                        registered=registered)
    assert (t.source, t.started_by) == ("url", "olga")


def test_a_passing_run_from_a_free_url_does_not_open_the_gate(tmp_path, engine):
    add_users(engine, **PEOPLE)
    write_v1(tmp_path / "p", policy_data())
    svc = RolloutService(PolicyStore(tmp_path / "p", engine))
    record_staircase(engine)
    record_eval(engine, passed=True, source="url")  # answers from a server someone typed in
    st = svc.start(MODEL, candidate=CAND, by="alice")
    assert st.phase == "gated"
    svc.tick(MODEL, PERSON_ITEMS, by="carol")
    with pytest.raises(Exception, match="eval gate is closed"):
        svc.check_gate(MODEL)
    record_eval(engine, passed=True)  # the same against the registered deployments
    assert svc.check_gate(MODEL).phase == "awaiting-approval"
