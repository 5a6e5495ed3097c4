"""`quantroute dashboard`: run the Streamlit dashboard that ships in the wheel (no checkout needed)."""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec

import click

# option -> the dashboard setting it fills (dashboard/settings.py reads QUANTROUTE_DASHBOARD_* variables)
SETTING_OPTIONS = {"db_url": "DB_URL", "policies_dir": "POLICIES_DIR", "router_url": "ROUTER_URL",
                   "admin_token": "ADMIN_TOKEN"}


def app_path() -> str:
    """The installed dashboard entry script, wherever the package lives."""
    spec = find_spec("dashboard.app")
    if spec is None or spec.origin is None:
        raise click.ClickException("the dashboard package is not installed alongside quantroute")
    return spec.origin


@click.command("dashboard")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address")
@click.option("--port", type=click.IntRange(1, 65535), default=8501, show_default=True)
@click.option("--db", "db_url", default=None, help="Database URL [$QUANTROUTE_DASHBOARD_DB_URL, $DATABASE_URL]")
@click.option("--policies", "policies_dir", default=None, help="Policy directory [$QUANTROUTE_DASHBOARD_POLICIES_DIR]")
@click.option("--router-url", default=None,
              help="Router admin URL(s), comma-separated replicas [$QUANTROUTE_DASHBOARD_ROUTER_URL]")
@click.option("--admin-token", default=None, help="The router's admin token [$QUANTROUTE_DASHBOARD_ADMIN_TOKEN]")
def dashboard(host: str, port: int, **settings: str | None) -> None:
    """Serve the operator dashboard (Streamlit), headless."""
    env = dict(os.environ)
    for option, name in SETTING_OPTIONS.items():
        if settings.get(option) is not None:
            env[f"QUANTROUTE_DASHBOARD_{name}"] = str(settings[option])
    args = [sys.executable, "-m", "streamlit", "run", app_path(), "--server.headless", "true",
            "--server.address", host, "--server.port", str(port), "--browser.gatherUsageStats", "false"]
    click.echo(f"quantroute dashboard on http://{host}:{port}", err=True)
    # exec: signals (Ctrl-C, a container's SIGTERM) reach Streamlit directly.
    os.execvpe(args[0], args, env)
