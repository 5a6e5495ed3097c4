"""The migrations and the SQLModel models describe the same schema: after upgrading to every head, Alembic's
autogenerate finds nothing to change (a column, index or type added to a model without a migration fails here)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import quantroute.db.tables  # noqa: F401 - every table module registers its models


def test_migrated_schema_matches_the_models(engine):
    with engine.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c, opts={"compare_type": True}), SQLModel.metadata)
    assert diff == []
