"""`quantroute user add|list|set-role|set-password`: dashboard users and their roles."""

from __future__ import annotations

import sys

import click

ROLES = ("operator", "reviewer", "analyst")


def _engine(db_url: str | None):
    from quantroute.cli.database import open_engine

    return open_engine(db_url)


@click.group()
def user() -> None:
    """Dashboard users (operator, reviewer, analyst)."""


@user.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True,
              help="operator: drafts, canary steps, rollback; reviewer: approvals; analyst: read, run evals")
@click.option("--password", default=None, help="prompted (hidden, twice) when absent")
@click.option("--db", "db_url", default=None, help="database URL [$DATABASE_URL or sqlite:///data/quantroute.db]")
def add(name: str, role: str, password: str | None, db_url: str | None) -> None:
    """Create a user NAME with a role and a password."""
    from quantroute.auth import hash_password
    from quantroute.db import audit
    from quantroute.db.engine import session
    from quantroute.db.user import User, create_user, get_user

    if password is None:
        password = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    if not password:
        click.echo("error: --password must not be empty", err=True)
        sys.exit(2)
    engine = _engine(db_url)
    with session(engine) as s:
        if get_user(session=s, name=name) is not None:
            click.echo(f"error: user {name!r} exists; use 'quantroute user set-role' or 'set-password'", err=True)
            sys.exit(1)
        audit.record(s, actor="cli", action="user.add", subject=name, detail={"role": role})
        create_user(session=s, user=User(name=name, role=role, password_hash=hash_password(password)))
    click.echo(f"user {name} added with role {role}")


@user.command("list")
@click.option("--db", "db_url", default=None)
def list_cmd(db_url: str | None) -> None:
    """List users and roles."""
    from quantroute.db.engine import session
    from quantroute.db.user import list_users

    with session(_engine(db_url)) as s:
        users = list_users(session=s)
    if not users:
        click.echo("no users; add one with: quantroute user add NAME --role operator")
    for u in users:
        state = " (disabled)" if u.disabled else ""
        click.echo(f"{u.name:<24} {u.role:<9} created {u.created_at:%Y-%m-%d %H:%M}{state}")


@user.command("set-role")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--db", "db_url", default=None)
def set_role(name: str, role: str, db_url: str | None) -> None:
    """Change a user's role (takes effect on their next action, without logging out)."""
    from quantroute.db import audit
    from quantroute.db.engine import session
    from quantroute.db.user import update_user

    with session(_engine(db_url)) as s:
        try:
            audit.record(s, actor="cli", action="user.set_role", subject=name, detail={"role": role})
            update_user(session=s, name=name, role=role)
        except LookupError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    click.echo(f"user {name} now has role {role}")


@user.command("token")
@click.argument("name")
@click.option("--label", default="", help="what the token is for (shown in the audit trail)")
@click.option("--db", "db_url", default=None)
def token(name: str, label: str, db_url: str | None) -> None:
    """Issue a personal access token for NAME, after NAME's password ($QUANTROUTE_PASSWORD or prompted).
    The CLI then acts as NAME with QUANTROUTE_TOKEN=<token>. Shown once; only its hash is stored."""
    import os

    from quantroute.auth import AuthError, authenticate, issue_token

    engine = _engine(db_url)
    password = os.environ.get("QUANTROUTE_PASSWORD")
    if password is None:
        password = click.prompt(f"password for {name}", hide_input=True, err=True)
    try:
        authenticate(engine, name, password)
        click.echo(issue_token(engine, name, label=label))
    except AuthError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
