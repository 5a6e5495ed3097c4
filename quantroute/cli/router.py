"""`quantroute router`: serve the router with uvicorn (httptools + uvloop), in one process or several.

Every field of RouterSettings is a flag here and a `QUANTROUTE_ROUTER_*` variable there, generated from the one
class, so the two cannot drift (the docs' settings reference is generated from the same class)."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import click
from pydantic.fields import FieldInfo

from quantroute.router.settings import RouterSettings

ENV_PREFIX = "QUANTROUTE_ROUTER_"
# Short names the README and scripts have always used; the long --field-name works too.
ALIASES = {"policies_dir": "--policies", "fleet_file": "--fleet", "db_url": "--db"}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _base(annotation):
    """`X | None` -> X."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation


def _option(name: str, info: FieldInfo):
    kind = _base(info.annotation)
    names = [flag(name)] + ([ALIASES[name]] if name in ALIASES else [])
    env = ENV_PREFIX + name.upper()
    help_ = f"{info.description} [${env}; default {_default_text(info)}]"
    if kind is bool:
        return click.option(f"{flag(name)}/--no-{flag(name)[2:]}", name, default=None, help=help_)
    ctype = {int: int, float: float, Path: click.Path(path_type=Path)}.get(kind, str)
    return click.option(*names, name, type=ctype, default=None, help=help_)


def _default_text(info: FieldInfo) -> str:
    d = info.default
    return "unset" if d is None else str(d).lower() if isinstance(d, bool) else str(d)


def settings_options(fn):
    for name, info in reversed(list(RouterSettings.model_fields.items())):
        fn = _option(name, info)(fn)
    return fn


def settings_from(opts: dict) -> RouterSettings:
    """Flags given on the command line win; the rest come from the environment, then the defaults."""
    from pydantic import ValidationError

    try:
        return RouterSettings(**{k: v for k, v in opts.items() if v is not None})
    except ValidationError as e:
        lines = []
        for err in e.errors():
            name = str(err["loc"][0]) if err["loc"] else ""
            lines.append(f"{flag(name)} / ${ENV_PREFIX}{name.upper()}: {err['msg']}")
        raise click.UsageError("; ".join(lines)) from None


@click.command("router")
@settings_options
@click.option("--no-db", is_flag=True, help="Run without a database (pins in memory, no request log)")
def router(no_db: bool, **opts) -> None:
    """Serve the OpenAI-compatible, precision-tiered router, in one process or several."""
    import logging
    import os

    from quantroute.db.schema import SchemaMismatchError
    from quantroute.logs import configure_logging
    from quantroute.router.workers import WorkersNeedDatabase, WorkersNeedRuntimeDir, serve
    from quantroute.tracing import TracingUnavailable, check

    settings = settings_from(opts)
    try:
        check(os.environ)  # each worker builds its own tracer at startup; a bad variable stops the command here
    except TracingUnavailable as e:
        raise click.UsageError(str(e)) from None
    if settings.fleet_file is not None and not settings.fleet_file.is_file():
        raise click.BadParameter(f"{settings.fleet_file} is not a file", param_hint="--fleet")
    configure_logging(settings.log_level, json_lines=settings.log_json)
    started = (f"quantroute router on http://{settings.host}:{settings.port} (policies {settings.policies_dir}, "
               f"fleet {settings.fleet_file or '-'}, workers {settings.workers})")
    if settings.log_json:
        logging.getLogger("quantroute.router").info(started)
    else:
        click.echo(started, err=True)
    try:
        serve(settings, workers=settings.workers, use_db=not no_db, log_level=settings.log_level.lower())
    except (WorkersNeedDatabase, WorkersNeedRuntimeDir) as e:
        raise click.UsageError(str(e)) from None
    except SchemaMismatchError as e:
        raise click.ClickException(str(e)) from None
