"""A lifecycle for people, through the real `quantroute` CLI on real databases: only the first user is created
without logging in; after that an authenticated operator manages users, and every audit row names them; a
disabled user or a revoked or expired token is refused at once; the last operator cannot disable or demote
themselves; and a reviewer an author created cannot approve that author's work (four-eyes)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlmodel import select

from quantroute.auth import AuthError, authenticate, authenticate_token, issue_token
from quantroute.cli.main import cli
from quantroute.clock import utcnow
from quantroute.db import audit
from quantroute.db.engine import session as db_session
from quantroute.db.user import UserToken
from quantroute.policy.store import PolicyStore, PolicyStoreError
from tests.conftest import REPO

PW = "correct horse battery"


def run(engine, *args: str, token: str = "", user: str = "", password: str = PW, input: str | None = None):
    env = {"QUANTROUTE_TOKEN": token, "QUANTROUTE_TOKEN_FILE": "", "QUANTROUTE_USER": user,
           "QUANTROUTE_PASSWORD": password}
    return CliRunner().invoke(cli, [*args, "--db", str(engine.url)], env=env, input=input)


def bootstrap(engine, name: str = "olga") -> str:
    """The first operator, and a token to act as them."""
    r = run(engine, "user", "add", name, "--role", "operator", "--password", PW, "--bootstrap")
    assert r.exit_code == 0, r.output
    return issue_token(engine, name)


def audit_rows(engine) -> list[audit.AuditEvent]:
    with db_session(engine) as s:
        return list(reversed(audit.list_events(s)))


def test_only_the_first_user_is_created_without_login_and_every_row_names_the_person(engine):
    nobody = run(engine, "user", "add", "eve", "--role", "reviewer", "--password", "x")
    assert nobody.exit_code == 2 and "QUANTROUTE_TOKEN" in nobody.output  # no users, no login: no way in
    first_analyst = run(engine, "user", "add", "ann", "--role", "analyst", "--password", "x", "--bootstrap")
    assert first_analyst.exit_code == 1 and "first user must be an operator" in first_analyst.output
    olga = bootstrap(engine)
    again = run(engine, "user", "add", "mallory", "--role", "operator", "--password", "x", "--bootstrap")
    assert again.exit_code == 1 and "only the first user" in again.output
    assert run(engine, "user", "add", "ann", "--role", "analyst", "--password", PW, token=olga).exit_code == 0
    ann = issue_token(engine, "ann")
    as_analyst = run(engine, "user", "add", "eve", "--role", "operator", "--password", "x", token=ann)
    assert as_analyst.exit_code == 1 and "user.manage is not allowed for role analyst" in as_analyst.output
    assert run(engine, "user", "set-role", "ann", "--role", "reviewer", token=ann).exit_code == 1
    assert run(engine, "user", "set-role", "ann", "--role", "reviewer", token=olga).exit_code == 0
    by_password = run(engine, "user", "add", "rex", "--role", "reviewer", "--password", PW, user="olga")
    assert by_password.exit_code == 0, by_password.output
    rows = [(e.actor, e.action, e.subject) for e in audit_rows(engine) if e.action.startswith("user.")
            and e.action != "user.token"]
    assert rows == [("olga", "user.bootstrap", "olga"), ("olga", "user.add", "ann"),
                    ("olga", "user.set_role", "ann"), ("olga", "user.add", "rex")]
    assert all(e.actor != "cli" for e in audit_rows(engine))


def test_a_disabled_user_and_a_revoked_or_expired_token_are_refused_at_once(engine):
    olga = bootstrap(engine)
    assert run(engine, "user", "add", "oscar", "--role", "operator", "--password", PW, token=olga).exit_code == 0
    oscar = issue_token(engine, "oscar", label="laptop")
    assert run(engine, "user", "token", "list", token=oscar).exit_code == 0
    assert run(engine, "user", "disable", "oscar", token=olga).exit_code == 0
    refused = run(engine, "user", "token", "list", token=oscar)
    assert refused.exit_code == 2 and "login failed" in refused.output
    with pytest.raises(AuthError):
        authenticate(engine, "oscar", PW)  # the dashboard's login, too
    assert run(engine, "user", "enable", "oscar", token=olga).exit_code == 0
    listed = run(engine, "user", "token", "list", token=oscar)
    assert listed.exit_code == 0 and "laptop" in listed.output and "active" in listed.output
    with db_session(engine) as s:
        token_id = s.exec(select(UserToken.id).where(UserToken.user_name == "oscar")).one()
    others = run(engine, "user", "token", "list", "olga", token=oscar)  # an operator may list anyone's
    assert others.exit_code == 0
    revoked = run(engine, "user", "token", "revoke", str(token_id), token=olga)
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    assert run(engine, "user", "token", "list", token=oscar).exit_code == 2
    twice = run(engine, "user", "token", "revoke", str(token_id), token=olga)
    assert twice.exit_code == 1 and "already revoked" in twice.output
    # a token with an expiry works until then, and not after
    past = run(engine, "user", "token", "oscar", "--expires", "2001-01-01")
    assert past.exit_code == 1 and "in the past" in past.output
    soon = run(engine, "user", "token", "oscar", "--expires", (utcnow() + timedelta(days=1)).date().isoformat())
    assert soon.exit_code == 0, soon.output
    token = soon.output.strip()
    assert authenticate_token(engine, token).name == "oscar"
    with db_session(engine) as s:
        row = s.exec(select(UserToken).where(UserToken.user_name == "oscar", UserToken.revoked.is_(False))).one()
        row.expires_at = utcnow() - timedelta(seconds=1)
        s.add(row)
        s.commit()
    with pytest.raises(AuthError, match="expired"):
        authenticate_token(engine, token)
    bad_date = run(engine, "user", "token", "oscar", "--expires", "next tuesday")
    assert bad_date.exit_code == 2 and "--expires" in bad_date.output


def test_the_last_operator_cannot_disable_or_demote_themselves(engine):
    olga = bootstrap(engine)
    alone = run(engine, "user", "disable", "olga", token=olga)
    assert alone.exit_code == 1 and "you are the last enabled operator" in alone.output
    demote = run(engine, "user", "set-role", "olga", "--role", "reviewer", token=olga)
    assert demote.exit_code == 1 and "last enabled operator" in demote.output
    assert run(engine, "user", "add", "oscar", "--role", "operator", "--password", PW, token=olga).exit_code == 0
    assert run(engine, "user", "disable", "olga", token=olga).exit_code == 0  # with another operator: fine
    assert run(engine, "user", "list", token=olga).exit_code == 0  # reading needs no login
    assert run(engine, "user", "token", "list", token=olga).exit_code == 2  # but olga is refused now


def test_four_eyes_holds_against_a_reviewer_the_author_created(tmp_path, engine):
    olga = bootstrap(engine)
    d = tmp_path / "policies"
    d.mkdir()
    (d / "policy-0001.yaml").write_text((REPO / "policies" / "policy-0001.yaml").read_text())
    store = PolicyStore(d, engine)
    # olga creates a reviewer whose password she sets, then writes a version and approves it as them
    assert run(engine, "user", "add", "rex2", "--role", "reviewer", "--password", PW, token=olga).exit_code == 0
    store.new(parent=1, author="olga", message="tighter", policy=store.load(1))
    rex2 = issue_token(engine, "rex2")
    # changing the password as rex2 (olga knows it) changes nothing
    assert run(engine, "user", "set-password", "rex2", "--new-password", "new one", token=rex2).exit_code == 0
    res = CliRunner().invoke(cli, ["policy", "approve", "2", "--policies", str(d), "--db", str(engine.url)],
                             env={"QUANTROUTE_TOKEN": rex2, "QUANTROUTE_USER": ""})
    assert res.exit_code == 1 and "olga wrote version 2 and set a password of rex2's" in res.output
    assert not store.is_approved(2)
    # nor through a second operator olga made, who makes the reviewer
    assert run(engine, "user", "add", "oscar", "--role", "operator", "--password", PW, token=olga).exit_code == 0
    oscar = issue_token(engine, "oscar")
    assert run(engine, "user", "add", "rex3", "--role", "reviewer", "--password", PW, token=oscar).exit_code == 0
    with pytest.raises(PolicyStoreError, match="olga wrote version 2"):
        store.approve(2, by="rex3")
    # a reviewer with no password anyone else knows (single sign-on) approves
    assert run(engine, "user", "add", "rita@example.com", "--role", "reviewer", "--sso", token=olga).exit_code == 0
    store.approve(2, by="rita@example.com")
    assert store.is_approved(2)
