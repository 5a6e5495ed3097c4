"""`quantroute tenant set|list`: a tenant's tier floor, priority and rate limits, enforced by the router for
every key of the tenant. Changes are made as an authenticated operator and audited under that name."""

from __future__ import annotations

import sys

import click


def _engine(db_url: str | None):
    from quantroute.cli.database import open_engine

    return open_engine(db_url)


@click.group()
def tenant() -> None:
    """Tenants: the tier floor, priority and rate limits of all of a tenant's client keys."""


@tenant.command("set")
@click.argument("name")
@click.option("--tier-floor", default=None, help="never serve below this tier: fp16, fp8, int8 or int4")
@click.option("--no-floor", is_flag=True, help="remove the floor (the policy decides alone)")
@click.option("--priority", type=int, default=None, help="1-10; under load a router sheds low priorities first")
@click.option("--rpm", type=int, default=None, help="requests per minute, all the tenant's keys together")
@click.option("--tpm", type=int, default=None, help="tokens per minute (prompt + completion), all keys together")
@click.option("--no-limits", is_flag=True, help="remove both rate limits")
@click.option("--db", "db_url", default=None, help="database URL [$DATABASE_URL or sqlite:///data/quantroute.db]")
def set_cmd(name: str, tier_floor: str | None, no_floor: bool, priority: int | None, rpm: int | None,
            tpm: int | None, no_limits: bool, db_url: str | None) -> None:
    """Create tenant NAME or change the settings given."""
    from quantroute.auth import PermissionDenied
    from quantroute.cli.identity import acting_user
    from quantroute.tenants import set_tenant

    engine = _engine(db_url)
    try:
        row = set_tenant(engine, actor=acting_user(engine), name=name, tier_floor=tier_floor, clear_floor=no_floor,
                         priority=priority, rpm=rpm, tpm=tpm, clear_limits=no_limits)
    except (PermissionDenied, ValueError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo(f"tenant {row.name}: floor {row.tier_floor or '-'}, priority {row.priority}, "
               f"rpm {row.rpm or '-'}, tpm {row.tpm or '-'}")


@tenant.command("list")
@click.option("--db", "db_url", default=None)
def list_cmd(db_url: str | None) -> None:
    """Tenants and their settings."""
    from quantroute.tenants import tenants

    rows = tenants(_engine(db_url))
    if not rows:
        click.echo("no tenants; `quantroute key create --tenant NAME` creates one with its first key")
    for t in rows:
        click.echo(f"{t.name:<20} floor {t.tier_floor or '-':<5} priority {t.priority:<3} rpm {t.rpm or '-'!s:<7} "
                   f"tpm {t.tpm or '-'}")
