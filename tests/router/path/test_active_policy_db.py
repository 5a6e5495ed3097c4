"""Policy versions live in the database: routers with different policy directories (other hosts) sharing
PostgreSQL load the same versions and follow the same activations; a file edited by hand is never loaded."""

from __future__ import annotations

import httpx
import pytest
import yaml

from quantroute.db.engine import make_engine
from quantroute.policy.loader import parse_policy
from quantroute.policy.store import PolicyStore
from tests.conftest import add_users, wait_until
from tests.router.conftest import TOLERANT, chat, policy_data, router_at, write_policy

pytestmark = pytest.mark.postgres


def served_version(url: str) -> str:
    return chat(url, TOLERANT).headers["x-quantroute-policy-version"]


def wait_version(urls: list[str], version: str, timeout: float = 15) -> None:
    wait_until(lambda: {served_version(u) for u in urls} == {version},
               what=lambda: f"version {version} served by all (served: {({u: served_version(u) for u in urls})})",
               timeout=timeout, interval=0.1)


def test_two_routers_with_different_directories_follow_the_same_activations(make_settings, pg_url, tmp_path):
    dir_a, dir_b, laptop = tmp_path / "host-a", tmp_path / "host-b", tmp_path / "operator"
    write_policy(dir_a, 1, activate=False)  # host A has the version-1 file; host B has nothing
    dir_b.mkdir()
    engine = make_engine(pg_url)
    with router_at(make_settings(policies_dir=dir_a, db_url=pg_url)) as (a, _), \
            router_at(make_settings(policies_dir=dir_b, db_url=pg_url)) as (b, _):
        assert served_version(a) == served_version(b) == "1"
        assert (dir_b / "policy-0001.yaml").read_text() == (dir_a / "policy-0001.yaml").read_text()  # mirrored

        # an operator elsewhere writes version 2 (int8 threshold lowered: "hi" now goes to int8), approves, activates
        add_users(engine, olga="operator", rex="reviewer")  # the store checks the actors' roles itself
        store = PolicyStore(laptop, engine)
        v2 = parse_policy(yaml.safe_dump(policy_data(2, thresholds=[{"min_score": 6, "tier": "fp16"},
                                                                      {"min_score": -5, "tier": "int8"}])))
        assert store.new(parent=1, author="olga", message="int8 floor", policy=v2) == 2
        store.approve(2, by="rex")
        store.activate(2, by="olga")
        wait_version([a, b], "2")
        assert {chat(u, TOLERANT).headers["x-quantroute-tier"] for u in (a, b)} == {"int8"}
        for d in (dir_a, dir_b):
            assert (d / "policy-0002.yaml").read_text() == (laptop / "policy-0002.yaml").read_text()

        # host B's copy of version 2 is edited by hand; a rollback and re-activation load the database's content
        edited = dir_b / "policy-0002.yaml"
        edited.write_text(edited.read_text().replace("min_score: -5", "min_score: 3"))
        store.rollback(by="olga", reason="drill")
        wait_version([a, b], "1")
        store.activate(2, by="olga")
        wait_version([a, b], "2")
        assert chat(b, TOLERANT).headers["x-quantroute-tier"] == "int8"  # not the edited file's int4
        hashes = {httpx.get(f"{u}/admin/policy", headers={"authorization": "Bearer test-admin-token"},
                            timeout=5).json()["content_hash"] for u in (a, b)}
        assert len(hashes) == 1
        assert [d for d in PolicyStore(dir_b, engine).drift() if "edited by hand" in d]
    engine.dispose()

