"""`quantroute controller`: run the rollout controller (reconciles every unfinished rollout every interval;
one leader among several). Thin: options become `ControllerSettings`, the loop lives in quantroute.controller."""

from __future__ import annotations

import logging
import sys
import time

import click


@click.command()
@click.option("--policies", "policies_dir", default=None, type=click.Path(file_okay=False),
              help="policy versions directory [default: $QUANTROUTE_CONTROLLER_POLICIES_DIR or policies]")
@click.option("--db", "db_url", default=None, help="database URL (default $DATABASE_URL or data/quantroute.db)")
@click.option("--interval", "interval_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="seconds between passes [default: 5]")
@click.option("--router", "routers", multiple=True, envvar="QUANTROUTE_ROUTER_URLS",
              help="router base URL for node health and releasing pins (repeat per replica)")
@click.option("--admin-token", envvar="QUANTROUTE_ROUTER_ADMIN_TOKEN", default=None, help="the routers' admin token")
@click.option("--webhook", "webhooks", multiple=True,
              help="URL that receives rollout notifications as JSON (repeat; Slack-compatible `text`)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="serve Prometheus /metrics on this port (0: any free port)")
@click.option("--metrics-host", default=None, help="address for /metrics [default: 127.0.0.1]")
@click.option("--lock-key", type=int, default=None,
              help="PostgreSQL advisory lock key [default: derived from the database and schema]")
@click.option("--name", default=None, help="this controller in heartbeats and events [default: host:pid]")
@click.option("--fault-after-status-write", type=click.Choice(["exit", "hang"]), default=None, hidden=True)
def controller(**opts) -> None:
    """Reconcile every live rollout every interval: guards, auto-advance after the dwell, rollback after
    failure_limit breaches, traffic made to match the desired state, webhooks. Run one or more; one leads."""
    from pydantic import ValidationError

    from quantroute.controller.loop import run_forever
    from quantroute.controller.settings import ControllerSettings

    given = {k: v for k, v in opts.items() if v not in (None, ())}
    for key in ("routers", "webhooks"):
        if key in given:
            given[key] = list(given[key])
    try:
        settings = ControllerSettings(**given)
    except ValidationError as e:
        for err in e.errors():
            click.echo(f"error: {'.'.join(map(str, err['loc']))}: {err['msg']}", err=True)
        sys.exit(2)
    if settings.routers and not settings.admin_token:
        raise click.UsageError("--router needs --admin-token (or QUANTROUTE_ROUTER_ADMIN_TOKEN)")
    handler = logging.StreamHandler(sys.stdout)
    fmt = logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%S")
    fmt.converter = time.gmtime  # UTC, like every timestamp in the database
    handler.setFormatter(fmt)
    log = logging.getLogger("quantroute")  # ours only: alembic's INFO lines are not the controller's story
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    from quantroute.db.schema import SchemaMismatchError
    from quantroute.tracing import TracingUnavailable

    try:
        run_forever(settings)
    except (SchemaMismatchError, TracingUnavailable) as e:
        raise click.ClickException(str(e)) from None
