"""`quantroute key create|list|revoke`: client API keys for the router (its `client_auth` setting), per tenant.

Every change is made as an authenticated operator (see identity.py) and audited under that name."""

from __future__ import annotations

import sys

import click

DB_OPTION = click.option("--db", "db_url", default=None,
                         help="database URL [$DATABASE_URL or sqlite:///data/quantroute.db]")


def _engine(db_url: str | None):
    from quantroute.cli.database import open_engine

    return open_engine(db_url)


def _run(fn, *args, **kwargs):
    """Call a service; refusals become one line on stderr and exit 1."""
    from quantroute.auth import PermissionDenied

    try:
        return fn(*args, **kwargs)
    except (PermissionDenied, ValueError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


def _acting(engine) -> str:
    from quantroute.cli.identity import acting_user

    return acting_user(engine)


@click.group()
def key() -> None:
    """Client API keys: who may send requests to the router, at which tiers and how fast."""


@key.command("create")
@click.option("--tenant", required=True, help="the tenant the key belongs to (created when new)")
@click.option("--label", default="", help="what the key is for (shown in lists)")
@click.option("--tier-floor", default=None, help="never serve this key below this tier: fp16, fp8, int8 or int4")
@click.option("--rpm", type=int, default=None, help="requests per minute for this key (its tenant's limit applies too)")
@click.option("--tpm", type=int, default=None, help="tokens per minute for this key (prompt + completion)")
@click.option("--expires", default=None, help="last valid moment, YYYY-MM-DD[THH:MM] UTC (default: until revoked)")
@DB_OPTION
def create(tenant: str, label: str, tier_floor: str | None, rpm: int | None, tpm: int | None, expires: str | None,
           db_url: str | None) -> None:
    """Create a key and print it once (only its hash and its prefix are stored)."""
    from quantroute.cli.identity import parse_expiry
    from quantroute.tenants import create_key

    expires_at = parse_expiry(expires)
    engine = _engine(db_url)
    new = _run(create_key, engine, actor=_acting(engine), tenant=tenant, label=label, tier_floor=tier_floor,
               rpm=rpm, tpm=tpm, expires_at=expires_at)
    click.echo(new.key)
    click.echo(f"key {new.row.prefix} for tenant {tenant} created; it is shown only now", err=True)


@key.command("list")
@click.option("--tenant", default=None, help="only this tenant's keys")
@DB_OPTION
def list_cmd(tenant: str | None, db_url: str | None) -> None:
    """Keys (prefix, tenant, label, floor, limits, expiry, state); never the keys themselves."""
    from quantroute.clock import aware, utcnow
    from quantroute.tenants import keys

    rows = keys(_engine(db_url), tenant=tenant)
    if not rows:
        click.echo("no keys; create one with: quantroute key create --tenant NAME")
    now = utcnow()
    for k in rows:
        expires = aware(k.expires_at)
        state = ("revoked" if k.revoked_at else "expired" if expires is not None and expires <= now else "active")
        click.echo(f"{k.prefix:<12} {k.tenant:<16} {k.label or '-':<16} floor {k.tier_floor or '-':<5} "
                   f"rpm {k.rpm or '-'!s:<6} tpm {k.tpm or '-'!s:<8} "
                   f"expires {f'{expires:%Y-%m-%d %H:%M}' if expires else '-':<16} {state}")


@key.command("revoke")
@click.argument("prefix")
@DB_OPTION
def revoke(prefix: str, db_url: str | None) -> None:
    """Revoke the key with PREFIX (as `key list` shows it, or the whole key): every router refuses it within
    its refresh interval (client_keys_refresh_s, 2 s by default)."""
    from quantroute.tenants import revoke_key

    engine = _engine(db_url)
    row = _run(revoke_key, engine, actor=_acting(engine), prefix=prefix)
    click.echo(f"key {row.prefix} of tenant {row.tenant} revoked")
