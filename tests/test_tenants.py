"""`quantroute key` and `quantroute tenant` through the real CLI on real databases: a key is printed once and
stored only as its hash and prefix, lists never show it, a floor above every deployed tier is refused, bad
limits name the field, and only an operator may change keys or tenants (audited under their name)."""

from __future__ import annotations

from click.testing import CliRunner
from sqlmodel import select

from quantroute.auth import issue_token
from quantroute.cli.main import cli
from quantroute.db import audit
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow
from quantroute.db.tenant import ClientKey, Tenant
from quantroute.tenants import key_hash
from tests.conftest import add_users


def run(engine, *args: str, token: str = ""):
    return CliRunner().invoke(cli, [*args, "--db", str(engine.url)],
                              env={"QUANTROUTE_TOKEN": token, "QUANTROUTE_USER": "", "QUANTROUTE_TOKEN_FILE": ""})


def nodes(engine, *tiers: str) -> None:
    with db_session(engine) as s:
        for t in tiers:
            s.add(NodeRow(key=f"{t}-a", url=f"http://{t}", model="m", deployment=f"m-{t}", tier=t, format=t))
        s.commit()


def test_a_key_is_shown_once_and_listed_by_its_prefix_only(engine):
    add_users(engine, olga="operator", ann="analyst")
    olga = issue_token(engine, "olga")
    made = run(engine, "key", "create", "--tenant", "acme", "--label", "ci", "--rpm", "60", token=olga)
    assert made.exit_code == 0, made.output
    key = made.stdout.strip()
    assert key.startswith("qk_") and len(key) > 40
    with db_session(engine) as s:
        row = s.exec(select(ClientKey)).one()
        assert (row.key_hash, row.prefix, row.tenant, row.rpm, row.created_by) == (key_hash(key), key[:11], "acme",
                                                                                  60, "olga")
        assert s.get(Tenant, "acme") is not None  # made with its first key
    listed = run(engine, "key", "list")
    assert key[:11] in listed.output and key[11:] not in listed.output and "active" in listed.output
    assert run(engine, "key", "revoke", key[:11], token=olga).exit_code == 0
    assert "revoked" in run(engine, "key", "list").output
    again = run(engine, "key", "revoke", key, token=olga)  # the whole key works as well as its prefix
    assert again.exit_code == 1 and "already revoked by olga" in again.output
    unknown = run(engine, "key", "revoke", "qk_nothere", token=olga)
    assert unknown.exit_code == 1 and "no key with prefix" in unknown.output
    with db_session(engine) as s:
        events = [(e.actor, e.action) for e in audit.list_events(s)]
    assert ("olga", "key.create") in events and ("olga", "key.revoke") in events


def test_only_an_operator_manages_keys_and_tenants(engine):
    add_users(engine, olga="operator", ann="analyst")
    ann = issue_token(engine, "ann")
    nobody = run(engine, "key", "create", "--tenant", "acme")
    assert nobody.exit_code == 2 and "QUANTROUTE_TOKEN" in nobody.output
    refused = run(engine, "key", "create", "--tenant", "acme", token=ann)
    assert refused.exit_code == 1 and "key.manage is not allowed for role analyst" in refused.output
    assert run(engine, "tenant", "set", "acme", "--rpm", "5", token=ann).exit_code == 1
    with db_session(engine) as s:
        assert not list(s.exec(select(ClientKey))) and s.get(Tenant, "acme") is None


def test_a_floor_above_every_deployed_tier_and_bad_values_are_refused(engine):
    add_users(engine, olga="operator")
    olga = issue_token(engine, "olga")
    nodes(engine, "int8", "int4")
    too_high = run(engine, "key", "create", "--tenant", "acme", "--tier-floor", "fp16", token=olga)
    assert too_high.exit_code == 1
    assert "--tier-floor fp16 is above every deployed tier (int8, int4)" in too_high.output
    assert run(engine, "tenant", "set", "acme", "--tier-floor", "fp8", token=olga).exit_code == 1
    assert run(engine, "key", "create", "--tenant", "acme", "--tier-floor", "w8a8", token=olga).exit_code == 0
    bad_tier = run(engine, "key", "create", "--tenant", "acme", "--tier-floor", "fp12", token=olga)
    assert bad_tier.exit_code == 1 and "valid tiers: fp16, fp8, int8, int4" in bad_tier.output
    bad_rpm = run(engine, "key", "create", "--tenant", "acme", "--rpm", "0", token=olga)
    assert bad_rpm.exit_code == 1 and "--rpm must be a positive whole number" in bad_rpm.output
    bad_name = run(engine, "key", "create", "--tenant", "a b", token=olga)
    assert bad_name.exit_code == 1 and "letters, digits" in bad_name.output
    past = run(engine, "key", "create", "--tenant", "acme", "--expires", "2001-01-01", token=olga)
    assert past.exit_code == 1 and "in the past" in past.output
    prio = run(engine, "tenant", "set", "acme", "--priority", "11", token=olga)
    assert prio.exit_code == 1 and "--priority must be 1-10" in prio.output
    ok = run(engine, "tenant", "set", "acme", "--tier-floor", "int8", "--priority", "9", "--tpm", "1000", token=olga)
    assert ok.exit_code == 0 and "floor int8, priority 9" in ok.output
    assert "acme" in run(engine, "tenant", "list").output
    cleared = run(engine, "tenant", "set", "acme", "--no-floor", "--no-limits", token=olga)
    assert cleared.exit_code == 0 and "floor -" in cleared.output and "tpm -" in cleared.output
