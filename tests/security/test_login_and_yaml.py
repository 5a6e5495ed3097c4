"""Logins are throttled and locked after repeated failures (audited); OIDC identities need a verified e-mail;
every policy YAML path refuses alias bombs, deep nesting and huge texts quickly."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from sqlmodel import Session

from quantroute import yamlsafe
from quantroute.auth import AuthError, Throttle, authenticate, hash_password, oidc_email
from quantroute.db import audit
from quantroute.db.engine import session as db_session
from quantroute.db.user import User
from quantroute.fleet import parse_fleet
from quantroute.policy.loader import PolicyValidationError, parse_policy

ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"] +
                       [f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
                        for p, c in zip("abcdefgh", "bcdefghi")])  # 10**9 strings once expanded, 400 bytes


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_repeated_failures_lock_the_name_even_for_the_right_password(engine):
    with db_session(engine) as s:
        s.add(User(name="rita", role="reviewer", password_hash=hash_password("right one")))
        s.commit()
    clock = Clock()
    throttle = Throttle(max_failures=3, window=timedelta(minutes=15), lockout=timedelta(minutes=10), clock=clock)
    for _ in range(3):
        with pytest.raises(AuthError, match="wrong password"):
            authenticate(engine, "rita", "guess", throttle=throttle)
    with pytest.raises(AuthError, match="locked, try again in 10 min"):
        authenticate(engine, "rita", "right one", throttle=throttle)
    clock.now += timedelta(minutes=11)
    assert authenticate(engine, "rita", "right one", throttle=throttle).name == "rita"
    with Session(engine) as s:
        actions = [e.action for e in reversed(audit.list_events(s))]
    assert actions == ["auth.login_failed"] * 3 + ["auth.lockout", "auth.login_refused"]


def test_names_that_do_not_exist_lock_the_same_way(engine):
    throttle = Throttle(max_failures=2, clock=Clock())
    for _ in range(2):
        with pytest.raises(AuthError, match="unknown user or wrong password"):
            authenticate(engine, "nobody", "x", throttle=throttle)
    with pytest.raises(AuthError, match="locked"):
        authenticate(engine, "nobody", "x", throttle=throttle)


def test_oidc_needs_a_verified_email():
    assert oidc_email({"email": "ann@example.com", "email_verified": True}) == "ann@example.com"
    assert oidc_email({"email": "ann@example.com"}) is None
    assert oidc_email({"email": "ann@example.com", "email_verified": False}) is None
    assert oidc_email({"email_verified": True}) is None


@pytest.mark.parametrize("load", [
    pytest.param(lambda t: parse_policy(t), id="policy"),
    pytest.param(lambda t: yamlsafe.safe_load(t), id="dashboard-yaml-tab"),
    pytest.param(lambda t: parse_fleet(t), id="fleet"),
])
def test_an_alias_bomb_is_refused_fast(load):
    t0 = time.process_time()
    with pytest.raises((yaml.YAMLError, PolicyValidationError), match="expands to more than"):
        load(ALIAS_BOMB)
    assert time.process_time() - t0 < 5  # CPU seconds; yaml.safe_load would build 10**9 items


def test_depth_size_and_recursion_limits():
    with pytest.raises(yamlsafe.YAMLLimitError, match="deeper than"):
        yamlsafe.safe_load("[" * 100 + "]" * 100)
    with pytest.raises(yamlsafe.YAMLLimitError, match="larger than"):
        yamlsafe.safe_load("x: " + "a" * (yamlsafe.MAX_BYTES + 1))
    with pytest.raises(PolicyValidationError, match="not valid YAML: a recursive alias"):
        parse_policy("a: &a [*a]")
    assert yamlsafe.safe_load("a: &x [1, 2]\nb: *x") == {"a": [1, 2], "b": [1, 2]}
