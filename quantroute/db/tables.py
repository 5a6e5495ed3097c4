"""Imports every table module so SQLModel.metadata knows the whole schema (Alembic and tests use it).
Each feature area adds its own module here and its own migration branch off `0001_core`."""

# Imported for their side effect (each module's tables register on SQLModel.metadata): ruff's F401 is off for
# this file in pyproject.toml.
from quantroute.db import (
    audit,
    controller,
    loadtest,
    node,
    notification,
    policy_state,
    request_log,
    request_stats,
    rollout,
    session_pin,
    shadow_pair,
    tenant,
    user,
)
from quantroute.db import eval as _eval
