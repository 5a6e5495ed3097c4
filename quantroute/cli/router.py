"""`quantroute router`: serve the router with uvicorn (httptools + uvloop), in one process or several."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("router")
@click.option("--policies", "policies_dir", type=click.Path(path_type=Path), default=None,
              help="Directory with policy-NNNN.yaml and the 'active' pointer [policies/]")
@click.option("--fleet", "fleet_file", type=click.Path(path_type=Path, exists=True), default=None,
              help="Fleet YAML with the nodes known at start")
@click.option("--host", default=None, help="Bind address [127.0.0.1]")
@click.option("--port", type=int, default=None, help="Port [8080]")
@click.option("--db", "db_url", default=None, help="Database URL [$DATABASE_URL or sqlite:///data/quantroute.db]")
@click.option("--admin-token", default=None, help="Bearer token for /admin/* [$QUANTROUTE_ROUTER_ADMIN_TOKEN]")
@click.option("--no-db", is_flag=True, help="Run without a database (pins in memory, no request log)")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Router processes serving one port (use the host's cores); they share pins and the active "
                   "policy through the database, as replicas do")
@click.option("--log-level", default="warning", show_default=True)
def router(no_db: bool, log_level: str, workers: int, **opts) -> None:
    """Serve the OpenAI-compatible, precision-tiered router."""
    import logging

    from quantroute.router.settings import RouterSettings
    from quantroute.router.workers import LOG_FORMAT, WorkersNeedDatabase, serve

    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT)
    settings = RouterSettings(**{k: v for k, v in opts.items() if v is not None})
    click.echo(f"quantroute router on http://{settings.host}:{settings.port} "
               f"(policies {settings.policies_dir}, fleet {settings.fleet_file or '-'}, workers {workers})", err=True)
    from quantroute.db.schema import SchemaMismatchError

    try:
        serve(settings, workers=workers, use_db=not no_db, log_level=log_level)
    except WorkersNeedDatabase as e:
        raise click.UsageError(str(e)) from None
    except SchemaMismatchError as e:
        raise click.ClickException(str(e)) from None
