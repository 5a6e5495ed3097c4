"""The migrations and the SQLModel models describe the same schema: after upgrading to every head, Alembic's
autogenerate finds nothing to change (a column, index or type added to a model without a migration fails here)."""

from __future__ import annotations

import importlib
import pkgutil

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import quantroute.db


def test_migrated_schema_matches_the_models(engine):
    for mod in pkgutil.iter_modules(quantroute.db.__path__):  # every table module registers its models
        importlib.import_module(f"quantroute.db.{mod.name}")
    with engine.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c, opts={"compare_type": True}), SQLModel.metadata)
    assert diff == []
