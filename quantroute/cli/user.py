"""`quantroute user ...`: dashboard and CLI users, their roles, their lifecycle and their access tokens.

Every change is made as an authenticated operator (QUANTROUTE_TOKEN or QUANTROUTE_USER, see identity.py) and
audited under that name; only the very first user is created without one (`user add NAME --role operator
--bootstrap`, refused once any user exists)."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

ROLES = ("operator", "reviewer", "analyst")


def _engine(db_url: str | None):
    from quantroute.cli.database import open_engine

    return open_engine(db_url)


def _fail(e: Exception, code: int = 1) -> NoReturn:
    click.echo(f"error: {e}", err=True)
    sys.exit(code)


def _run(fn, *args, **kwargs):
    """Call a service; refusals (permission, rule, unknown name) become one line on stderr and exit 1."""
    from quantroute.auth import AuthError, PermissionDenied, UserAdminError

    try:
        return fn(*args, **kwargs)
    except (PermissionDenied, UserAdminError, AuthError, ValueError) as e:
        _fail(e)


def _acting(engine) -> str:
    from quantroute.cli.identity import acting_user

    return acting_user(engine)


def _new_password(name: str, password: str | None) -> str:
    if password is None:
        password = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True, err=True)
    if not password:
        _fail(ValueError("--password must not be empty"), 2)
    return password


DB_OPTION = click.option("--db", "db_url", default=None,
                         help="database URL [$DATABASE_URL or sqlite:///data/quantroute.db]")


@click.group()
def user() -> None:
    """Dashboard and CLI users (operator, reviewer, analyst)."""


@user.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True,
              help="operator: drafts, canary steps, rollback, users, keys; reviewer: approvals; analyst: read, evals")
@click.option("--password", default=None, help="prompted (hidden, twice) when absent")
@click.option("--sso", is_flag=True, help="no password: NAME (their e-mail) logs in to the dashboard by single "
              "sign-on only")
@click.option("--bootstrap", is_flag=True,
              help="create the first user (an operator) without logging in; refused once any user exists")
@DB_OPTION
def add(name: str, role: str, password: str | None, sso: bool, bootstrap: bool, db_url: str | None) -> None:
    """Create a user NAME with a role, as an operator (or the first one, with --bootstrap). The operator who
    sets NAME's password could act as NAME: NAME never approves that operator's versions or rollouts
    (single-sign-on users have no password anyone else knows)."""
    from quantroute.auth import add_user

    engine = _engine(db_url)
    actor = None if bootstrap else _acting(engine)
    _run(add_user, engine, actor=actor, name=name, role=role,
         password=None if sso else _new_password(name, password))
    click.echo(f"user {name} added with role {role}")


@user.command("list")
@DB_OPTION
def list_cmd(db_url: str | None) -> None:
    """List users, roles and state."""
    from quantroute.db.engine import session
    from quantroute.db.user import list_users

    with session(_engine(db_url)) as s:
        users = list_users(session=s)
    if not users:
        click.echo("no users; create the first operator with: quantroute user add NAME --role operator --bootstrap")
    for u in users:
        state = " (disabled)" if u.disabled else ""
        sponsor = f" (password set by {u.sponsor})" if u.sponsor else " (single sign-on)" if not u.password_hash else ""
        click.echo(f"{u.name:<24} {u.role:<9} created {u.created_at:%Y-%m-%d %H:%M}{state}{sponsor}")


@user.command("set-role")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True)
@DB_OPTION
def set_role(name: str, role: str, db_url: str | None) -> None:
    """Change a user's role (takes effect on their next action, without logging out)."""
    from quantroute.auth import set_role as change

    engine = _engine(db_url)
    _run(change, engine, actor=_acting(engine), name=name, role=role)
    click.echo(f"user {name} now has role {role}")


@user.command("set-password")
@click.argument("name")
@click.option("--new-password", "password", default=None, help="prompted (hidden, twice) when absent")
@DB_OPTION
def set_password(name: str, password: str | None, db_url: str | None) -> None:
    """Set NAME's password: your own (as NAME), or another's as an operator (who then counts as NAME for
    four-eyes approvals)."""
    from quantroute.auth import set_password as change

    engine = _engine(db_url)
    actor = _acting(engine)
    _run(change, engine, actor=actor, name=name, password=_new_password(name, password))
    click.echo(f"password of {name} changed")


@user.command("disable")
@click.argument("name")
@DB_OPTION
def disable(name: str, db_url: str | None) -> None:
    """Disable NAME: their password and tokens are refused at once, by the CLI and the dashboard."""
    from quantroute.auth import set_disabled

    engine = _engine(db_url)
    _run(set_disabled, engine, actor=_acting(engine), name=name, disabled=True)
    click.echo(f"user {name} disabled")


@user.command("enable")
@click.argument("name")
@DB_OPTION
def enable(name: str, db_url: str | None) -> None:
    """Enable NAME again (their tokens that are not revoked or expired work again)."""
    from quantroute.auth import set_disabled

    engine = _engine(db_url)
    _run(set_disabled, engine, actor=_acting(engine), name=name, disabled=False)
    click.echo(f"user {name} enabled")


class _TokenGroup(click.Group):
    """`user token NAME` issues a token (as before); `user token list|revoke|issue` are subcommands."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["issue", *args]
        return super().resolve_command(ctx, args)


@user.group("token", cls=_TokenGroup)
def token() -> None:
    """Personal access tokens: `user token NAME` (issue), `user token list`, `user token revoke ID`."""


@token.command("issue")
@click.argument("name")
@click.option("--label", default="", help="what the token is for (shown in lists and the audit trail)")
@click.option("--expires", default=None, help="last valid moment, YYYY-MM-DD[THH:MM] UTC (default: until revoked)")
@DB_OPTION
def issue(name: str, label: str, expires: str | None, db_url: str | None) -> None:
    """Issue a personal access token for NAME, after NAME's password ($QUANTROUTE_PASSWORD or prompted).
    The CLI then acts as NAME with QUANTROUTE_TOKEN=<token>. Shown once; only its hash is stored."""
    import os

    from quantroute.auth import authenticate, issue_token
    from quantroute.cli.identity import parse_expiry

    expires_at = parse_expiry(expires)
    engine = _engine(db_url)
    password = os.environ.get("QUANTROUTE_PASSWORD")
    if password is None:
        password = click.prompt(f"password for {name}", hide_input=True, err=True)
    _run(authenticate, engine, name, password)
    click.echo(_run(issue_token, engine, name, label=label, expires_at=expires_at))


@token.command("list")
@click.argument("name", required=False)
@DB_OPTION
def token_list(name: str | None, db_url: str | None) -> None:
    """Your tokens, or NAME's (as an operator): id, label, created, last used, expiry, state."""
    from quantroute.auth import token_list as tokens
    from quantroute.clock import aware, utcnow

    engine = _engine(db_url)
    rows = _run(tokens, engine, actor=_acting(engine), name=name)
    if not rows:
        click.echo("no tokens")
    now = utcnow()
    for t in rows:
        expires = aware(t.expires_at)
        state = ("revoked" if t.revoked else "expired" if expires is not None and expires <= now else "active")
        used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
        until = f"{expires:%Y-%m-%d %H:%M}" if expires else "-"
        click.echo(f"{t.id:<5} {t.user_name:<16} {t.label or '-':<20} created {t.created_at:%Y-%m-%d %H:%M}  "
                   f"used {used:<16} expires {until:<16} {state}")


@token.command("revoke")
@click.argument("token_id", type=int)
@DB_OPTION
def token_revoke(token_id: int, db_url: str | None) -> None:
    """Revoke token ID (yours, or anyone's as an operator): refused at its next use."""
    from quantroute.auth import revoke_token

    engine = _engine(db_url)
    row = _run(revoke_token, engine, actor=_acting(engine), token_id=token_id)
    click.echo(f"token {token_id} of {row.user_name} revoked")
