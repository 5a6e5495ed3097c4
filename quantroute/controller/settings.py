"""Controller settings: one pydantic-settings class from `QUANTROUTE_CONTROLLER_*` environment variables, the
CLI's options override them (`quantroute controller --help`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ControllerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="QUANTROUTE_CONTROLLER_", extra="ignore", frozen=True)

    db_url: str | None = Field(default=None, description="SQLAlchemy URL; default $DATABASE_URL or data/quantroute.db")
    policies_dir: Path = Path("policies")
    interval_s: float = Field(default=5.0, gt=0, description="seconds between passes")
    routers: list[str] = Field(default_factory=list, description="router base URLs (node health, releasing pins)")
    admin_token: str | None = None
    name: str | None = Field(default=None, description="this process in heartbeats and events; default host:pid")
    lock_key: int | None = Field(default=None, description=(
        "PostgreSQL advisory lock key; default derived from the database and schema, so controllers of other "
        "schemas on the same server never contend"))
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="serve /metrics on this port")
    metrics_host: str = "127.0.0.1"
    webhooks: list[str] = Field(default_factory=list, description=(
        "URLs that receive rollout notifications as JSON (Slack-compatible `text` plus structured fields)"))
    webhook_timeout_s: float = Field(default=5.0, gt=0)
    webhook_max_attempts: int = Field(default=6, ge=1, description="tries before a delivery is given up")
    webhook_backoff_s: float = Field(default=2.0, gt=0, description="first retry delay; doubles per try")
    webhook_max_age_s: float = Field(default=3600.0, gt=0, description="older notifications are not sent")
    # Fault injection for failure tests and drills: after a traffic transition's status row committed and before
    # its activation, `exit` ends the process at once, `hang` stops it there (holding the leader lock) until killed.
    fault_after_status_write: Literal["exit", "hang"] | None = None
