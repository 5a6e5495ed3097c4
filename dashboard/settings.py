"""Dashboard settings: one pydantic-settings class, from `QUANTROUTE_DASHBOARD_*` environment variables
(`make demo` sets them; every one is listed in docs/reference/settings.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from quantroute.catalog import DATA_DIR


class DashboardSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="QUANTROUTE_DASHBOARD_", extra="ignore", frozen=True)

    db_url: str | None = Field(default=None, description="SQLAlchemy URL; default $DATABASE_URL or data/quantroute.db")
    policies_dir: Path = Path("policies")
    router_url: str | None = Field(default=None, description=(
        "Base URL of the router's admin API, e.g. http://127.0.0.1:8080; replicas comma-separated (reads merge "
        "their views, an unpin reaches every replica's cache)"))
    admin_token: str | None = Field(default=None, description="The router's admin bearer token")
    fleet_file: Path | None = Field(default=None, description=(
        "The router's fleet file (hardware, formats and batch limits of the nodes): the Policy page's Tune "
        "action sizes the fleet's capacity from it"))
    eval_suite: Path = DATA_DIR / "evals" / "smoke.jsonl"  # packaged, so an installed dashboard finds it
    eval_runs_dir: Path = Path("data/evals/runs")
    cache_ttl_s: float = Field(default=5.0, gt=0, description="How long query results are reused")
    tier_prices: dict[str, float] = Field(
        default={"fp16": 1.0, "fp8": 0.6, "int8": 0.55, "int4": 0.35}, description=(
            "Relative price of a token at each tier (fp16 = 1): the Tenants page prices each tenant's usage "
            "as served and as it would have cost all on FP16. JSON, e.g. "
            "'{\"fp16\": 1, \"fp8\": 0.6, \"int8\": 0.55, \"int4\": 0.35}'"))
