"""Migrations run once, under a lock; every other process checks the schema revision and refuses a mismatch."""

from __future__ import annotations

import threading
import uuid

import pytest
from alembic import command
from click.testing import CliRunner
from sqlalchemy import inspect, text

from quantroute.cli.main import cli
from quantroute.db.engine import init_db, make_engine, require_schema
from quantroute.db.schema import SchemaMismatchError, alembic_config, code_heads, db_revisions, lock_key, migration_lock
from quantroute.router.app import create_app
from quantroute.router.settings import RouterSettings
from tests.conftest import PG_URL


@pytest.fixture
def fresh(db_url):
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


def test_a_database_without_schema_is_refused_with_the_command_to_run(fresh):
    with pytest.raises(SchemaMismatchError, match="no quantroute schema: run `quantroute db upgrade`"):
        require_schema(fresh)


def test_an_older_schema_is_refused_and_names_what_is_missing(fresh):
    command.upgrade(alembic_config(fresh), "0001_core")
    with pytest.raises(SchemaMismatchError,
                       match=r"older than this quantroute's \(missing: .*0010_policy_version.*\): "
                             r"run `quantroute db upgrade`"):
        require_schema(fresh)


def test_a_newer_schema_is_refused_rather_than_used(fresh):
    init_db(fresh)
    with fresh.begin() as c:  # a later release upgraded the database
        c.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future' "
                       "WHERE version_num = '0800_loadtest'"))
    with pytest.raises(SchemaMismatchError, match="9999_from_the_future, newer than this quantroute knows"):
        require_schema(fresh)


def test_the_current_schema_passes(fresh):
    init_db(fresh)
    assert db_revisions(fresh) == code_heads()
    assert require_schema(fresh) is fresh


def test_concurrent_upgrades_wait_for_each_other(db_url):
    """Replicas' upgrades started together: every one succeeds and the schema is complete, not half applied."""
    engines = [make_engine(db_url) for _ in range(4)]
    barrier, errors = threading.Barrier(len(engines)), []

    def upgrade(eng):
        barrier.wait()
        try:
            init_db(eng)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=upgrade, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert db_revisions(engines[0]) == code_heads()
    assert "request_log" in inspect(engines[0]).get_table_names()
    for e in engines:
        e.dispose()


def test_lock_keys_differ_per_database_and_schema():
    assert lock_key("test", "t_a") != lock_key("test", "t_b")
    assert lock_key("test", "t_a") != lock_key("prod", "t_a")
    assert lock_key("test", "t_a") == lock_key("test", "t_a")


@pytest.mark.postgres
def test_a_held_lock_in_another_schema_does_not_block_an_upgrade(pg_url):
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = make_engine(PG_URL)
    with admin.begin() as c:
        c.execute(text(f'CREATE SCHEMA "{schema}"'))
    a, b = make_engine(pg_url), make_engine(f"{PG_URL}?options=-csearch_path%3D{schema}")
    try:
        done = threading.Event()
        with migration_lock(a):
            t = threading.Thread(target=lambda: (init_db(b), done.set()))
            t.start()
            t.join(120)
            assert done.is_set(), "an upgrade in another schema waited on this schema's lock"
    finally:
        a.dispose()
        b.dispose()
        with admin.begin() as c:
            c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_router_refuses_to_start_on_a_schema_it_was_not_built_for(tmp_path, fresh_sqlite_url):
    sqlite_url = fresh_sqlite_url
    settings = RouterSettings(policies_dir=tmp_path / "policies", db_url=sqlite_url)
    with pytest.raises(SchemaMismatchError, match="quantroute db upgrade"):
        create_app(settings)
    result = CliRunner().invoke(cli, ["router", "--db", sqlite_url, "--policies", str(tmp_path / "policies")])
    assert result.exit_code == 1 and "no quantroute schema" in result.output


def test_cli_commands_refuse_and_db_upgrade_fixes_it(fresh_sqlite_url):
    sqlite_url = fresh_sqlite_url
    runner = CliRunner()
    refused = runner.invoke(cli, ["user", "list", "--db", sqlite_url])
    assert refused.exit_code == 1 and "run `quantroute db upgrade` first" in refused.output
    up = runner.invoke(cli, ["db", "upgrade", "--db", sqlite_url])
    assert up.exit_code == 0 and "schema up to date" in up.output and "0001_core" not in up.output
    assert runner.invoke(cli, ["user", "list", "--db", sqlite_url]).exit_code == 0
