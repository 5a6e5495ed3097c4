"""Policy reload under faults: regexes that only fail joined are refused at validation (one compile path); a
reload that crashes does not kill the watcher; a DB-triggered reload that fails is retried with backoff; a
router whose DB-active version cannot load starts on the newest loadable activated version and says so."""

from __future__ import annotations

import httpx
import pytest
import yaml
from sqlmodel import Session

from quantroute.classify import compile_policy
from quantroute.db.engine import init_db, make_engine
from quantroute.db.policy_state import PolicyActivation
from quantroute.policy.loader import PolicyValidationError, parse_policy
from tests.conftest import wait_until
from tests.router.conftest import TOLERANT, activate_pointer, admin, chat, policy_data, router_at, write_policy

JOINED_ONLY = [["(?i)json", "yaml"], ["(?P<w>code)", "(?P<w>python)"]]


def with_regex(version: int, patterns: list[str]) -> dict:
    data = policy_data(version)
    data["rules"][0]["when"] = {"keywords": {"regex": patterns}}
    return data


@pytest.mark.parametrize("patterns", JOINED_ONLY)
def test_patterns_valid_alone_but_not_joined_are_refused_at_validation(patterns):
    with pytest.raises(PolicyValidationError) as e:
        parse_policy(yaml.safe_dump(with_regex(2, patterns)))
    assert "rules[0].when.keywords.regex" in str(e.value) and "together" in str(e.value)


def test_whatever_validates_compiles():
    policy = parse_policy(yaml.safe_dump(with_regex(2, ["(?i:json)", "(?P<a>code)", "yaml"])))
    assert compile_policy(policy) is not None


def test_a_reload_that_crashes_leaves_the_watcher_running(make_settings, policies, monkeypatch):
    """Any exception while building a version (not only validation errors) is a failed reload, not a dead task."""
    import quantroute.router.path.active_policy as reload_mod

    real = reload_mod.ActivePolicy.build

    def explode(policy):
        if policy.version == 2:
            raise RuntimeError("boom while compiling")
        return real(policy)

    monkeypatch.setattr(reload_mod.ActivePolicy, "build", staticmethod(explode))
    with router_at(make_settings(policy_poll_s=60)) as (url, app):
        write_policy(policies, 2)
        wait_until(lambda: app.holder.failures >= 1, what="the failed reload", timeout=15)
        write_policy(policies, 3)
        wait_until(lambda: app.holder.current.version == 3, what="version 3 after the crash", timeout=15)
        assert chat(url, TOLERANT).headers["x-quantroute-policy-version"] == "3"


def activate_in_db(db_url: str, version: int, previous: int | None = None) -> None:
    eng = make_engine(db_url)
    init_db(eng)
    with Session(eng) as s:
        s.add(PolicyActivation(version=version, previous=previous, by="test"))
        s.commit()
    eng.dispose()


def test_db_triggered_reload_is_retried_until_the_file_arrives(make_settings, policies):
    """Another host activated version 2 before its file reached this host: the router retries, then loads it."""
    settings = make_settings(watch_pointer=False, policy_poll_s=0.1)
    activate_in_db(settings.db_url, 1)
    with router_at(settings) as (url, app):
        activate_in_db(settings.db_url, 2, previous=1)
        wait_until(lambda: app.holder.failures >= 1, what="the failed reload of version 2", timeout=15)
        write_policy(policies, 2, activate=False)  # the file arrives later
        wait_until(lambda: app.holder.current.version == 2, what="version 2 once its file is here", timeout=15)
        assert admin(url).get("/admin/policy").json()["version"] == 2


def test_start_on_newest_loadable_version_when_the_active_one_cannot_load(make_settings, policies):
    settings = make_settings(watch_pointer=False)
    write_policy(policies, 2)
    (policies / "policy-0003.yaml").write_text("version: 3\ntiers: []\n")  # invalid
    activate_in_db(settings.db_url, 1)
    activate_in_db(settings.db_url, 2, previous=1)
    activate_in_db(settings.db_url, 3, previous=2)
    activate_pointer(policies, 3)
    with router_at(settings) as (url, app):
        view = admin(url).get("/admin/policy").json()
        assert view["version"] == 2 and view["wanted_version"] == 3 and view["last_error_version"] == 3
        assert view["reload_failures"] >= 1 and "policy-0003.yaml" in view["last_error"]
        assert chat(url, TOLERANT).headers["x-quantroute-policy-version"] == "2"
        assert "quantroute_policy_reload_failures_total 0.0" not in httpx.get(url + "/metrics").text
