"""Who the CLI acts as: an authenticated user, never a name typed on the command line.

A personal access token (`quantroute user token NAME`) from $QUANTROUTE_TOKEN or a file given by
$QUANTROUTE_TOKEN_FILE, or else $QUANTROUTE_USER with a password from $QUANTROUTE_PASSWORD or a hidden prompt.
The services (policy store, rollout service) check that user's stored role themselves."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import click
from sqlalchemy.engine import Engine

HOW = ("the CLI acts as a user: set QUANTROUTE_TOKEN (from `quantroute user token NAME`) or "
       "QUANTROUTE_TOKEN_FILE, or QUANTROUTE_USER (the password is prompted, or read from QUANTROUTE_PASSWORD)")


def acting_user(engine: Engine) -> str:
    """The name of the authenticated user; a click error (exit 2) that says how to log in otherwise."""
    from quantroute.auth import AuthError, authenticate, authenticate_token

    token = os.environ.get("QUANTROUTE_TOKEN", "").strip()
    token_file = os.environ.get("QUANTROUTE_TOKEN_FILE", "").strip()
    if not token and token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise click.UsageError(f"QUANTROUTE_TOKEN_FILE: cannot read {token_file}: {e.strerror}") from None
    try:
        if token:
            return authenticate_token(engine, token).name
        name = os.environ.get("QUANTROUTE_USER", "").strip()
        if not name:
            raise click.UsageError(HOW)
        password = os.environ.get("QUANTROUTE_PASSWORD")
        if password is None:
            password = click.prompt(f"password for {name}", hide_input=True, err=True)
        return authenticate(engine, name, password).name
    except AuthError as e:
        raise click.UsageError(f"login failed: {e}") from None


def parse_expiry(value: str | None, *, option: str = "--expires") -> datetime | None:
    """An expiry given on the command line (a date or date and time, UTC when no zone is given)."""
    from quantroute.clock import aware

    if value is None:
        return None
    try:
        return aware(datetime.fromisoformat(value))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date; give YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)",
                                 param_hint=option) from None
