"""Passwords (scrypt, per-user salt), the permission table and the `quantroute user` CLI."""

from __future__ import annotations

from click.testing import CliRunner

from quantroute.auth import allowed, authenticate, hash_password, verify_password
from quantroute.cli.user import user


def test_hash_is_salted_and_verifies():
    a, b = hash_password("s3cret"), hash_password("s3cret")
    assert a != b and a.startswith("scrypt$")
    assert verify_password("s3cret", a) and verify_password("s3cret", b)
    assert not verify_password("s3cret!", a)
    assert not verify_password("s3cret", "garbage")


def test_permissions():
    assert allowed("operator", "policy.new") and not allowed("reviewer", "policy.new")
    assert allowed("reviewer", "policy.approve") and not allowed("operator", "policy.approve")
    assert allowed("analyst", "eval.run") and not allowed("analyst", "session.unpin")
    assert not allowed("operator", "no.such.action")


def test_user_cli_add_list_and_login(sqlite_url):
    from quantroute.db.engine import make_engine

    first = CliRunner().invoke(user, ["add", "otto", "--role", "operator", "--password", "op", "--bootstrap",
                                      "--db", sqlite_url])
    assert first.exit_code == 0, first.output
    as_otto = {"QUANTROUTE_USER": "otto", "QUANTROUTE_PASSWORD": "op", "QUANTROUTE_TOKEN": ""}
    r = CliRunner().invoke(user, ["add", "zoe", "--role", "reviewer", "--db", sqlite_url], input="pw1\npw1\n",
                           env=as_otto)
    assert r.exit_code == 0, r.output
    again = CliRunner().invoke(user, ["add", "zoe", "--role", "analyst", "--password", "x", "--db", sqlite_url],
                               env=as_otto)
    assert again.exit_code == 1 and "exists" in again.output
    listed = CliRunner().invoke(user, ["list", "--db", sqlite_url])
    assert "zoe" in listed.output and "reviewer" in listed.output
    assert authenticate(make_engine(sqlite_url), "zoe", "pw1").role == "reviewer"
