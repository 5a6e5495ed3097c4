"""Every action is taken by an authenticated person whose stored role allows it, whoever calls the service
(CLI or dashboard); four-eyes holds in the service; emergency activation needs an operator and a reason;
canary traffic moves only through the rollout service."""

from __future__ import annotations

import shutil

import pytest
import yaml
from click.testing import CliRunner
from sqlmodel import Session, select

from quantroute.auth import AuthError, PermissionDenied, authenticate_token, issue_token
from quantroute.cli.main import cli
from quantroute.db import audit
from quantroute.db.engine import session as db_session
from quantroute.db.user import UserToken, update_user
from quantroute.policy.loader import PolicyValidationError, parse_policy
from quantroute.policy.store import PolicyStore, PolicyStoreError
from quantroute.rollout.service import RolloutService
from tests.conftest import REPO, add_users
from tests.rollout.conftest import CAND, MODEL, policy_data, write_v1

PEOPLE = {"olga": "operator", "oscar": "operator", "rex": "reviewer", "ann": "analyst"}


@pytest.fixture
def store(tmp_path, engine):
    add_users(engine, **PEOPLE)
    d = tmp_path / "policies"
    d.mkdir()
    (d / "policy-0001.yaml").write_text((REPO / "policies" / "policy-0001.yaml").read_text())
    return PolicyStore(d, engine)


def cli_run(store: PolicyStore, *args: str, token: str | None = None, **env: str):
    env = {"QUANTROUTE_TOKEN": token or "", "QUANTROUTE_USER": "", **env}
    return CliRunner().invoke(cli, [*args, "--policies", str(store.dir), "--db", str(store.engine.url)], env=env)


def test_the_cli_takes_no_free_text_identity(store):
    # The old CLI wrote and approved a version as two names typed by one person.
    as_author = cli_run(store, "policy", "new", "-m", "x", "--author", "olga")
    assert as_author.exit_code == 2 and "--author" in as_author.output
    nobody = cli_run(store, "policy", "new", "-m", "x")
    assert nobody.exit_code == 2 and "QUANTROUTE_TOKEN" in nobody.output
    assert cli_run(store, "policy", "approve", "1", "--by", "rex").exit_code == 2
    assert store.versions() == [1]


def test_one_person_cannot_author_and_approve(store):
    olga = issue_token(store.engine, "olga")
    assert cli_run(store, "policy", "new", "-m", "tighter", token=olga).exit_code == 0
    mine = cli_run(store, "policy", "approve", "2", token=olga)
    assert mine.exit_code == 1 and "not allowed" in mine.output
    with db_session(store.engine) as s:  # even after becoming a reviewer: the author never approves
        update_user(session=s, name="olga", role="reviewer")
    again = cli_run(store, "policy", "approve", "2", token=olga)
    assert again.exit_code == 1 and "a different reviewer must approve" in again.output
    assert not store.is_approved(2)


def test_services_check_the_role_whoever_calls_them(store):
    with pytest.raises(PermissionDenied, match="policy.new is not allowed for role analyst"):
        store.new(parent=1, author="ann", message="x", policy=store.load(1))
    with pytest.raises(PermissionDenied, match="unknown or disabled user 'mallory'"):
        store.rollback(by="mallory")
    store.new(parent=1, author="olga", message="x", policy=store.load(1))
    with pytest.raises(PermissionDenied, match="policy.approve is not allowed for role analyst"):
        store.approve(2, by="ann")


def test_emergency_activation_needs_an_operator_and_a_reason_and_is_flagged(store):
    store.new(parent=1, author="olga", message="hotfix", policy=store.load(1))
    with pytest.raises(PermissionDenied, match="policy.emergency is not allowed for role reviewer"):
        store.activate(2, by="rex", emergency=True, reason="nodes down")
    with pytest.raises(PolicyStoreError, match="needs a reason"):
        store.activate(2, by="olga", emergency=True)
    olga = issue_token(store.engine, "olga")
    res = cli_run(store, "policy", "activate", "2", "--emergency", "--reason", "INT4 nodes down", token=olga)
    assert res.exit_code == 0, res.output
    with Session(store.engine) as s:
        last = audit.list_events(s)[0]
    assert (last.actor, last.action, last.detail) == ("olga", "policy.emergency",
                                                      {"reason": "INT4 nodes down", "emergency": True})


def test_a_person_written_version_cannot_move_canary_traffic(tmp_path, engine):
    add_users(engine, **PEOPLE)
    write_v1(tmp_path / "p", policy_data(percent=0))
    store = PolicyStore(tmp_path / "p", engine)
    data = policy_data(percent=50)
    with pytest.raises(PolicyValidationError, match=r"canaries\[0\].percent: is 50 but the active canary state"):
        store.new(parent=1, author="olga", message="skip the rollout", policy=parse_policy(yaml.safe_dump(data)))
    assert store.versions() == [1]
    # keeping the active canary state is fine
    assert store.new(parent=1, author="olga", message="ok", policy=parse_policy(yaml.safe_dump(policy_data()))) == 2


def test_rollout_actions_check_roles_in_the_service(tmp_path, engine):
    add_users(engine, **PEOPLE)
    write_v1(tmp_path / "p", policy_data())
    svc = RolloutService(PolicyStore(tmp_path / "p", engine))
    with pytest.raises(PermissionDenied, match="rollout.start is not allowed for role analyst"):
        svc.start(MODEL, candidate=CAND, by="ann")
    with pytest.raises(PermissionDenied, match="unknown or disabled user 'rollout-guard'"):
        svc.rollback(MODEL, by="rollout-guard")


def test_tokens_are_stored_hashed_and_can_be_revoked(store):
    token = issue_token(store.engine, "olga", label="laptop")
    assert authenticate_token(store.engine, token).name == "olga"
    with db_session(store.engine) as s:
        row = s.exec(select(UserToken)).one()
        assert token not in row.token_hash and len(row.token_hash) == 64
        row.revoked = True
        s.add(row)
        s.commit()
    with pytest.raises(AuthError):
        authenticate_token(store.engine, token)
    with pytest.raises(AuthError):
        authenticate_token(store.engine, "qrt_forged")


def test_user_token_command_needs_the_users_password(store, tmp_path):
    from quantroute.auth import hash_password

    with db_session(store.engine) as s:
        update_user(session=s, name="olga", password_hash=hash_password("correct horse"))
    db = ["--db", str(store.engine.url)]
    bad = CliRunner().invoke(cli, ["user", "token", "olga", *db], env={"QUANTROUTE_PASSWORD": "guess"})
    assert bad.exit_code == 1 and "wrong password" in bad.output
    ok = CliRunner().invoke(cli, ["user", "token", "olga", *db], env={"QUANTROUTE_PASSWORD": "correct horse"})
    assert ok.exit_code == 0 and ok.output.startswith("qrt_")
    assert authenticate_token(store.engine, ok.output.strip()).name == "olga"
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)
